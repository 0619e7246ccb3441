"""The :class:`Analysis` result: tables, warnings and settings (its figures are drawn by :mod:`gengen.report`)."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen import stats
from gengen._files import inside
from gengen._versions import installed_versions
from gengen.analyse.options import Settings
from gengen.errors import GengenError, InputError
from gengen.store.csv_writer import write_csv

#: Distributions whose versions are recorded in ``summary.json`` and in the report.
VERSIONED_PACKAGES = ("gengen", "numpy", "pandas", "scipy", "pyarrow", "matplotlib", "jinja2")


def package_versions() -> dict[str, str]:
    """Installed versions of gengen and the packages its analysis uses (``"not installed"`` when absent)."""
    return installed_versions(VERSIONED_PACKAGES, missing="not installed")


def _json_safe(value: Any) -> Any:
    """Replace NaN/inf by None and numpy scalars by Python ones, recursively."""
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA:
        return None
    return value


#: Columns whose distinct values each group of ``summary.json`` lists (the decision behind its rows).
DECISION_COLUMNS = ("estimand", "p_adjusted_from", "p_deciding_method", "ci_method")


def group_summaries(rows: pd.DataFrame, level: str) -> list[dict[str, Any]]:
    """The ``groups`` entries of ``summary.json`` for the rows of one level.

    Per (model, run), in table order: its counts of rows, test sets and significant pairs (by the sign of the
    estimand that decided them: ``r_innovation`` under the lagged test), its strongest pair, and what decided
    its rows; every count is taken for all groups at once.

    Parameters
    ----------
    rows : DataFrame
        Pairs-table rows of one ``level`` (rows without a model or run are left out).
    level : str
        The level recorded in each entry.

    Returns
    -------
    list of dict
        One entry per group.
    """
    group = rows.groupby(["model", "run"], sort=False).ngroup().to_numpy()
    if not len(rows) or group.max() < 0:
        return []
    size = np.bincount(group[group >= 0])
    first = np.full(len(size), len(rows))
    np.minimum.at(first, group[group >= 0], np.flatnonzero(group >= 0))

    def count(flags: np.ndarray) -> list[int]:
        return np.bincount(group[group >= 0], weights=flags[group >= 0], minlength=len(size)).astype(int).tolist()

    def firsts(column: str) -> list[Any]:
        return rows[column].to_numpy()[first].tolist()

    effect = rows["r_partial"].to_numpy(dtype=float)
    if "estimand" in rows.columns and "r_innovation" in rows.columns:
        lagged = (rows["estimand"] == "r_innovation").to_numpy(dtype=bool, na_value=False)
        effect = np.where(lagged, rows["r_innovation"].to_numpy(dtype=float), effect)
    significant = rows["significant"].fillna(False).astype(bool).to_numpy()
    columns: dict[str, list[Any]] = {
        "n": [int(value) for value in firsts("n")],
        "k": [int(value) for value in firsts("k")],
        "n_testsets": _testset_counts(rows, group, len(size)),
        "n_pairs": size.tolist(),
        "n_significant": count(significant),
        "n_significant_positive": count(significant & (effect > 0)),
        "n_significant_negative": count(significant & (effect < 0)),
        "strongest_pair": _strongest_pairs(rows, group, len(size)),
    }
    for column in (name for name in DECISION_COLUMNS if name in rows.columns):
        columns[column] = _distinct_per_group(rows[column], group, len(size))
    if "diagnostics" in rows.columns:
        columns["n_flagged"] = count((rows["diagnostics"].fillna("") != "").to_numpy(dtype=bool))
    if "testable" in rows.columns:
        columns["n_untestable"] = count(~rows["testable"].fillna(False).astype(bool).to_numpy())
    if "n_steps" in rows.columns:
        columns["n_steps"] = [int(value) for value in firsts("n_steps")]
    keys = {"level": [level] * len(size), "model": firsts("model"), "run": firsts("run")}
    return [{name: values[i] for name, values in {**keys, **columns}.items()} for i in range(len(size))]


def _testset_counts(rows: pd.DataFrame, group: np.ndarray, n_groups: int) -> list[int]:
    """How many distinct test sets each group's pairs name (in ``testset_a`` or ``testset_b``)."""
    names, _ = pd.factorize(pd.concat([rows["testset_a"], rows["testset_b"]], ignore_index=True))
    both = np.concatenate([group, group])
    keep = (both >= 0) & (names >= 0)
    distinct = np.unique(both[keep].astype(np.int64) * (int(names.max()) + 1) + names[keep])
    return np.bincount(distinct // (int(names.max()) + 1), minlength=n_groups).tolist()


def _strongest_pairs(rows: pd.DataFrame, group: np.ndarray, n_groups: int) -> list[list[Any] | None]:
    """Each group's pair of largest |r_partial| (the first of ties, in table order), or None when it has no
    estimate."""
    strength = np.abs(rows["r_partial"].to_numpy(dtype=float))
    candidates = np.flatnonzero((group >= 0) & ~np.isnan(strength))
    # by group, then strongest first, then table order
    ranked = candidates[np.lexsort((candidates, -strength[candidates], group[candidates]))]
    leaders = ranked[np.r_[True, group[ranked][1:] != group[ranked][:-1]]] if len(ranked) else ranked
    out: list[list[Any] | None] = [None] * n_groups
    a, b = rows["testset_a"].to_numpy()[leaders].tolist(), rows["testset_b"].to_numpy()[leaders].tolist()
    r = rows["r_partial"].to_numpy(dtype=float)[leaders].tolist()
    for position, owner in enumerate(group[leaders].tolist()):
        out[owner] = [a[position], b[position], r[position]]
    return out


def _distinct_per_group(column: pd.Series, group: np.ndarray, n_groups: int) -> list[list[str]]:
    """Each group's distinct present values of ``column``, as sorted strings."""
    codes, values = pd.factorize(column)
    keep = (group >= 0) & (codes >= 0)
    text = [str(value) for value in values]
    out: list[set[str]] = [set() for _ in range(n_groups)]
    for owner, code in set(zip(group[keep].tolist(), codes[keep].tolist(), strict=True)):
        out[owner].add(text[code])
    return [sorted(names) for names in out]


#: Files that an analysis folder may hold from an earlier analysis and that describe *that* analysis (its
#: comparison and verdict): removed when a new analysis is written there, so that the report never shows them.
STALE_AFTER_ANALYSIS = ("compare_*.csv", "comparison.json", "verdict.json", "verdict_pairs.csv")


@dataclass
class Analysis:
    """Result of :func:`gengen.analyse`.

    Attributes
    ----------
    pairs : DataFrame
        One row per group × pair of OOD test sets (``level`` is ``"run"`` or ``"across_runs"``): raw and
        partial correlation, statistic, df, p-values (``p_value`` t-test, ``p_perm`` permutation), interval,
        adjusted p-value and the method behind each (``p_value_method``, ``p_perm_method``, ``ci_method``,
        ``p_adjusted_from``), lag-1 autocorrelation of both residual series.
    pooled : DataFrame
        Fisher-z meta-analysis per ``by`` cell with at least two runs (fixed and random effects, τ², Q, I²).
    pooled_residuals : DataFrame
        Pairs-table rows (``level="pooled_residuals"``) for the pooled-residuals mode, when asked for.
    warnings : list of str
        Autocorrelation warnings and notes on left-out rows and test sets.
    settings : Settings
        The options used, checked, with what the analysis resolved from the data (``ood_resolved``,
        ``mode_resolved``...); :meth:`Settings.as_dict` is ``summary.json``'s record of them.
    scores : DataFrame
        The long score table actually used, values sign-adjusted ("higher = better"), with ``role``.
    """

    pairs: pd.DataFrame
    pooled: pd.DataFrame
    pooled_residuals: pd.DataFrame
    warnings: list[str]
    settings: Settings
    scores: pd.DataFrame
    versions: dict[str, str] = field(default_factory=package_versions)

    # ----------------------------------------------------------------- access
    def groups(self, level: str = "run") -> list[tuple[str, str]]:
        """The (model, run) keys of the groups at ``level``, in table order."""
        rows = self.pairs.loc[self.pairs["level"] == level, ["model", "run"]].drop_duplicates()
        # drop_duplicates keeps first occurrences in order (a Python zip over 64,000 rows took 0.2 s per call)
        return list(zip(rows["model"], rows["run"], strict=True))

    def resolve(self, model: str, run: str | None = None, level: str = "run") -> tuple[str, str]:
        """The (model, run) key of one group: ``run`` may be omitted when the model has one run at ``level``.

        Parameters
        ----------
        model : str
            A model of the analysis.
        run : str, optional
            One of its runs; needed only when it has several at ``level``.
        level : str
            ``"run"`` or ``"across_runs"``.

        Returns
        -------
        tuple of str
            ``(model, run)``.

        Raises
        ------
        GengenError
            The model is not in the analysis, has several runs and none was named, or has no such run.
        """
        keys = [key for key in self.groups(level) if key[0] == model]
        if not keys:
            known = sorted({key[0] for key in self.groups(level)})
            raise GengenError(f"model {model!r} is not in the analysis (models: {', '.join(known)})")
        if run is None:
            if len(keys) > 1:
                raise GengenError(f"model {model!r} has {len(keys)} runs; name one with run=")
            return keys[0]
        if (model, run) not in keys:
            raise GengenError(f"model {model!r} has no run {run!r} (runs: {', '.join(k[1] for k in keys)})")
        return model, run

    def matrix(self, model: str, run: str | None = None, value: str = "r_partial", level: str = "run") -> pd.DataFrame:
        """A pairs-table column as a symmetric (test set × test set) matrix for one group.

        The diagonal is 1 for correlations and NaN for any other column.
        """
        model, run = self.resolve(model, run, level)
        rows = self.pairs[(self.pairs["level"] == level) & (self.pairs["model"] == model) & (self.pairs["run"] == run)]
        present = set(rows["testset_a"]) | set(rows["testset_b"])  # once, not per name
        order = [name for name in self.settings.ood_resolved if name in present]
        position = {name: i for i, name in enumerate(order)}
        values = np.full((len(order), len(order)), np.nan)
        i = rows["testset_a"].map(position).to_numpy(dtype=int)
        j = rows["testset_b"].map(position).to_numpy(dtype=int)
        values[i, j] = rows[value].to_numpy(dtype=float)
        values[j, i] = values[i, j]
        if value in ("r_partial", "r_raw"):
            np.fill_diagonal(values, 1.0)
        return pd.DataFrame(values, index=order, columns=order)

    def _score_rows(self) -> dict[tuple[Any, Any], Any]:
        """Each (model, run)'s row positions in ``scores``, from one grouping, kept while ``scores`` is the same
        object of the same length (the report asks for 100 runs' tables: a mask over every row each time cost a
        second at 32 groups x 64 test sets)."""
        key = (id(self.scores), len(self.scores))
        cached = self.__dict__.get("_score_rows_cache")
        if cached is None or cached[0] != key:
            cached = (key, self.scores.groupby(["model", "run"], sort=False).indices)
            self.__dict__["_score_rows_cache"] = cached
        return cached[1]

    def wide(self, model: str, run: str | None = None) -> pd.DataFrame:
        """(step × test set) scores of one run, ID column first, values sign-adjusted."""
        model, run = self.resolve(model, run)
        rows = self.scores.iloc[self._score_rows().get((model, run), [])]
        table = rows.pivot(index="step", columns="testset", values="value").sort_index()
        ood = [name for name in self.settings.ood_resolved if name in table.columns]
        return table[[self.settings.id_testset, *ood]].dropna()

    def residuals(self, model: str, run: str | None = None) -> pd.DataFrame:
        """(step × OOD test set) residuals after regressing out ID with the run's control (its rows' ``fit``:
        under ``fit="auto"`` the one chosen for it), via gengen.stats."""
        table = self.wide(model, run)
        covar = table[self.settings.id_testset].to_numpy(dtype=float)[:, None]
        fit: str = self.settings.fit
        if fit == "auto":
            rows = self.pairs[self.pairs["model"] == model]
            if run is not None:
                rows = rows[rows["run"] == run]
            fit = str(rows["fit"].iloc[0]) if len(rows) else "linear"
        control = self.settings.control_as(fit)
        out = {
            name: np.asarray(
                stats.residualise(table[name].to_numpy(dtype=float), covar, fit=control),
                dtype=float,
            )
            for name in table.columns[1:]
            if table[name].nunique() > 1
        }
        return pd.DataFrame(out, index=table.index)

    # ------------------------------------------------------------------ files
    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json``: settings, versions, warnings and per-group counts."""
        groups = []
        for level in ("run", "across_runs", "pooled_residuals"):
            table = self.pairs if level != "pooled_residuals" else self.pooled_residuals
            if not table.empty:
                groups.extend(group_summaries(table[table["level"] == level], level))
        negated = sorted(set(self.scores.loc[self.scores["sign"] < 0, "metric"].unique()))
        return _json_safe(
            {
                "settings": self.settings.as_dict(),
                "sign_convention": {
                    "rule": "higher = better: lower-is-better metrics are negated before analysis",
                    "lower_is_better": list(self.settings.lower_is_better),
                    "negated_in_this_analysis": negated,
                },
                "versions": self.versions,
                "groups": groups,
                "n_pooled_cells": self._pooled_cells(),
                "warnings": self.warnings,
            }
        )

    def _pooled_cells(self) -> int:
        by = [column for column in self.settings.by if column in self.pooled.columns]
        if self.pooled.empty:
            return 0
        return len(self.pooled.drop_duplicates(by)) if by else 1

    def to_dir(self, out: str | Path) -> dict[str, Path]:
        """Write the tables and ``summary.json`` to the folder ``out`` (created if needed).

        Files: ``pairs.csv``, ``pairs.parquet``, ``pooled.csv``/``.parquet`` and
        ``pooled_residuals.csv``/``.parquet`` when not empty, ``scores.parquet`` (the scores used, so that
        :meth:`from_dir` and ``gengen report`` can redraw figures) and ``summary.json``.

        Returns
        -------
        dict
            File role → path written.
        """
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        written: dict[str, Path] = {}
        # Arrow writes Parquet without holding the GIL: in a thread, beside the formatting of the CSV tables.
        with ThreadPoolExecutor(max_workers=1) as parquet_writer:
            pending = []
            for name, table in (
                ("pairs", self.pairs),
                ("pooled", self.pooled),
                ("pooled_residuals", self.pooled_residuals),
            ):
                csv, parquet = inside(folder, f"{name}.csv"), inside(folder, f"{name}.parquet")
                if table.empty and name != "pairs":
                    # An analysis folder is written whole: an earlier run's pooled table must not outlive it
                    # (the report would show it as this analysis').
                    csv.unlink(missing_ok=True)
                    parquet.unlink(missing_ok=True)
                    continue
                pending.append(parquet_writer.submit(table.to_parquet, parquet, index=False))
                write_csv(table, csv)  # the bytes of table.to_csv(csv, index=False), formatted column-wise
                written[f"{name}.csv"] = csv
                written[f"{name}.parquet"] = parquet
            for pattern in STALE_AFTER_ANALYSIS:
                for stale in sorted(folder.glob(pattern)):
                    inside(folder, stale.name).unlink(missing_ok=True)
            scores = inside(folder, "scores.parquet")
            pending.append(parquet_writer.submit(self.scores.to_parquet, scores, index=False))
            written["scores.parquet"] = scores
            summary = self.summary()
            for job in pending:
                job.result()
        summary["files"] = sorted([*written, "summary.json"])
        summary_path = inside(folder, "summary.json")
        summary_path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written["summary.json"] = summary_path
        return written

    @classmethod
    def from_dir(cls, folder: str | Path) -> Analysis:
        """Read an analysis written by :meth:`to_dir` (or ``gengen analyse --out``).

        Every file is checked as it is read: a file missing, a directory in its place, bytes that are not
        Parquet or JSON, settings of the wrong kind in ``summary.json``, a column of the pairs or scores table
        missing or holding text where a number or a yes/no belongs are each one :class:`InputError` naming the
        file and what is wrong.
        """
        from gengen._files import read_json, read_parquet
        from gengen.analyse import stored

        path = Path(folder)
        for required in ("pairs.parquet", "scores.parquet", "summary.json"):
            stored.check_file(path / required, "expected the output folder of gengen analyse")
        summary = read_json(path / "summary.json")
        if not isinstance(summary, dict) or not isinstance(summary.get("settings"), dict):
            raise InputError(f"{path / 'summary.json'}: no 'settings' object; not written by gengen analyse")
        settings = stored.read_settings(summary["settings"], str(path / "summary.json"))
        warnings = summary.get("warnings", [])
        if not isinstance(warnings, list):
            raise InputError(f"{path / 'summary.json'}: 'warnings' is not a list; not as gengen analyse writes it")
        versions = summary.get("versions", package_versions())
        if not isinstance(versions, dict):
            raise InputError(f"{path / 'summary.json'}: 'versions' is not an object; not as gengen analyse writes it")

        def table(name: str, **columns: tuple[str, ...]) -> pd.DataFrame:
            file = path / f"{name}.parquet"
            frame = read_parquet(file)
            stored.check_columns(frame, str(file), f"{name} table of gengen analyse", **columns)
            return frame

        def optional(name: str) -> pd.DataFrame:
            file = path / f"{name}.parquet"
            if not file.exists():
                return pd.DataFrame()
            stored.check_file(file, "expected the output folder of gengen analyse")
            if name == "pooled":
                return table(name, required=stored.POOLED_REQUIRED, numeric=stored.POOLED_NUMERIC)
            return table(name, required=stored.POOLED_REQUIRED, numeric=stored.PAIRS_NUMERIC)

        pairs = table(
            "pairs", required=stored.PAIRS_REQUIRED, numeric=stored.PAIRS_NUMERIC, boolean=stored.PAIRS_BOOLEAN
        )
        scores = table("scores", required=stored.SCORES_REQUIRED, numeric=stored.SCORES_NUMERIC)
        return cls(
            pairs=pairs,
            pooled=optional("pooled"),
            pooled_residuals=optional("pooled_residuals"),
            warnings=[str(text) for text in warnings],
            settings=settings,
            scores=scores,
            versions={str(key): str(value) for key, value in versions.items()},
        )
