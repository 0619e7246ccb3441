"""From the long score table to the matrices the statistics need: one (checkpoints × test sets) block per run.

Sign convention
---------------
gengen reads every score as "higher = better". A metric whose name contains one of the name parts of
:data:`gengen.analyse.options.LOWER_IS_BETTER` (``loss``, ``perplexity``, ``ppl``, ``bpb``, ``error``, …,
compared case-insensitively word by word, so ``CrossEntropyLoss`` and ``val_bpb`` count), or one the user names
in ``lower_is_better``, is negated before anything is computed, unless it is named in ``higher_is_better``
(:func:`gengen.analyse.options.is_lower_better`). The pairs table records it in the ``sign`` column (``-1`` =
negated). A positive partial correlation therefore always means "the two OOD test sets improve together beyond
what ID predicts", whatever the metric. (Negating both OOD scores of a pair, or the ID covariate, leaves a
partial correlation unchanged; the convention matters for mixed metrics, for trajectories and for reading the
figures.)

Selection
---------
``models``, ``runs``, ``sizes`` and ``shots`` keep the rows whose model, run key, size or shot count matches one
of their glob patterns (:func:`fnmatch.fnmatchcase`); a pattern that matches nothing is an error listing what
exists.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gengen.analyse.information import ColumnInformation, column_information, repeated_rows
from gengen.analyse.options import Settings
from gengen.errors import GengenError, InputError

#: Fewest informative checkpoints a test set needs in a run for its pairs to be tested: the t-test's
#: ``df = n - 2 - k ≥ 2`` with the one ID covariate (``analyse.group_plan.minimum_rows(1)``).
MINIMUM_INFORMATIVE = 5

REQUIRED_COLUMNS = ("model", "run", "step", "testset", "metric", "value")
#: Selection options of :class:`~gengen.analyse.options.Settings` and the score-table column each one filters.
SELECTIONS = (("models", "model"), ("runs", "run"), ("sizes", "size"), ("shots", "shots"))
#: Run-level columns carried from the score table into the pairs table when present.
RUN_COLUMNS = ("study", "family", "size", "seed", "shots", "condition")


@dataclass(frozen=True)
class Group:
    """One set of observations to correlate: the checkpoints of a run, or the final scores of many runs.

    Attributes
    ----------
    level : str
        ``"run"`` (rows are a run's checkpoints) or ``"across_runs"`` (rows are runs).
    meta : dict
        The group's identity as it appears in the pairs table (model, run, and any of study, family, size,
        seed, shots).
    index : ndarray
        Row labels: steps (``level="run"``) or run keys (``level="across_runs"``).
    id_values : ndarray, shape (n,)
        The in-domain score of each row (the covariate).
    scores : DataFrame, shape (n, m)
        OOD scores, one column per test set, rows in ``index`` order.
    dropped : list of str
        OOD test sets left out (absent, constant, or a linear function of ID).
    n_steps : int
        Rows before consecutive repeats were collapsed (:func:`~gengen.analyse.information.collapse_repeats`);
        ``len(index)`` when none were.
    information : dict
        Test set → :class:`~gengen.analyse.information.ColumnInformation` (runs only; empty across runs).
    control : tuple of (str, str), optional
        Under ``fit="auto"``, the control chosen for the group and why (set by
        :func:`gengen.analyse.core.group_controls`, once per pooling cell); None before the choice.
    """

    level: str
    meta: dict[str, Any]
    index: np.ndarray
    id_values: np.ndarray
    scores: pd.DataFrame
    dropped: list[str] = field(default_factory=list)
    n_steps: int = -1
    information: dict[str, ColumnInformation] = field(default_factory=dict)
    control: tuple[str, str] | None = None

    @property
    def label(self) -> str:
        """Human name used in warnings and errors."""
        if self.level == "across_runs":
            cell = ", ".join(f"{key} {value!r}" for key, value in self.meta.items() if key != "run")
            return f"across runs ({cell})"
        return f"model {self.meta['model']!r} run {self.meta['run']!r}"


def check_table(df: pd.DataFrame) -> None:
    """Raise :class:`~gengen.errors.InputError` unless ``df`` has the score table's required columns."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"scores: expected a pandas DataFrame (the score table), got {type(df).__name__}")
    check_columns(df.columns, "scores")
    missing = [column for column in REQUIRED_COLUMNS if column not in df.columns]
    if missing:
        raise InputError(
            f"scores: missing column(s) {', '.join(missing)} (the score table needs {', '.join(REQUIRED_COLUMNS)})"
        )
    if df.empty:
        raise InputError("scores: the table is empty")


def check_columns(columns: Sequence[Any] | pd.Index, where: str) -> None:
    """Raise :class:`~gengen.errors.InputError` (naming ``where`` and the column) unless ``columns`` are one
    name each: no MultiIndex, no name twice."""
    if isinstance(columns, pd.MultiIndex):
        first = ", ".join(repr(name) for name in columns[:2])
        raise InputError(
            f"{where}: the columns are a MultiIndex of {columns.nlevels} levels ({first}, ...); the score table "
            "needs one name per column (flatten them, e.g. df.columns = df.columns.get_level_values(0))"
        )
    names = list(columns)
    repeated = [name for index, name in enumerate(names) if name in names[:index]]
    if repeated:
        count = names.count(repeated[0])
        raise InputError(f"{where}: column {repeated[0]!r} appears {count} times; a score table's columns are unique")


def prepare(df: pd.DataFrame, settings: Settings) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Select the ID and OOD scores, apply the sign convention, and check the test sets exist.

    Parameters
    ----------
    df : DataFrame
        The score table (contract columns; at least ``model, run, step, testset, metric, value``).
    settings : Settings
        Validated options.

    Returns
    -------
    scores : DataFrame
        Long table of the scores used, with ``value`` sign-adjusted, a ``sign`` column (+1 or -1) and a
        ``role`` column (``"id"`` or ``"ood"``).
    ood : tuple of str
        The OOD test sets, in the order given (or sorted when taken from the table).
    """
    check_table(df)
    _check_run_attributes(df, settings)
    _check_pairs_fit(df, settings)
    table = select(df, settings).copy()
    for column in ("model", "run", "testset", "metric"):
        empty = table[column].isna().to_numpy()
        if empty.any():
            row = table.index[int(np.flatnonzero(empty)[0])]
            raise InputError(
                f"scores: column {column!r} is empty in row {row!r} ({int(empty.sum())} of {len(table)} rows)"
            )
        table[column] = table[column].astype(str)
    metrics = sorted(table["metric"].unique())
    if settings.metric not in set(metrics):
        raise GengenError(
            option="metric",
            problem=f"{settings.metric!r} is not a metric of the score table, so fewer than two OOD test sets "
            f"have it{_suggest(settings.metric, metrics)} (metrics: {_short_list(metrics)})",
        )
    if settings.id_metric not in set(metrics):
        raise GengenError(
            option="id_metric",
            problem=f"{settings.id_metric!r} is not a metric of the score table"
            f"{_suggest(settings.id_metric, metrics)} (metrics: {_short_list(metrics)})",
        )
    id_rows = _id_rows(table, settings)
    ood_pool = table[(table["metric"] == settings.metric) & (table["testset"] != settings.id_testset)]
    available = sorted(ood_pool["testset"].unique())
    if settings.ood is not None:
        unknown = [name for name in settings.ood if name not in set(available)]
        if unknown:
            raise GengenError(
                option="ood",
                problem=f"{unknown[0]!r} is not a test set with metric {settings.metric!r}"
                f"{_suggest(unknown[0], available)} (known: {_short_list(available)})",
            )
        ood = settings.ood
    else:
        ood = tuple(available)
        if len(ood) < 2:
            raise GengenError(
                option="metric",
                problem=f"{settings.metric!r} is the metric of fewer than two OOD test sets (found {len(ood)})",
            )
    ood_rows = ood_pool[ood_pool["testset"].isin(ood)]
    used = pd.concat([id_rows.assign(role="id"), ood_rows.assign(role="ood")], ignore_index=True)
    used["value"], used["step"] = _checked_scores(used)
    _refuse_all_missing(used, settings)
    if settings.min_step is not None:
        before = used
        used = used[used["step"] >= settings.min_step]
        if used.empty:
            raise GengenError(
                option="min_step", problem=f"{settings.min_step} leaves no score (none has a step that large)"
            )
        _refuse_one_step_left(before, used, settings.min_step)
    key = ["model", "run", "step", "testset", "metric"]
    duplicated = used.duplicated(key, keep=False)
    if duplicated.any():
        first = used.loc[duplicated, key].iloc[0].to_dict()
        hint = " (several studies? choose one: load_scores(path, study=...), gengen analyse --study)"
        hint = hint if "study" in used.columns else ""
        raise InputError(f"scores: more than one value for {first}{hint}")
    metric_codes, metric_names = pd.factorize(used["metric"])
    used["sign"] = np.array([settings.sign(metric) for metric in metric_names], dtype=np.int64)[metric_codes]
    used["value"] = used["value"] * used["sign"]
    return sorted_scores(used.dropna(subset=["value"])), ood


def _check_run_attributes(df: pd.DataFrame, settings: Settings) -> None:
    """Raise a :class:`~gengen.errors.GengenError` naming ``by`` or ``replicate_key`` when it names an attribute
    that is neither a column of the score table nor a key of its run labels."""
    from gengen.analyse.runs import label_keys

    wanted = [(option, name) for option in ("by", "replicate_key") for name in getattr(settings, option)]
    if all(name in df.columns or name == "condition" for _, name in wanted):
        return
    keys = label_keys(df)
    for option, name in wanted:
        if name not in df.columns and name not in keys and name != "condition":
            if option == "replicate_key" and name in ("seed", "data_seed"):
                continue  # the defaults: a table without seeds simply has none
            known = sorted(set(RUN_COLUMNS) & set(df.columns) | {"model", "run"} | set(keys))
            raise GengenError(
                option=option,
                problem=f"names {name!r}, which is neither a column of the score table nor a key of its run labels "
                f"(run attributes: {', '.join(known)})",
            )


def sorted_scores(used: pd.DataFrame) -> pd.DataFrame:
    """``used`` sorted by model, run, step and test set, with a fresh index (``sort_values`` on those columns:
    the key is unique, so the order is; sorted here on the factorised strings, which orders them alike)."""
    keys = [pd.factorize(used[column], sort=True)[0] for column in ("testset", "run", "model")]
    order = np.lexsort((keys[0], used["step"].to_numpy(dtype=np.int64), keys[1], keys[2]))
    if order.size and np.all(order[1:] > order[:-1]):
        return used.reset_index(drop=True)
    return used.take(order).reset_index(drop=True)


def _id_rows(table: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The in-domain test set's rows with the ID metric; an error naming what exists when there are none."""
    id_rows = table[(table["testset"] == settings.id_testset) & (table["metric"] == settings.id_metric)]
    if id_rows.empty:
        if settings.id_testset in set(table["testset"]):
            own = sorted(table.loc[table["testset"] == settings.id_testset, "metric"].unique())
            raise GengenError(
                option="id_testset",
                problem=f"{settings.id_testset!r} has no metric {settings.id_metric!r} in the score table (its "
                f"metrics: {_short_list(own)})",
                hint="choose the ID's metric (id_metric, --id-metric)",
            )
        known = sorted(table.loc[table["metric"] == settings.id_metric, "testset"].unique())
        others = sorted(set(table["testset"]) - set(known))
        elsewhere = f"; with other metrics: {_short_list(others)}" if others else ""
        raise GengenError(
            option="id_testset",
            problem=f"{settings.id_testset!r} is not a test set of the score table"
            f"{_suggest(settings.id_testset, known + others)} (with metric {settings.id_metric!r}: "
            f"{_short_list(known)}{elsewhere})",
        )
    return id_rows


#: Values in one row of the pairs table, at least (``len(group_plan.PAIR_COLUMNS)``, 8 bytes each): the least a
#: pair takes in memory, so a table refused here could not have been analysed.
PAIR_ROW_VALUES = 64


def _check_pairs_fit(table: pd.DataFrame, settings: Settings) -> None:
    """Refuse, before anything is built, a table whose pairs of test sets could not fit in memory (100,001 test
    sets are 5 billion pairs per group: numpy's MemoryError came after 20 s of work). The test sets counted are
    those of the OOD metric (at most: the selection options may keep fewer)."""
    from gengen.stats.limits import check_array

    if settings.ood is not None:
        m = len(settings.ood)
    else:
        names = table.loc[table["metric"] == settings.metric, "testset"]
        m = int(names.nunique()) - int(bool((names == settings.id_testset).any()))
    pairs = m * (m - 1) // 2
    if pairs <= 100_000:  # at most a few hundred MiB per group: nothing to check before the real work
        return
    groups = len(table[["model", "run"]].drop_duplicates()) if "run" in table.columns else 1
    check_array(
        "ood",
        (groups, pairs, PAIR_ROW_VALUES),
        f"{m:,} OOD test sets are {pairs:,} pairs per group; the pairs table of {groups:,} group"
        f"{'s' if groups != 1 else ''}",
    )


def _refuse_one_step_left(before: pd.DataFrame, after: pd.DataFrame, min_step: int) -> None:
    """``--min-step`` that leaves each run one checkpoint turned a checkpoint analysis into one across runs, and
    the error then blamed ``--id``; it is named instead."""
    runs = ["model", "run"]
    if after.groupby(runs)["step"].nunique().max() > 1 or before.groupby(runs)["step"].nunique().max() <= 1:
        return
    last = int(after["step"].max())
    raise GengenError(
        option="min_step",
        problem=f"{min_step} leaves each run one checkpoint (steps {min_step} to {last}): nothing to correlate "
        "over training; give a smaller --min-step",
    )


def _refuse_all_missing(used: pd.DataFrame, settings: Settings) -> None:
    """A test set whose every score is missing is an error naming it (it was analysed as nothing, exit 0)."""
    present = used["value"].notna().groupby(used["testset"], sort=True).any()
    empty = present.index[~present.to_numpy()].tolist()
    if empty:
        name = settings.id_testset if settings.id_testset in empty else empty[0]
        metric = settings.id_metric if name == settings.id_testset else settings.metric
        raise InputError(
            f"scores: column 'value' is missing in every score of test set {name!r} (metric {metric!r}"
            f"{f'; {len(empty)} test sets so' if len(empty) > 1 else ''}): nothing to correlate; fill the "
            "scores or leave the test set out (--ood)"
        )


def _checked_scores(used: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The ``value`` column as floats and ``step`` as int64, refusing what an import refuses (non-numbers,
    ``inf``, accuracies outside [0, 1], steps that are missing, negative or not whole) with the score's key: a
    table built in Python has not been through ``gengen ingest``."""
    from gengen.store.checks import check_scores

    values = pd.to_numeric(used["value"], errors="coerce").astype(float)
    finite = np.isfinite(values.to_numpy())
    step = used["step"]
    types = pd.api.types
    whole_steps = (
        types.is_integer_dtype(step.dtype)
        and not types.is_bool_dtype(step.dtype)
        and not step.isna().any()  # a nullable Int64 step with <NA>
        and (step >= 0).all()
    )
    if whole_steps and finite.all() and types.is_float_dtype(used["value"].dtype) and values.between(-1, 1).all():
        return values, step.astype("int64")  # nothing to refuse (the store's own tables): skip building labels
    labels = (
        "scores: model " + used["model"].map(repr) + ", run " + used["run"].map(repr) + ", step "
        + step.map(str) + ", test set " + used["testset"].map(repr)
    ).reset_index(drop=True)  # fmt: skip
    if step.isna().any():
        position = int(np.flatnonzero(step.isna().to_numpy())[0])
        raise InputError(f"{labels.iloc[position]}: column 'step' is empty")
    not_number = (~finite & used["value"].notna().to_numpy()) | used["value"].map(_is_bool).to_numpy(dtype=bool)
    if not_number.any():
        position = int(np.flatnonzero(not_number)[0])
        raw = used["value"].iloc[position]
        if isinstance(raw, str) or _is_bool(raw):
            raise InputError(f"{labels.iloc[position]}: column 'value': {raw!r} is not a number")
    check_scores(used[["step", "metric", "value"]], labels)
    return values, pd.to_numeric(step).astype("int64")


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def select(df: pd.DataFrame, settings: Settings) -> pd.DataFrame:
    """The rows of ``df`` that the selection options (``models``, ``runs``, ``sizes``, ``shots``) keep.

    Raises
    ------
    GengenError
        A pattern matches no value of its column (the message lists the values there are), or the table has
        no such column.
    """
    table = df
    for option, column in SELECTIONS:
        patterns = getattr(settings, option)
        if not patterns:
            continue
        if column not in table.columns or table[column].isna().all():
            raise GengenError(option=option, problem=f"cannot select: the score table has no {column!r} values")
        values = table[column].map(_as_text)
        present = sorted(set(values.unique()) - {""}, key=_natural_key)
        wanted: set[str] = set()
        for pattern in patterns:
            found = [value for value in present if fnmatch.fnmatchcase(value, pattern)]
            if not found:
                raise GengenError(
                    option=option,
                    problem=f"{pattern!r} matches no {column}{_suggest(pattern, present)} "
                    f"({column} values: {_short_list(present)})",
                )
            wanted.update(found)
        table = table[values.isin(wanted).to_numpy()]
    return table


def _as_text(value: Any) -> str:
    """A cell as the text patterns are matched against (missing is ``""``, 64.0 is ``"64"``)."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _natural_key(text: str) -> list[tuple[int, float, str]]:
    """Sort key that orders the numbers inside names by value (``seed=2`` before ``seed=10``)."""
    parts = re.split(r"(\d+(?:\.\d+)?)", text)
    return [(0, float(part), "") if part[:1].isdigit() else (1, 0.0, part) for part in parts]


def _suggest(name: str, names: list[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``names``, or an empty string."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _short_list(names: list[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "") if names else "none"


def run_meta(rows: pd.DataFrame, extra: Sequence[str] = ()) -> dict[str, Any]:
    """The identity of one run (model, run, the run-level columns present and the ``extra`` ones, e.g. the
    run attributes ``by`` names), from its rows."""
    meta: dict[str, Any] = {"model": rows["model"].iloc[0], "run": rows["run"].iloc[0]}
    for column in dict.fromkeys([*RUN_COLUMNS, *extra]):
        if column in rows.columns:
            value = rows[column].iloc[0]
            meta[column] = None if pd.isna(value) else value
    return meta


def wide(rows: pd.DataFrame, index: str) -> pd.DataFrame:
    """Pivot long rows to (``index`` × testset) values."""
    return rows.pivot(index=index, columns="testset", values="value").sort_index()


#: A test set whose residual norm after regressing out ID is below this fraction of its centred norm is, to
#: working precision, a linear function of ID (the core's ``MIN_RESIDUAL_FRACTION``).
MIN_RESIDUAL_FRACTION = 1e-11


def explained_by_id(scores: pd.DataFrame, id_values: np.ndarray, ranked: bool = False) -> list[str]:
    """The test sets that are a linear function of the ID score (of its ranks when ``ranked``): nothing is left
    once ID is regressed out, so every partial correlation with them is undefined."""
    if len(id_values) < 3 or scores.empty:
        return []
    values = scores.rank().to_numpy(dtype=float) if ranked else scores.to_numpy(dtype=float)
    control = pd.Series(id_values).rank().to_numpy(dtype=float) if ranked else np.asarray(id_values, dtype=float)
    q, _ = np.linalg.qr(np.column_stack([np.ones(len(control)), control]))
    centred = values - values.mean(axis=0)
    residual = values - q @ (q.T @ values)
    explained = np.linalg.norm(residual, axis=0) <= MIN_RESIDUAL_FRACTION * np.linalg.norm(centred, axis=0)
    return [name for name, flag in zip(scores.columns, explained, strict=True) if flag]


def make_group(
    level: str,
    meta: dict[str, Any],
    table: pd.DataFrame,
    id_testset: str,
    ood: tuple[str, ...],
    ranked: bool = False,
    *,
    n_examples: dict[str, float] | None = None,
    signs: dict[str, float] | None = None,
) -> tuple[Group, list[str]]:
    """Build a :class:`Group` from a wide table (rows × test sets incl. the ID column).

    Rows missing the ID or any OOD score are dropped; in a run, consecutive checkpoints with identical scores
    on every test set are one checkpoint (:func:`~gengen.analyse.information.collapse_repeats`); OOD test sets
    absent from the group, constant in it, or a linear function of ID there (of its ranks when ``ranked``, for
    the rank methods) are left out; in a run, each remaining test set's information is counted
    (:func:`~gengen.analyse.information.column_information`, with ``n_examples`` and ``signs`` per test set).
    Returns the group and its warnings.
    """
    notes: list[str] = []
    label = Group(level, meta, np.array([]), np.array([]), pd.DataFrame()).label
    if id_testset not in table.columns:
        raise GengenError(option="id_testset", problem=f"{id_testset!r} has no scores in {label}")
    present = [name for name in ood if name in table.columns]
    absent = [name for name in ood if name not in table.columns]
    if absent:
        notes.append(f"{label}: no scores for {len(absent)} OOD test set(s) ({_short_list(absent, 5)}); left out")
    # The checks below run on the (rows × [ID, OOD…]) array; the group's frame is built once at the end.
    columns = table.columns.get_indexer([id_testset, *present])
    values = table.to_numpy(dtype=float)[:, columns]
    rows = np.flatnonzero(~np.isnan(values).any(axis=1))
    if rows.size < len(table):
        notes.append(f"{label}: {len(table) - rows.size} of {len(table)} rows lack the ID or an OOD score; left out")
    n_steps = rows.size
    if level == "run" and rows.size >= 2:
        repeat = repeated_rows(values[rows])
        if repeat.any():
            repeated = list(table.index[rows[repeat]])
            rows = rows[~repeat]
            shown = ", ".join(str(step) for step in repeated[:6]) + (", …" if len(repeated) > 6 else "")
            notes.append(
                f"{label}: {len(repeated)} of {n_steps} checkpoints repeat the scores of the checkpoint before on "
                f"every test set (steps {shown}); analysed as {rows.size} distinct checkpoints"
            )
    values = values[rows]
    id_values = values[:, 0].copy()
    scores_values = values[:, 1:]
    index = table.index[rows]
    kept = np.ones(len(present), dtype=bool)
    constant_flags = (scores_values == scores_values[:1]).all(axis=0) if len(rows) else np.ones(len(present), bool)
    constant = [name for name, flag in zip(present, constant_flags, strict=True) if flag]
    if constant:
        notes.append(
            f"{label}: {len(constant)} OOD test set(s) are constant ({_short_list(constant, 5)}); "
            "their correlations are undefined and left out"
        )
        kept &= ~constant_flags
    if len(id_values) and np.unique(id_values).size <= 1:
        raise GengenError(option="id_testset", problem=f"{id_testset!r} is constant in {label}; nothing to regress out")
    names = [name for name, keep in zip(present, kept, strict=True) if keep]
    scores = pd.DataFrame(scores_values[:, kept], index=index, columns=table.columns[columns[1:][kept]])
    linear = explained_by_id(scores, id_values, ranked)
    if linear:
        what = "their ranks are a linear function of the ID ranks" if ranked else "they are a linear function of ID"
        notes.append(
            f"{label}: {len(linear)} OOD test set(s) are explained by {id_testset!r} ({_short_list(linear, 5)}): "
            f"{what}, so nothing is left to correlate; left out"
        )
        scores = scores.iloc[:, [position for position, name in enumerate(names) if name not in set(linear)]]
    information = {}
    if level == "run":
        information = column_information(
            scores,
            id_values,
            index.to_numpy(),
            minimum=MINIMUM_INFORMATIVE,
            n_examples=n_examples,
            signs=signs,
        )
        notes.extend(f"{label}: {info.note}" for info in information.values() if info.note)
    group = Group(
        level,
        meta,
        index.to_numpy(),
        id_values,
        scores,
        dropped=absent + constant + linear,
        n_steps=n_steps,
        information=information,
    )
    return group, notes


def run_groups(scores: pd.DataFrame, settings: Settings, ood: tuple[str, ...]) -> tuple[list[Group], list[str]]:
    """One :class:`Group` per (model, run): rows are checkpoints in step order."""
    groups: list[Group] = []
    notes: list[str] = []
    for meta, table, n_examples, signs in run_tables(scores, settings.by):
        group, group_notes = make_group(
            "run",
            meta,
            table,
            settings.id_testset,
            ood,
            ranked=settings.method != "pearson",
            n_examples=n_examples,
            signs=signs,
        )
        groups.append(group)
        notes.extend(group_notes)
    return groups, notes


def run_tables(
    scores: pd.DataFrame,
    extra: Sequence[str] = (),
) -> Iterator[tuple[dict[str, Any], pd.DataFrame, dict[str, float] | None, dict[str, float]]]:
    """Per (model, run), in sorted order: its identity (:func:`run_meta`), its (step × testset) values
    (:func:`wide`), the median ``n_examples`` of each OOD test set (None without that column) and each OOD test
    set's sign.

    The long table is factorised once and each run's rows are scattered into its wide array, instead of a
    ``groupby``, a pivot and two per-test-set aggregations per run (the same tables).
    """
    model_codes, _ = pd.factorize(scores["model"], sort=True)
    run_codes, run_names = pd.factorize(scores["run"], sort=True)
    testset_codes, testsets = pd.factorize(scores["testset"], sort=True)
    key = model_codes.astype(np.int64) * max(len(run_names), 1) + run_codes
    order = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.concatenate([[True], np.diff(key[order]) != 0])) if len(order) else np.array([], int)
    stops = np.append(starts[1:], len(order))
    step = scores["step"].to_numpy(dtype=np.int64)
    value = scores["value"].to_numpy(dtype=float)
    ood_rows = (scores["role"] == "ood").to_numpy(dtype=bool)
    sign = scores["sign"].to_numpy(dtype=float)
    examples = examples_per_row(scores)
    for start, stop in zip(starts, stops, strict=True):
        rows = order[start:stop]
        steps, step_position = np.unique(step[rows], return_inverse=True)
        codes, column_position = np.unique(testset_codes[rows], return_inverse=True)
        columns = pd.Index(testsets[codes], name="testset")
        names = [str(name) for name in columns.tolist()]
        matrix = np.full((steps.size, codes.size), np.nan)
        matrix[step_position, column_position] = value[rows]
        ood = ood_rows[rows]
        ood_columns = np.unique(column_position[ood])
        signs_of = np.empty(codes.size)
        signs_of[column_position] = sign[rows]  # one sign per test set (its metric's)
        signs = {names[j]: float(signs_of[j]) for j in ood_columns}
        n_examples = None
        if examples is not None:
            counts = np.full((steps.size, codes.size), np.nan)
            counts[step_position[ood], column_position[ood]] = examples[rows[ood]]
            medians = _column_medians(counts[:, ood_columns])
            n_examples = {names[j]: float(m) for j, m in zip(ood_columns, medians, strict=True) if np.isfinite(m)}
        meta = run_meta(scores.iloc[rows[:1]], extra)
        yield meta, pd.DataFrame(matrix, index=pd.Index(steps, name="step"), columns=columns), n_examples, signs


def examples_per_row(scores: pd.DataFrame) -> np.ndarray | None:
    """Each score's number of examples: its ``n_examples``, else, for an accuracy p with a standard error s (lm-eval
    v0.3 stores no count), the N that lm-eval's s = √(p(1 − p)/(N − 1)) implies, N = p(1 − p)/s² + 1, rounded;
    NaN where neither is known (None when the table has neither column)."""
    if "n_examples" not in scores.columns and "stderr" not in scores.columns:
        return None
    count = np.full(len(scores), np.nan)
    if "n_examples" in scores.columns:
        count = pd.to_numeric(scores["n_examples"], errors="coerce").to_numpy(dtype=float)
    if "stderr" in scores.columns:
        p = (scores["value"] * scores["sign"]).to_numpy(dtype=float)
        se = pd.to_numeric(scores["stderr"], errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            implied = np.where((p > 0) & (p < 1) & (se > 0), np.round(p * (1 - p) / se**2 + 1), np.nan)
        count = np.where(np.isfinite(count), count, implied)
    return count


def _column_medians(values: np.ndarray) -> np.ndarray:
    """Each column's median over its non-missing entries (NaN where it has none), as ``groupby().median()``;
    a column whose entries are all equal (a test set scored on one number of examples) is that number."""
    out = np.full(values.shape[1], np.nan)
    present = ~np.isnan(values)
    some = present.any(axis=0)
    low = np.where(present, values, np.inf).min(axis=0, initial=np.inf)
    high = np.where(present, values, -np.inf).max(axis=0, initial=-np.inf)
    same = some & (low == high)
    out[same] = low[same]
    rest = np.flatnonzero(some & ~same)
    if rest.size:
        out[rest] = np.nanmedian(values[:, rest], axis=0)
    return out
