"""The published contract of issue 34, item 6, on the extended grid: every inference path offered by default.

Cells (:data:`CONTRACT_GRID`) are item-level designs of :mod:`gengen.calibration.item_level` (fixed examples,
logistic and probit links, persistent and churning item effects, log-spaced, dense-early and even checkpoints,
N 71 to 30,000, n 11 to 100, a stuck and a class-prior set) and the textbook cell of
:mod:`gengen.calibration.simulate` that the audit named
(saturating links, white noise, n = 50, evenly spaced). Three kinds:

* ``single``: one run per replicate; the run-level rows.
* ``pooled``: one model with ``runs`` seeds per replicate and a third set ``ood_c`` made of both main sets'
  examples (its accuracy is their mean, N = 2N), so that the null pair ``ood_a``/``ood_b`` sits beside two truly
  correlated pairs; the run-level rows and the pooled table's fixed and random effects.
* ``models``: ``models`` models per replicate, the same null structure in all; the run-level rows and the verdict
  across models (:func:`gengen.across.verdict.build_verdict`): Cochran's Q (``p_heterogeneity``), the joint test
  (``p_joint``) and the class (every class but "undetermined" is wrong on a null pair).

Every replicate is analysed by the public :func:`gengen.analyse` once per path of :data:`CONTRACT_PATHS` (the
default, and the lagged test that the analysis offers as calibrated; nothing else is changed from the defaults
but ``n_boot`` and ``seed``); ppcor's t-test, which every analysis reports and warns about, is tallied beside them
from the default's rows. Under an alternative, the **oracle** is the default's statistic with the critical value
a test would use if it knew the process (the AR parameters and everything else): the 95% quantile of the main
pair's |``r_partial``| over the same cell's null replicates, so its power is the most any calibrated test of
``r_partial`` can have on that cell.

:func:`run_contract` writes a long table (one row per cell × hypothesis × path × rows, counts only), which
:func:`contract_summary` turns into rates with their Monte Carlo standard errors, :func:`contract_checks` into the
contract's verdicts and :func:`contract_tables` into docs/calibration.md's tables ("The contract on the extended
grid (issue 34, item 6)"). ``gengen simulate --study contract [--cell LABEL]``; ``benches/calibration_contract.py``
runs cells side by side and compares two runs (before/after).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen.calibration.cell import Cell
from gengen.calibration.item_level import ItemCell, _Draw, _draw, item_table
from gengen.calibration.items import _truth as _item_truth
from gengen.calibration.items import items_summary
from gengen.calibration.learning_curves import curve_table
from gengen.calibration.oracle import item_oracle
from gengen.calibration.realistic import (
    CONTRACT_COVERAGE,
    CONTRACT_FLAGS,
    CONTRACT_TYPE1,
    _add,
    _table,
    _tally_rows,
    contract_status,
)
from gengen.calibration.realistic import _truth as _curve_truth
from gengen.calibration.simulate import simulate
from gengen.errors import GengenError

__all__ = [
    "CONTRACT_COLUMNS",
    "CONTRACT_GRID",
    "CONTRACT_PATHS",
    "CONTRACT_QUICK_GRID",
    "ContractCell",
    "contract_checks",
    "contract_comparison",
    "contract_summary",
    "contract_tables",
    "run_contract",
]

#: The inference paths an analysis offers as calibrated, each the keyword arguments of gengen.analyse beyond the
#: defaults. The t-test, free, block and circular permutations warn in one line that they are not calibrated on
#: trajectories (gengen.analyse.inference.UNCALIBRATED_RATES): the t-test is tallied from the default's rows for
#: reference, the permutations are not run.
CONTRACT_PATHS: dict[str, dict[str, Any]] = {"default": {}, "lagged": {"inference": "lagged"}}
#: Interval columns of each path (the lagged test's interval is of r_innovation).
_INTERVALS = {"default": ("ci_low", "ci_high"), "lagged": ("ci_low_innovation", "ci_high_innovation")}
#: Replicates per call of gengen.analyse where replicates are separate models (the verdict needs one per call).
_BATCH = 60
_SPECIALS = ("stuck", "class-prior")
_KINDS = ("single", "pooled", "models")
#: The two powers the contract reports.
_RHOS = (0.0, 0.3, 0.5)


@dataclass(frozen=True)
class ContractCell:
    """One cell of the contract's grid.

    Parameters
    ----------
    design : ItemCell or Cell
        What is simulated: an item-level design (:class:`gengen.calibration.item_level.ItemCell`) or a cell of
        :mod:`gengen.calibration.simulate`. Its ``rhos`` are the hypotheses (0: the null).
    kind : {"single", "pooled", "models"}
        What is tallied (module docstring).
    well_specified : bool
        Whether flags count against the contract (≤ 20% of the null's testable rows).
    """

    design: ItemCell | Cell
    kind: str = "single"
    well_specified: bool = True

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise GengenError(f"kind: {self.kind!r} is not one of {', '.join(_KINDS)}")
        if self.kind == "models" and (not isinstance(self.design, ItemCell) or self.design.models < 2):
            raise GengenError(f"kind: 'models' needs an item-level cell with at least 2 models ({self.label!r})")
        if self.kind == "pooled" and (not isinstance(self.design, ItemCell) or self.design.runs < 2):
            raise GengenError(f"kind: 'pooled' needs an item-level cell with at least 2 runs ({self.label!r})")

    @property
    def label(self) -> str:
        """The cell's name (its design's)."""
        return self.design.label


def _contract_cells() -> tuple[ContractCell, ...]:
    """Item-level cells first (the audit's designs), then pooled seeds, models, and the textbook cell."""
    item = ItemCell
    return (
        ContractCell(item("log n=40", specials=_SPECIALS, rhos=_RHOS)),
        ContractCell(item("dense-early n=40", schedule="dense-early", specials=_SPECIALS, rhos=(0.0,))),
        ContractCell(item("even n=40", schedule="even", specials=_SPECIALS, rhos=_RHOS)),
        ContractCell(item("probit log n=40", link="probit", specials=_SPECIALS, rhos=(0.0,))),
        ContractCell(item("log n=40, persistent item effects only", churn_sd=0.0, rhos=(0.0,))),
        ContractCell(item("log n=40, churning item effects only", persist_sd=0.0, churn=0.5, rhos=(0.0,))),
        ContractCell(item("log n=11", n=11, rhos=(0.0,))),
        ContractCell(item("log n=100", n=100, specials=("stuck",), rhos=_RHOS)),
        ContractCell(item("WNLI-sized N=71", n_examples=71, rhos=(0.0,))),
        ContractCell(item("log N=30000", n_examples=30_000, specials=("stuck",), rhos=(0.0,))),
        ContractCell(item("log n=40, 10 seeds, a real pair beside", runs=10, rhos=(0.0,)), kind="pooled"),
        ContractCell(item("log n=40, 3 seeds, a real pair beside", runs=3, rhos=(0.0,)), kind="pooled"),
        ContractCell(item("log n=40, 4 models", models=4, rhos=(0.0,)), kind="models"),
        ContractCell(item("log n=40, 2 models", models=2, rhos=(0.0,)), kind="models"),
        ContractCell(item("log n=40, 7 models", models=7, rhos=(0.0,)), kind="models"),
        ContractCell(
            Cell("textbook saturating, white noise, n=50 (even)", n=50, coef_a=(0.0,), shape="saturating", rhos=_RHOS)
        ),
    )


#: The contract's grid (docs/calibration.md, "The contract on the extended grid (issue 34, item 6)").
CONTRACT_GRID: tuple[ContractCell, ...] = _contract_cells()
#: The CI-sized grid: one cell of each kind, small (tests/test_calibration_contract.py).
CONTRACT_QUICK_GRID: tuple[ContractCell, ...] = (
    ContractCell(ItemCell("log n=30 N=300", n=30, n_examples=300, specials=_SPECIALS, rhos=(0.0, 0.5))),
    ContractCell(ItemCell("log n=30 N=300, 3 seeds", n=30, n_examples=300, runs=3, rhos=(0.0,)), kind="pooled"),
    ContractCell(ItemCell("log n=30 N=300, 4 models", n=30, n_examples=300, models=4, rhos=(0.0,)), kind="models"),
)

#: Columns of the long table.
CONTRACT_COLUMNS = (
    "cell",
    "kind",
    "well_specified",
    "hypothesis",
    "rho",
    "true_r",
    "true_r_se",
    "method",
    "rows",
    "replicates",
    "testable",
    "reject",
    "intervals",
    "covered",
    "flagged",
    "flagged_reject",
    "unflagged",
    "unflagged_reject",
    "sum_r",
    "gam_rows",
    "n_boot",
    "cpu_s",
    "default_settings",
)


def _select(grid: Sequence[ContractCell], cells: Sequence[str] | None) -> list[ContractCell]:
    if not cells:
        return list(grid)
    known = {cell.label: cell for cell in grid}
    unknown = [label for label in cells if label not in known]
    if unknown:
        raise GengenError(f"cell: {unknown[0]!r} is not a cell of the grid (cells: {'; '.join(known)})")
    return [known[label] for label in cells]


def _draw_table(
    cell: ContractCell, rho: float, rng: np.random.Generator, count: int, first: int
) -> tuple[pd.DataFrame, list[_Draw]]:
    """``count`` replicates of the cell as one score table (models ``rep{first}``, …), and the item-level draws
    behind it (what the GLS oracle knows; none for a cell of :mod:`gengen.calibration.simulate`)."""
    design = cell.design
    if isinstance(design, Cell):
        return curve_table(design, [simulate(design, rho, rng) for _ in range(count)], first=first), []
    draws = [_draw(design, rho, rng) for _ in range(count)]
    table = item_table(design, [draw.replicate for draw in draws], first=first)
    if cell.kind != "pooled":
        return table, draws
    # ood_c holds both main sets' examples: its accuracy is their mean, and it truly co-moves with each.
    keys = ["model", "run", "step"]
    main = table[table["testset"].isin(["ood_a", "ood_b"])]
    union = main.groupby(keys, sort=False).agg(value=("value", "mean"), n_examples=("n_examples", "sum"))
    union = union.reset_index().assign(testset="ood_c", metric="acc")
    return pd.concat([table, union[table.columns]], ignore_index=True), draws


def _truth(cell: ContractCell, rho: float) -> tuple[float, float]:
    """The main pair's partial correlation in the data and its Monte Carlo s.e. (0 under a null by design)."""
    if isinstance(cell.design, Cell):
        return (0.0, 0.0) if rho == 0 else (_curve_truth(cell.design, rho), float("nan"))
    found = _item_truth(cell.design, rho)
    return found.value, found.se


def _pair_masks(rows: pd.DataFrame, rho: float) -> dict[str, np.ndarray]:
    """The rows tallied: null pairs (every pair but the real ones), the main pair, the pairs holding the stuck or
    the class-prior set, and the real pairs beside (those with ``ood_c``)."""
    a, b = rows["testset_a"].astype(str).to_numpy(), rows["testset_b"].astype(str).to_numpy()
    main = (a == "ood_a") & (b == "ood_b")
    real = (a == "ood_c") | (b == "ood_c")
    out = {"null pairs": ~real & ~(main & (rho > 0)), "main pair": main}
    for name in ("stuck", "class_prior"):
        holding = (a == name) | (b == name)
        if holding.any():
            out[f"with {name}"] = holding
    if real.any():
        out["real pairs"] = real
    return out


def _tally_paths(
    found: Any, path: str, rho: float, truth: float, counts: dict[tuple[str, str], dict[str, float]]
) -> np.ndarray:
    """Add one analysis' run-level (and pooled) tallies of ``path`` to ``counts``; the main pair's |r| of the
    default's testable rows (for the oracle)."""
    runs = found.pairs[found.pairs["level"] == "run"].reset_index(drop=True)
    low, high = _INTERVALS[path]
    for subset, mask in _pair_masks(runs, rho).items():
        chosen = runs[mask]
        # A known value to cover: 0 on null pairs, the simulated r on the main pair under the default's estimand.
        known = subset != "real pairs" and not (subset == "main pair" and rho > 0 and path != "default")
        value = truth if subset == "main pair" else 0.0
        part = _tally_rows(chosen, "p_deciding", low if known else None, high if known else None, value, "diagnostics")
        _add(counts.setdefault((path, subset), {}), part)
        if path == "default":
            part = _tally_rows(chosen, "p_value", None, None, 0.0, None)
            _add(counts.setdefault(("t-test (warned)", subset), {}), part)
    pooled = found.pooled
    if len(pooled) and "p_fixed" in pooled.columns:
        masks = _pair_masks(pooled, rho)
        for kind in ("fixed", "random"):
            for subset in ("main pair", "real pairs"):
                if subset in masks:
                    rows = pooled[masks[subset]].assign(testable=True)
                    known = subset == "main pair" and rho == 0
                    part = _tally_rows(
                        rows,
                        f"p_{kind}",
                        f"ci_low_{kind}" if known else None,
                        f"ci_high_{kind}" if known else None,
                        0.0,
                        "diagnostics",
                    )
                    _add(counts.setdefault((f"{path} pooled {kind}", subset), {}), part)
    main = runs[_pair_masks(runs, rho)["main pair"] & runs["testable"].astype(bool).to_numpy()]
    return np.abs(main["r_partial"].to_numpy(float)) if path == "default" else np.empty(0)


def _tally_verdict(found: Any, path: str, seed: int, counts: dict[tuple[str, str], dict[str, float]]) -> None:
    """The verdict across models on the null pairs: Q's type-I, the joint test's, and wrong classes."""
    from gengen.across.verdict import build_verdict

    pairs = build_verdict(found, n_perm=19, seed=seed).pairs
    a, b = pairs["testset_a"].astype(str), pairs["testset_b"].astype(str)
    null = pairs[~((a == "ood_c") | (b == "ood_c"))].assign(testable=True)
    for name, column in (("Q", "p_heterogeneity"), ("joint test", "p_joint")):
        if column in null.columns:
            part = _tally_rows(null, column, None, None, 0.0, None)
            _add(counts.setdefault((f"{path} verdict {name}", "null pairs"), {}), part)
    # A wrong class counts as a rejection: p 0 where the class is not "undetermined", 1 where it is.
    wrong = null.assign(p_wrong=np.where(null["verdict"].astype(str) != "undetermined", 0.0, 1.0))
    _add(
        counts.setdefault((f"{path} verdict wrong", "null pairs"), {}),
        _tally_rows(wrong, "p_wrong", None, None, 0, None),
    )


def _run_hypothesis(
    cell: ContractCell, rho: float, index: int, replicates: int, n_boot: int, seed: int
) -> tuple[dict[tuple[str, str], dict[str, float]], np.ndarray, str]:
    import gengen

    rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(cell.label.encode()), index]))
    truth = _truth(cell, rho)[0]
    counts: dict[tuple[str, str], dict[str, float]] = {}
    statistics = []
    described = ""
    batch = 1 if cell.kind == "models" else _BATCH
    for first in range(0, replicates, batch):
        table, draws = _draw_table(cell, rho, rng, min(batch, replicates - first), first)
        if _has_gls_oracle(cell):
            _add(counts.setdefault(("GLS oracle", "main pair"), {}), _tally_gls_oracle(cell, draws))
        for path, options in CONTRACT_PATHS.items():
            found = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=seed + first, **options)
            statistics.append(_tally_paths(found, path, rho, truth, counts))
            if cell.kind == "models":
                _tally_verdict(found, path, seed + first, counts)
            if path == "default":
                settings = found.settings
                described = f"fit={settings.fit}; inference={'+'.join(settings.inference)}"
    return counts, np.concatenate(statistics), described


def _has_gls_oracle(cell: ContractCell) -> bool:
    """The GLS oracle runs on single-run item-level cells (one run per replicate: its main pair)."""
    design = cell.design
    return isinstance(design, ItemCell) and cell.kind == "single" and design.runs == 1 and design.models == 1


def _tally_gls_oracle(cell: ContractCell, draws: list[_Draw]) -> dict[str, float]:
    """The GLS oracle's rejections of the main pair (:func:`gengen.calibration.oracle.item_oracle`)."""
    assert isinstance(cell.design, ItemCell)
    found = [item_oracle(cell.design, draw) for draw in draws]
    p = np.array([row.p_value for row in found])
    testable = np.isfinite(p)
    tally = dict.fromkeys(("intervals", "covered", "flagged", "flagged_reject", "gam_rows"), 0.0)
    return {
        **tally,
        "replicates": len(found),
        "testable": int(testable.sum()),
        "reject": int((p[testable] < 0.05).sum()),
        "unflagged": int(testable.sum()),
        "unflagged_reject": int((p[testable] < 0.05).sum()),
        "sum_r": float(np.sum([row.r for row in found])),
    }


def _oracle(null_r: np.ndarray, r: np.ndarray) -> dict[str, float]:
    """Rejections of |r| above the null's 95% quantile (the critical value of a test that knows the process)."""
    critical = float(np.quantile(null_r, 0.95)) if null_r.size else float("nan")
    reject = int((r > critical).sum()) if np.isfinite(critical) else 0
    return {"replicates": r.size, "testable": r.size if np.isfinite(critical) else 0, "reject": reject}


def run_contract(
    grid: Sequence[ContractCell] = CONTRACT_GRID,
    *,
    cells: Sequence[str] | None = None,
    replicates: int = 300,
    alternative_replicates: int | None = None,
    n_boot: int = 199,
    seed: int = 2026,
    csv: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Type-I error, coverage, flags and power of every inference path offered by default, on ``grid``.

    Parameters
    ----------
    grid : sequence of ContractCell
        :data:`CONTRACT_GRID` (docs) or your own cells.
    cells : sequence of str, optional
        Labels of the cells to run (default all): cells run one at a time, so that several processes can run
        different cells side by side, each appending to its own CSV or to the same one.
    replicates : int
        Null replicates per cell (groups of ``models`` × ``runs``).
    alternative_replicates : int, optional
        Replicates of each alternative (default ``replicates``).
    n_boot : int
        Sieve resamples per run.
    seed : int
        Seed of every simulation (each cell and hypothesis its own stream, keyed by the cell's label) and of
        analyse's resampling.
    csv : str or Path, optional
        Append each finished cell to this CSV and skip the cells already in it (a rerun resumes).
    progress : callable, optional
        Called with one line after each cell and hypothesis.

    Returns
    -------
    DataFrame
        Columns :data:`CONTRACT_COLUMNS`: per cell, hypothesis, ``method`` (``default``, ``lagged``, ``t-test
        (warned)``, ``oracle``, ``<path> pooled fixed|random``, ``<path> verdict Q|joint test|wrong``) and ``rows``
        (``null pairs``, ``main pair``, ``with stuck``, ``with class_prior``, ``real pairs``): counts of rows
        (``replicates``), those reported testable with a finite p, rejections among them at α = 0.05, intervals
        and those covering the truth, flagged rows and rejections among flagged and unflagged ones.

    Examples
    --------
    >>> from gengen.calibration.item_level import ItemCell
    >>> tiny = (ContractCell(ItemCell("tiny", n=11, n_examples=100, rhos=(0.0,))),)
    >>> table = run_contract(tiny, replicates=3, n_boot=99)
    >>> sorted(set(table["method"]))
    ['GLS oracle', 'default', 'lagged', 't-test (warned)']
    """
    if replicates < 1 or (alternative_replicates is not None and alternative_replicates < 1):
        raise GengenError(f"replicates: must be at least 1, got {replicates}, {alternative_replicates}")
    chosen = _select(grid, cells)
    path = Path(csv) if csv is not None else None
    previous = (
        pd.read_csv(path, keep_default_na=False, na_values=[""])
        if path is not None and path.exists() and path.stat().st_size
        else pd.DataFrame(columns=list(CONTRACT_COLUMNS))
    )
    done = set(previous["cell"])
    rows: list[dict[str, Any]] = []
    for cell in chosen:
        if cell.label in done:
            continue
        chunk: list[dict[str, Any]] = []
        null_r = np.empty(0)
        for index, rho in enumerate(cell.design.rhos):
            hypothesis = "H0" if rho == 0 else f"rho={rho:g}"
            count = replicates if rho == 0 else (alternative_replicates or replicates)
            started = time.process_time()
            totals, statistics, described = _run_hypothesis(cell, rho, index, count, n_boot, seed)
            if rho == 0:
                null_r = statistics
            else:
                totals[("oracle", "main pair")] = _oracle(null_r, statistics)
            seconds = time.process_time() - started
            truth, truth_se = _truth(cell, rho)
            for (method, subset), tally in totals.items():
                chunk.append(
                    {
                        "cell": cell.label,
                        "kind": cell.kind,
                        "well_specified": cell.well_specified,
                        "hypothesis": hypothesis,
                        "rho": rho,
                        "true_r": truth,
                        "true_r_se": truth_se,
                        "method": method,
                        "rows": subset,
                        **{key: int(value) if key != "sum_r" else value for key, value in tally.items()},
                        "n_boot": n_boot,
                        "cpu_s": round(seconds, 2),
                        "default_settings": described,
                    }
                )
            if progress is not None:
                main = totals[("default", "main pair")]
                rate = main["reject"] / main["testable"] if main["testable"] else float("nan")
                progress(
                    f"{cell.label} {hypothesis}: default rejects {rate:.3f} on the main pair ({seconds:.0f} s CPU)"
                )
        frame = pd.DataFrame(chunk, columns=list(CONTRACT_COLUMNS))
        if path is not None:
            frame.to_csv(path, mode="a", header=not path.exists() or not path.stat().st_size, index=False)
        rows.extend(chunk)
    new = pd.DataFrame(rows, columns=list(CONTRACT_COLUMNS))
    return pd.concat([previous, new], ignore_index=True) if len(previous) else new


def contract_summary(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`gengen.calibration.items.items_summary` of the long table, with the cell's kind and well-specification.

    Parameters
    ----------
    table : DataFrame
        :func:`run_contract`'s result or the CSV it wrote.

    Returns
    -------
    DataFrame
        One row per cell, hypothesis, method and rows: ``replicates``, ``untestable``, ``reject`` (type-I under
        H0, power otherwise) and its Monte Carlo ``se``, ``coverage``, ``flags``, ``testable``, ``mean_r``.
    """
    out = items_summary(table)
    testable = table["testable"].astype(float)
    out["kind"] = table["kind"].to_numpy()
    out["well_specified"] = table["well_specified"].astype(str).isin(["True", "true", "1"]).to_numpy()
    out["testable"] = testable.to_numpy()
    out["mean_r"] = (table["sum_r"].astype(float) / testable.where(testable > 0)).to_numpy()
    return out


#: Methods reported beside the paths, not judged: the t-test (it warns) and the two oracles (they know the process).
_REPORTED_ONLY = ("t-test (warned)", "oracle", "GLS oracle")
#: Rows whose rejections are type-I errors under the null, per method family (the t-test is reference only).
_TYPE1_ROWS = ("null pairs", "main pair", "with stuck", "with class_prior")


def contract_checks(summary: pd.DataFrame) -> pd.DataFrame:
    """The contract of issue 34, item 6 per cell, method, rows and criterion.

    Criteria, among rows reported testable: type-I ≤ 0.065 for every path offered by default (run rows, the
    pooled fixed and random effects, Cochran's Q, the joint test and wrong verdicts across models); coverage of
    the 95% intervals in [0.925, 0.975] (under the null, and of the simulated r on the main pair under an
    alternative); flags ≤ 20% of the null's testable rows in well-specified cells (run rows, and the pooled rows
    of a pooled cell's null pair). ``status`` is ``ok``,
    ``over`` (broken by less than two Monte Carlo standard errors) or ``FAIL``. The t-test and the oracle are
    reported, not judged.

    Parameters
    ----------
    summary : DataFrame
        :func:`contract_summary`'s result.

    Returns
    -------
    DataFrame
        Columns ``cell, hypothesis, method, rows, criterion, value, count, bound, status``.
    """
    records = []

    def check(row: Any, criterion: str, value: float, low: float, high: float, count: float) -> None:
        if not np.isfinite(value) or not count:
            return
        records.append(
            {
                "cell": row.cell,
                "hypothesis": row.hypothesis,
                "method": row.method,
                "rows": row.rows,
                "criterion": criterion,
                "value": value,
                "count": int(count),
                "bound": f"[{low:g}, {high:g}]",
                "status": contract_status(value, low, high, count),
            }
        )

    for row in summary.itertuples(index=False):
        if row.method in _REPORTED_ONLY:
            continue
        null = row.hypothesis == "H0"
        if null and row.rows in _TYPE1_ROWS:
            check(row, "type-I", row.reject, 0.0, CONTRACT_TYPE1, row.testable)
        if np.isfinite(row.coverage) and row.rows != "real pairs":
            check(row, "coverage", row.coverage, *CONTRACT_COVERAGE, row.testable)
        if null and row.well_specified and row.method in CONTRACT_PATHS and row.rows == "null pairs":
            check(row, "flags", row.flags, 0.0, CONTRACT_FLAGS, row.testable)
        # A pooled row's flags are its own (a pooled cell's null pair is its main pair): the random effect's
        # row carries the same diagnostics as the fixed effect's, so it is checked once.
        if null and row.well_specified and str(row.method).endswith("pooled fixed") and row.rows == "main pair":
            check(row, "flags", row.flags, 0.0, CONTRACT_FLAGS, row.testable)
    columns = ["cell", "hypothesis", "method", "rows", "criterion", "value", "count", "bound", "status"]
    return pd.DataFrame(records, columns=columns)


def _fmt(value: float, digits: int = 3) -> str:
    return "–" if not np.isfinite(value) else f"{value:.{digits}f}"


def _pct(value: float) -> str:
    return "–" if not np.isfinite(value) else f"{100 * value:.0f}%"


def _rate(row: Any) -> str:
    return "–" if not np.isfinite(row.reject) else f"{_fmt(row.reject)} ± {_fmt(row.se)}"


def _lookup(summary: pd.DataFrame, cell: str, hypothesis: str, method: str, rows: str) -> Any:
    found = summary[
        (summary["cell"] == cell)
        & (summary["hypothesis"] == hypothesis)
        & (summary["method"] == method)
        & (summary["rows"] == rows)
    ]
    return next(found.itertuples(index=False)) if len(found) else None


def _null_section(summary: pd.DataFrame) -> list[str]:
    """Per cell and path under the null: type-I (all null pairs, main pair, with the stuck set), coverage,
    flags, untestable shares."""
    lines = []
    for (cell, method), part in summary[summary["hypothesis"] == "H0"].groupby(["cell", "method"], sort=False):
        if method not in (*CONTRACT_PATHS, "t-test (warned)", "GLS oracle"):
            continue
        by_rows = {row.rows: row for row in part.itertuples(index=False)}
        # The GLS oracle tests the main pair only.
        every = by_rows.get("null pairs", by_rows.get("main pair") if method == "GLS oracle" else None)
        if every is None:
            continue
        stuck = by_rows.get("with stuck")
        prior = by_rows.get("with class_prior")
        main = by_rows.get("main pair")
        lines.append(
            [
                str(cell),
                str(method),
                str(int(every.replicates)),
                _rate(every),
                _rate(main) if main is not None else "–",
                _rate(stuck) if stuck is not None else "–",
                _fmt(every.coverage),
                _pct(every.flags),
                " / ".join(_pct(r.untestable) if r is not None else "–" for r in (stuck, prior, main)),
                _fmt(main.mean_r) if main is not None else "–",
            ]
        )
    columns = [
        "cell",
        "path",
        "null rows",
        "type-I null pairs",
        "type-I main pair",
        "type-I with the stuck set",
        "coverage",
        "flagged",
        "untestable: stuck / class-prior / main",
        "mean r, main pair",
    ]
    return _table("Under the null, among rows reported testable (α = 0.05, ± one MC s.e.)", columns, lines)


def _power_section(summary: pd.DataFrame) -> list[str]:
    lines = []
    alternatives = summary[(summary["hypothesis"] != "H0") & (summary["rows"] == "main pair")]
    for (cell, hypothesis), part in alternatives.groupby(["cell", "hypothesis"], sort=False):
        by_method = {row.method: row for row in part.itertuples(index=False)}
        default = by_method.get("default")
        if default is None:
            continue
        lines.append(
            [
                str(cell),
                str(hypothesis),
                _fmt(default.true_r),
                str(int(default.replicates)),
                *(
                    _rate(by_method[name]) if name in by_method else "–"
                    for name in ("default", "lagged", "GLS oracle", "oracle", "t-test (warned)")
                ),
                _fmt(default.coverage),
                _fmt(default.mean_r),
            ]
        )
    columns = [
        "cell",
        "hypothesis",
        "true r (simulated)",
        "runs",
        "power: default",
        "lagged",
        "GLS oracle (knows the noise)",
        "oracle (null quantile of r)",
        "t-test (warned)",
        "coverage of the true r (default)",
        "mean r",
    ]
    return _table("Power on the main pair (α = 0.05, ± one MC s.e.)", columns, lines)


def _groups_section(summary: pd.DataFrame) -> list[str]:
    """Pooled effects and verdicts across models: their type-I on the null pair(s), power on the real pairs."""
    lines = []
    kinds = summary[summary["method"].str.contains("pooled|verdict", regex=True)]
    for row in kinds.itertuples(index=False):
        lines.append(
            [
                str(row.cell),
                str(row.method),
                str(row.rows),
                str(int(row.replicates)),
                _rate(row) if row.rows != "real pairs" else "–",
                _rate(row) if row.rows == "real pairs" else "–",
                _fmt(row.coverage),
                _pct(row.flags) if "pooled" in str(row.method) else "–",
            ]
        )
    columns = ["cell", "method", "rows", "groups × pairs", "type-I", "power", "coverage of 0", "flagged"]
    return _table("Pooled seeds and the verdict across models (α = 0.05, ± one MC s.e.)", columns, lines)


def _checks_section(checks: pd.DataFrame) -> list[str]:
    held = int((checks["status"] != "FAIL").sum())
    failing = checks[checks["status"] != "ok"]
    lines = [
        [
            str(row.cell),
            str(row.hypothesis),
            str(row.method),
            str(row.rows),
            str(row.criterion),
            f"{_fmt(row.value)} (of {row.count})",
            str(row.bound),
            str(row.status),
        ]
        for row in failing.itertuples(index=False)
    ]
    title = (
        f"The contract: {held} of {len(checks)} checks hold within two MC s.e. "
        f"({int((checks['status'] == 'ok').sum())} inside the bound); those not inside"
    )
    return _table(title, ["cell", "hypothesis", "method", "rows", "criterion", "value", "bound", "status"], lines)


def contract_tables(table: pd.DataFrame) -> str:
    """The long table as docs/calibration.md's Markdown tables.

    The null, power, pooled effects and verdicts, and the contract's checks not inside their bound.

    Parameters
    ----------
    table : DataFrame
        :func:`run_contract`'s result or the CSV it wrote.

    Returns
    -------
    str
        Four Markdown tables separated by blank lines.
    """
    summary = contract_summary(table)
    sections = [
        _null_section(summary),
        _power_section(summary),
        _groups_section(summary),
        _checks_section(contract_checks(summary)),
    ]
    # A section with no rows (no alternative, pooled or multi-model cell run) is left out.
    return "\n\n".join("\n".join(section) for section in sections if len(section) > 4) + "\n"


def contract_comparison(before: pd.DataFrame, after: pd.DataFrame) -> str:
    """Before/after: every judged rate of the contract (and power) of two runs side by side, as Markdown.

    Parameters
    ----------
    before, after : DataFrame
        Two :func:`run_contract` results (or their CSVs) on the same grid.

    Returns
    -------
    str
        One Markdown table: cell, method, rows, criterion, the two values ± MC s.e. and the two statuses
        (rows in only one of the runs show "–" for the other).
    """
    keys = ["cell", "hypothesis", "method", "rows", "criterion"]
    first = contract_checks(contract_summary(before))
    second = contract_checks(contract_summary(after))
    power = []
    for frame in (before, after):
        summary = contract_summary(frame)
        rows = summary[(summary["hypothesis"] != "H0") & (summary["rows"] == "main pair")]
        power.append(
            rows.assign(criterion="power", value=rows["reject"], count=rows["testable"]).assign(bound="", status="")[
                [*keys, "value", "count", "bound", "status"]
            ]
        )
    merged = pd.concat([first, power[0]]).merge(
        pd.concat([second, power[1]]), on=keys, how="outer", suffixes=("_before", "_after"), sort=False
    )

    def shown(value: float, count: float) -> str:
        if not np.isfinite(value):
            return "–"
        return f"{_fmt(value)} ± {_fmt(float(np.sqrt(value * (1 - value) / count)) if count else float('nan'))}"

    lines = [
        [
            str(row.cell),
            str(row.hypothesis),
            str(row.method),
            str(row.rows),
            str(row.criterion),
            shown(row.value_before, row.count_before),
            str(row.status_before) if isinstance(row.status_before, str) else "–",
            shown(row.value_after, row.count_after),
            str(row.status_after) if isinstance(row.status_after, str) else "–",
        ]
        for row in merged.itertuples(index=False)
    ]
    columns = ["cell", "hypothesis", "method", "rows", "criterion", "before", "status", "after", "status"]
    return "\n".join(_table("Before and after (α = 0.05, ± one MC s.e.)", columns, lines)) + "\n"
