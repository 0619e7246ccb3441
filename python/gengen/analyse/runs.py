"""What a run is: a replicate (seed, data seed) of a condition. Conditions are never pooled as replicates.

A score table's runs can be replicates of one set-up (``seed=1``, ``seed=2``, ``seed=3``) or different set-ups:
Pythia's ``zero-shot`` and ``five-shot`` evaluations, OLMo-2's ``0.5xC`` … ``10xC`` compute ladder, two learning
rates or prompt formats. Meta-analysing the second kind as seeds answers a question nobody asked (the average over
set-ups someone happened to run) with a test built for replicates. :func:`run_design` reads each run's attributes
from the store's columns (``seed``, ``shots``, ``data_seed``) and its label
(:func:`gengen.store.run_keys.run_attributes`:
``key=value`` lists, ``zero-shot``/``five-shot``, ``NxC``). The attributes named by ``replicate_key`` (default
``seed`` and ``data_seed``) vary between replicates; every other attribute is part of the run's **condition**
(``condition`` column, e.g. ``"shots=5"``), and runs of different conditions are pooled neither in the pooled
tables nor in the verdict's per-model estimate.

Runs whose labels carry nothing that tells replicates apart (two runs ``main`` and ``rerun`` of one model, with no
seed) are not pooled either: each label becomes its own condition (``run=rerun``) and a warning names them, with
``replicate_key="run"`` (``--replicate-key run``) to declare them replicates. The choice between refusing and
pooling with a warning is measured in ``docs/analysis.md`` ("What a run is").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from gengen.store.run_keys import run_attributes

__all__ = ["CONDITION", "RunDesign", "label_keys", "pooled_over", "run_design", "with_run_design"]

#: The column that names a run's condition (its attributes other than the replicate keys; ``""`` for none).
CONDITION = "condition"
#: Attributes the score table may hold as columns (filled from labels where missing).
_STORED = ("seed", "shots", "data_seed")
#: Columns that identify a run's model rather than describe the run.
_MODEL_COLUMNS = ("study", "family", "model", "size")


@dataclass
class RunDesign:
    """Each run's attributes and condition, and what the analysis says about them.

    Attributes
    ----------
    runs : DataFrame
        One row per (model, run): ``model, run``, one column per attribute found, and ``condition``.
    attributes : tuple of str
        The attributes found (stored columns and label keys), in order of first appearance.
    warnings : list of str
        Runs kept apart that the table might have meant as replicates, and conditions kept apart.
    """

    runs: pd.DataFrame
    attributes: tuple[str, ...]
    warnings: list[str] = field(default_factory=list)

    @property
    def has_conditions(self) -> bool:
        """Whether some run has a condition (else the pooling cells are the ``by`` cells as they were)."""
        return bool((self.runs[CONDITION] != "").any())


def label_keys(scores: pd.DataFrame) -> set[str]:
    """The attributes the run labels of a score table carry (:func:`gengen.store.run_keys.run_attributes`)."""
    if not isinstance(scores, pd.DataFrame) or isinstance(scores.columns, pd.MultiIndex) or "run" not in scores:
        return set()
    runs = scores["run"]
    if not isinstance(runs, pd.Series):  # a column named twice: the table's own check says so
        return set()
    keys: set[str] = set()
    for run in pd.unique(runs.astype(str)):
        keys.update(run_attributes(run)[0])
    return keys


def _text(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def run_design(
    scores: pd.DataFrame, by: tuple[str, ...], replicate_key: tuple[str, ...], *, unnamed_apart: bool = True
) -> RunDesign:
    """Each (model, run)'s attributes and condition (see the module).

    Parameters
    ----------
    scores : DataFrame
        The score table (``model``, ``run``; ``seed``, ``shots``, ``data_seed`` used when present).
    by : tuple of str
        The pooling cells' columns: runs that differ in them are never pooled anyway.
    replicate_key : tuple of str
        The attributes that vary between replicates (``"run"``: the labels themselves name replicates).
    unnamed_apart : bool
        Keep runs that no replicate key tells apart in conditions of their own (False across runs, where the
        runs of a cell are its exchangeable observations).

    Returns
    -------
    RunDesign
    """
    stored = [column for column in _STORED if column in scores.columns]
    identity = [column for column in _MODEL_COLUMNS if column in scores.columns and column not in ("model",)]
    runs = scores[["model", "run", *identity, *stored]].drop_duplicates(["model", "run"]).reset_index(drop=True)
    records: list[dict[str, str]] = []
    order: dict[str, None] = {}
    for row in runs.itertuples(index=False):
        attributes, _ = run_attributes(str(row.run))
        for column in stored:
            value = _text(getattr(row, column))
            if value:
                attributes[column] = value  # the stored column wins over the label
        records.append(attributes)
        order.update(dict.fromkeys(attributes))
    names = tuple(order)
    table = runs[["model", "run", *identity]].copy()
    for name in names:
        if name in ("model", "run", *identity):
            continue
        table[name] = [record.get(name, "") for record in records]
    replicates = set(replicate_key)
    kept_apart = set(by) | set(_MODEL_COLUMNS)
    # attributes ``by`` names already keep runs apart (shots by default); the rest is the condition
    condition_keys = [name for name in names if name not in replicates and name != "run" and name not in by]
    table[CONDITION] = [
        ",".join(f"{name}={record[name]}" for name in condition_keys if record.get(name, "") != "")
        for record in records
    ]
    warnings: list[str] = []
    if "run" not in replicates and unnamed_apart:
        _separate_unnamed_replicates(table, records, replicates, by, warnings)
    cell = ["model", *[column for column in by if column in table.columns and column != "model"]]
    for key, rows in table.groupby(cell, sort=True, dropna=False):
        conditions = sorted(set(rows[CONDITION]))
        if len(conditions) > 1:
            differing = [
                name for name in condition_keys if name not in kept_apart and rows[name].nunique(dropna=False) > 1
            ] if condition_keys else []  # fmt: skip
            model = key[0] if isinstance(key, tuple) else key
            warnings.append(
                f"model {model!r}: {len(rows)} runs in {len(conditions)} conditions "
                f"({'; '.join(c or 'none' for c in conditions[:4])}{', …' if len(conditions) > 4 else ''}) "
                f"differ in {', '.join(differing) or 'their labels'}: each condition is analysed and pooled on "
                "its own, never as replicates of another"
            )
    return RunDesign(table, names, warnings)


def _separate_unnamed_replicates(
    table: pd.DataFrame,
    records: list[dict[str, str]],
    replicates: set[str],
    by: tuple[str, ...],
    warnings: list[str],
) -> None:
    """Runs of one model, ``by`` cell and condition that no replicate key tells apart (``main`` and ``rerun``) get
    their label as a condition of its own (``run=rerun``), with a warning naming them."""
    keys = [name for name in replicates if name != "run"]
    cell = ["model", *[column for column in by if column in table.columns and column != "model"], CONDITION]
    replicate_of = pd.Series(
        ["|".join(record.get(name, "") for name in sorted(keys)) for record in records], index=table.index
    )
    for key, rows in table.groupby(cell, sort=True, dropna=False):
        if len(rows) < 2:
            continue
        clashing = replicate_of[rows.index].duplicated(keep=False)
        if not clashing.any():
            continue
        labels = rows.loc[clashing.to_numpy(), "run"].astype(str).tolist()
        for index in rows.index[clashing.to_numpy()]:
            own = f"run={table.at[index, 'run']}"
            table.at[index, CONDITION] = f"{table.at[index, CONDITION]},{own}" if table.at[index, CONDITION] else own
        model = key[0] if isinstance(key, tuple) else key
        shown = ", ".join(repr(label) for label in labels[:6]) + (", …" if len(labels) > 6 else "")
        warnings.append(
            f"model {model!r}: runs {shown} carry no {' or '.join(sorted(keys)) or 'replicate key'} that tells "
            "replicates apart: not pooled, each analysed as its own condition (replicate_key='run', "
            "--replicate-key run, pools them as replicates)"
        )


def with_run_design(
    scores: pd.DataFrame, by: tuple[str, ...], replicate_key: tuple[str, ...], *, unnamed_apart: bool = True
) -> tuple[pd.DataFrame, RunDesign]:
    """``scores`` with the run attributes that ``by`` names and the table lacks (keys of run labels), and
    ``condition`` when some run has one; and the :class:`RunDesign` they come from."""
    design = run_design(scores, by, replicate_key, unnamed_apart=unnamed_apart)
    wanted = [name for name in by if name not in scores.columns and name in design.runs.columns and name not in _STORED]
    if design.has_conditions:
        wanted.append(CONDITION)
    # stored keys the table lacks but the labels give (a score table of runs "zero-shot", "five-shot")
    filled = [
        name
        for name in _STORED
        if name in design.runs.columns
        and name not in wanted
        and (name not in scores.columns or scores[name].isna().any())
        and (design.runs[name] != "").any()
    ]
    if not wanted and not filled:
        return scores, design
    added = design.runs[["model", "run", *wanted, *filled]].copy()
    for name in filled:
        read = added.loc[added[name] != "", ["run", name]].drop_duplicates("run")
        shown = ", ".join(f"{run!r} -> {value}" for run, value in read.itertuples(index=False))
        design.warnings.append(f"{name} read from the run labels: {shown}")
        added[name] = pd.to_numeric(added[name].replace("", None), errors="coerce").astype("Int64")
    merged = scores.drop(columns=[name for name in filled if name in scores.columns]).merge(
        added, on=["model", "run"], how="left", validate="many_to_one"
    )
    return merged, design


def pooled_over(pooled: pd.DataFrame, design: RunDesign, replicate_key: tuple[str, ...]) -> pd.DataFrame:
    """The pooled table with a ``pooled_over`` column after ``runs``: what its runs were pooled as replicates over
    (``"seed: 1, 2, 3"``; ``"run labels: main, rerun"`` when ``replicate_key`` has ``run`` and no key differs)."""
    if pooled.empty or "runs" not in pooled.columns:
        return pooled
    attributes = design.runs.set_index(["model", "run"])
    keys = [name for name in replicate_key if name != "run" and name in attributes.columns]
    texts: dict[str, str] = {}
    for runs in pd.unique(pooled["runs"].astype(str)):
        members = [tuple(item.split("/", 1)) for item in runs.split(";") if "/" in item]
        if not members:
            texts[runs] = ""
            continue
        rows = attributes.loc[[member for member in members if member in attributes.index]]
        parts = [
            f"{name}: {', '.join(str(value) for value in rows[name])}" for name in keys if rows[name].nunique() > 1
        ]
        if not parts and "run" in replicate_key:
            parts = [f"run labels: {', '.join(run for _, run in members)}"]
        texts[runs] = "; ".join(parts)
    column = pooled["runs"].astype(str).map(texts)
    position = list(pooled.columns).index("runs") + 1
    out = pooled.copy()
    out.insert(position, "pooled_over", column.to_numpy())
    return out
