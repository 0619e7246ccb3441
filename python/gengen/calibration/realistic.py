r"""The realistic measure of :func:`gengen.calibration.studies.calibration_study`: gengen.analyse on learning curves.

The realistic grid of issue 23 (:data:`REALISTIC_GRID`, ``gengen simulate --study realistic``, formerly ``--grid
--realistic``) simulates fine-tuning learning curves (:class:`gengen.calibration.simulate.Cell` of the ``"curves"``
process,
:mod:`gengen.calibration.learning_curves`: step 0 at chance, log-spaced, dense-early and even schedules, accuracies
counted on
fixed test sets of 200 to 30,000 examples, a test set stuck at chance, plateaus, duplicated checkpoints, saturating
links, pooled seeds) and runs the public :func:`gengen.analyse` with whatever its defaults are, recording among
the rows it reports testable the type-I error, coverage, power at ρ = 0.3 and 0.5, the untestable share and the
flag rates, beside the lagged test and ppcor's t-test. :func:`realistic_summary`, :func:`realistic_contract` and
:func:`realistic_tables` read its long table.
"""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from gengen import stats
from gengen.calibration.learning_curves import CurveCell, curve_table, design_partial_corr
from gengen.calibration.simulate import Cell, Replicate, simulate
from gengen.errors import GengenError
from gengen.stats.correlation import consistent_interval
from gengen.stats.lagged import lagged_partial_corr_matrix

__all__ = [
    "REALISTIC_COLUMNS",
    "REALISTIC_GRID",
    "REALISTIC_QUICK_GRID",
    "contract_status",
    "realistic_contract",
    "realistic_summary",
    "realistic_tables",
    "reference_tests",
    "run_realistic",
]

#: Runs analysed per call of gengen.analyse (one table of many models: the per-call start-up is paid once).
_BATCH = 60


def _realistic_cells() -> tuple[Cell, ...]:
    """Base: log-spaced, n = 20, N = 1,000, φ = 0.9, linear link; each other cell changes one or two things.

    In order of importance, so that a study stopped part-way (its CSV) has the cells that matter most.
    """
    base = CurveCell("log n=20")

    def stuck(n: int) -> Cell:
        # The HANS-like null of issue 23: ood_b at chance after step 0, ood_a off its line at step 0.
        return CurveCell(
            f"stuck n={n} N=30000", n=n, n_examples=30000, special="stuck", jump=(0.05, 0.0), well_specified=False
        )

    return (
        base,
        stuck(20),
        CurveCell("log n=11", n=11),
        CurveCell("log n=40", n=40),
        CurveCell("log n=20 N=200", n_examples=200),
        CurveCell("log n=20 N=30000", n_examples=30000),
        CurveCell("duplicates n=20", special="duplicates", well_specified=False),
        CurveCell("plateau n=20", special="plateau", well_specified=False),
        CurveCell("saturating n=20", link="saturating", well_specified=False),
        CurveCell("log n=20, 3 seeds", runs=3),
        stuck(11),
        stuck(40),
        stuck(100),
        CurveCell("even n=20", schedule="even"),
        CurveCell("dense-early n=20", schedule="dense-early"),
        CurveCell("log n=20 phi=0.5", phi=0.5),
        CurveCell("log n=100", n=100),
        CurveCell("step-0 jump n=20", jump=(0.05, 0.03), well_specified=False),
        CurveCell("saturating n=40 N=30000", n=40, n_examples=30000, link="saturating", well_specified=False),
        # Type-I and coverage of 0 only (the alternatives' coverage is the 3-seed cell's): 10 runs per group.
        CurveCell("log n=20, 10 seeds", runs=10, alternatives=False),
    )


#: The realistic grid of docs/calibration.md ("Realistic learning curves").
REALISTIC_GRID: tuple[Cell, ...] = _realistic_cells()
#: The CI-sized grid of tests/test_calibration_realistic.py.
REALISTIC_QUICK_GRID: tuple[Cell, ...] = (
    CurveCell("log n=20", n=20),
    CurveCell("stuck n=20 N=30000", n=20, n_examples=30000, special="stuck", jump=(0.05, 0.0), well_specified=False),
    CurveCell("log n=20, 3 seeds", runs=3, alternatives=False),
)
#: Columns of the long table of the realistic measure (one row per cell × hypothesis × method).
REALISTIC_COLUMNS = (
    "cell",
    "n",
    "schedule",
    "n_examples",
    "phi",
    "link",
    "special",
    "runs",
    "well_specified",
    "hypothesis",
    "rho",
    "true_r",
    "method",
    "replicates",
    "testable",
    "reject",
    "covered",
    "intervals",
    "flagged",
    "flagged_reject",
    "unflagged",
    "unflagged_reject",
    "sum_r",
    "gam_rows",
    "n_boot",
    "cpu_s",
    "default_settings",
    "finished",
)


def _has_alternative(cell: Cell) -> bool:
    # A test set stuck at chance or frozen for half the run has no correlation to detect; with a step-0 jump
    # the partial correlation the data carry is not known in closed form.
    return cell.has_alternative and cell.special not in ("stuck", "plateau") and cell.jump == (0.0, 0.0)


def _hypotheses(cell: Cell) -> tuple[tuple[str, float], ...]:
    alternatives = tuple((f"rho={rho:g}", rho) for rho in cell.rhos if rho > 0) if _has_alternative(cell) else ()
    return (("H0", 0.0), *alternatives)


def _stream(seed: int, cell: Cell, hypothesis: int) -> np.random.Generator:
    """The cell's own stream, keyed by its label (adding a cell to the grid changes no other cell)."""
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(cell.label.encode()), hypothesis]))


def _column(table: pd.DataFrame, name: str, default: Any) -> pd.Series:
    """A pairs-table column, or its default where this version of analyse does not write it."""
    if name in table.columns:
        return table[name]
    return pd.Series([default] * len(table), index=table.index)


def _tally_rows(
    rows: pd.DataFrame, p: str, low: str | None, high: str | None, truth: float, flags: str | None
) -> dict[str, float]:
    """Counts of one method over rows of the pairs (or pooled) table: testable, rejections, coverage, flags."""
    # An untestable row may lack the p-value and interval columns altogether (a table of untestable rows only).
    rows = rows.assign(**{name: _column(rows, name, np.nan) for name in (p, low, high) if name is not None})
    testable = _column(rows, "testable", True).astype(bool).to_numpy() & np.isfinite(rows[p].to_numpy(float))
    kept = rows[testable]
    reject = kept[p].to_numpy(float) < 0.05
    out: dict[str, float] = {"replicates": len(rows), "testable": int(testable.sum()), "reject": int(reject.sum())}
    if low is not None and high is not None:
        lo, hi = kept[low].to_numpy(float), kept[high].to_numpy(float)
        has = np.isfinite(lo) & np.isfinite(hi)
        out["intervals"] = int(has.sum())
        out["covered"] = int(((lo <= truth) & (truth <= hi) & has).sum())
    else:
        out["intervals"] = out["covered"] = 0
    if flags is not None and flags in kept.columns:
        flagged = kept[flags].fillna("").astype(str).str.len().to_numpy() > 0
    else:
        flagged = np.zeros(len(kept), dtype=bool)
    out["flagged"] = int(flagged.sum())
    out["flagged_reject"] = int((flagged & reject).sum())
    out["unflagged"] = int((~flagged).sum())
    out["unflagged_reject"] = int((~flagged & reject).sum())
    r_column = "r_partial" if "r_partial" in kept.columns else "r_random"
    out["sum_r"] = float(np.nansum(kept[r_column].to_numpy(float))) if r_column in kept.columns else float("nan")
    out["gam_rows"] = int((_column(kept, "fit", "linear").astype(str) == "gam").sum())
    return out


def _add(total: dict[str, float], part: dict[str, float]) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0) + value


class ReferenceTests(NamedTuple):
    """The lagged test of ``r_innovation`` and ppcor's t-test of ``r_partial`` on one run's two OOD test sets."""

    lagged_p: float
    lagged_interval: tuple[float, float]
    r_partial: float
    ttest_p: float
    ttest_interval: tuple[float, float]


def _interval(r: float, statistic: float, df: float) -> tuple[float, float]:
    low, high = consistent_interval(np.array([r]), np.array([statistic]), np.array([df]), 0.95)
    return float(low[0]), float(high[0])


def reference_tests(scores: np.ndarray, covar: np.ndarray) -> ReferenceTests:
    """The references beside the default, computed by :mod:`gengen.stats` directly (linear control, no checks).

    Parameters
    ----------
    scores : ndarray, shape (n, 2)
        The two OOD test sets of one run.
    covar : ndarray, shape (n, 1)
        Its ID scores.

    Returns
    -------
    ReferenceTests
        p-values and 95% intervals consistent with them (:func:`gengen.stats.consistent_interval`); the lagged
        test's are NaN where its regression cannot be fitted (a test set constant after its first checkpoint).
    """
    with np.errstate(all="ignore"):
        naive = stats.partial_corr_matrix(scores, covar)
    r = float(naive.r[0, 1])
    ttest = (float(naive.p_value[0, 1]), _interval(r, naive.statistic[0, 1], np.asarray(naive.df).max()))
    try:
        with np.errstate(all="ignore"):
            lagged = lagged_partial_corr_matrix(scores, covar)
    except GengenError:
        return ReferenceTests(float("nan"), (float("nan"), float("nan")), r, *ttest)
    innovation, statistic = np.asarray(lagged.r_innovation)[0, 1], np.asarray(lagged.statistic)[0, 1]
    interval = _interval(innovation, statistic, np.asarray(lagged.df)[0, 1])
    return ReferenceTests(float(np.asarray(lagged.p_value)[0, 1]), interval, r, *ttest)


def _reference_rows(replicates: list[Replicate]) -> dict[str, pd.DataFrame]:
    """:func:`reference_tests` of every run on all its rows: the lagged test and ppcor's t-test without any of
    analyse's checks. A run the lagged test cannot handle gets NaN: untestable."""
    lagged, ttest = [], []
    for replicate in replicates:
        for run in range(replicate.scores.shape[0]):
            found = reference_tests(replicate.scores[run], replicate.id_scores[run][:, None])
            low, high = found.ttest_interval
            ttest.append({"r_partial": found.r_partial, "p": found.ttest_p, "ci_low": low, "ci_high": high})
            lagged.append({"p": found.lagged_p})
    return {"lagged": pd.DataFrame(lagged), "t-test": pd.DataFrame(ttest)}


@functools.cache
def _truth(cell: Cell, rho: float) -> float:
    """The partial correlation the cell's design carries (computed once per cell and ρ)."""
    return design_partial_corr(cell, rho)


def _realistic_chunk(
    cell: Cell, rho: float, replicates: list[Replicate], n_boot: int, seed: int
) -> tuple[dict[str, dict[str, float]], str]:
    """Every method's counts on one batch of replicates, and the default's settings as analyse recorded them."""
    import gengen

    truth = _truth(cell, rho)
    table = curve_table(cell, replicates)
    default = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=seed)
    runs = default.pairs[default.pairs["level"] == "run"]
    counts = {"default": _tally_rows(runs, "p_deciding", "ci_low", "ci_high", truth, "diagnostics")}
    if cell.runs > 1:
        pooled = default.pooled
        diagnostics = "diagnostics" if "diagnostics" in pooled.columns else None
        for kind in ("fixed", "random"):
            counts[f"pooled {kind}"] = _tally_rows(
                pooled.assign(testable=True), f"p_{kind}", f"ci_low_{kind}", f"ci_high_{kind}", truth, diagnostics
            )
    else:
        references = _reference_rows(replicates)
        counts["lagged"] = _tally_rows(references["lagged"], "p", None, None, truth, None)
        counts["t-test"] = _tally_rows(references["t-test"], "p", "ci_low", "ci_high", truth, None)
    settings = default.settings
    described = f"fit={settings.fit}; inference={'+'.join(settings.inference)}"
    return counts, described


def run_realistic(
    grid: tuple[Cell, ...] = REALISTIC_GRID,
    *,
    replicates: int = 300,
    pooled_replicates: int | None = None,
    alternative_replicates: int | None = None,
    n_boot: int = 299,
    seed: int = 2026,
    csv: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    r"""Type-I error, coverage, power and flag rates of :func:`gengen.analyse`'s default on realistic learning curves.

    The realistic measure of :func:`gengen.calibration.studies.calibration_study` (``measure="realistic"``). Every
    replicate is simulated by :func:`gengen.calibration.simulate.simulate` (curves cells) and analysed by the
    public ``gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=seed)`` — whatever its defaults are
    when the study runs (the settings it recorded are kept in ``default_settings``). Beside it, on every row
    of the same runs and without analyse's checks (computed by :mod:`gengen.stats` directly, which is what
    ``inference="lagged"`` and ``inference="t-test"`` computed before issue 23, at a fraction of the cost of a
    second and third call of analyse): the lagged test of ``r_innovation``
    (:func:`~gengen.stats.lagged.lagged_partial_corr_matrix`) and ppcor's t-test
    (:func:`~gengen.stats.partial_corr_matrix`). Pooled cells (``runs`` > 1) record the meta-analysis of
    :attr:`gengen.Analysis.pooled` (fixed and random effects) instead.

    Parameters
    ----------
    grid : tuple of Cell
        Cells of the ``"curves"`` process: :data:`REALISTIC_GRID` (docs) or :data:`REALISTIC_QUICK_GRID` (the
        test suite's).
    replicates : int
        Replicates per cell and hypothesis (single runs).
    pooled_replicates : int, optional
        Replicates (groups of seeds) per hypothesis of pooled cells; default ``replicates``.
    alternative_replicates : int, optional
        Replicates of each alternative (ρ = 0.3, 0.5) where fewer than under the null will do (power needs less
        precision than a type-I error near 0.05); default the null's.
    n_boot : int
        Sieve resamples per run (analyse's default is 1,999; p-values near 0.05 need far fewer).
    seed : int
        Seed of every simulation (cell, hypothesis: own streams) and of analyse's resampling.
    csv : str or Path, optional
        Append each finished (cell, hypothesis) to this CSV as it completes, and skip those already in it, so
        that an interrupted study resumes and a partial one is usable (:func:`realistic_summary` reads it).
    progress : callable, optional
        Called with one line after each (cell, hypothesis).

    Returns
    -------
    DataFrame
        One row per cell × hypothesis × method, columns :data:`REALISTIC_COLUMNS`: counts (``replicates``,
        ``testable`` — rows reported testable with a finite p —, ``reject`` among them at α = 0.05,
        ``covered`` of ``intervals``, ``flagged``/``unflagged`` rows and their rejections), ``sum_r`` (of
        r_partial), ``gam_rows`` (testable rows whose ``fit`` is "gam"), ``true_r``
        (:func:`~gengen.calibration.learning_curves.design_partial_corr`) and the CPU seconds of the chunk.

    Notes
    -----
    Hypotheses: ``H0`` (ρ = 0: the OOD series are independent given ID) and ``rho=0.3``, ``rho=0.5`` (the two
    OOD noises correlate at ρ; the partial correlation the data carry is ``true_r`` < ρ because each test set
    adds its own measurement error: :func:`~gengen.calibration.learning_curves.design_partial_corr`). Coverage counts
    intervals holding ``true_r`` (0 under H0).

    Examples
    --------
    >>> from gengen.calibration.learning_curves import CurveCell
    >>> table = run_realistic((CurveCell("tiny", n=11),), replicates=4, n_boot=99)
    >>> sorted(set(table.method))
    ['default', 'lagged', 't-test']
    """
    if replicates < 1:
        raise GengenError(f"replicates: must be at least 1, got {replicates}")
    textbook = [cell.label for cell in grid if cell.process != "curves"]
    if textbook:
        raise GengenError(f"cells: the realistic measure analyses learning curves; {', '.join(textbook)} are not")
    pooled_replicates = replicates if pooled_replicates is None else pooled_replicates
    path = Path(csv) if csv is not None else None
    previous = _finished(path)
    done = set(zip(previous["cell"], previous["hypothesis"], strict=True))
    rows: list[dict[str, Any]] = []
    for cell in grid:
        null_wanted = pooled_replicates if cell.runs > 1 else replicates
        for index, (hypothesis, rho) in enumerate(_hypotheses(cell)):
            if (cell.label, hypothesis) in done:
                continue
            wanted = null_wanted if rho == 0 or alternative_replicates is None else alternative_replicates
            started = time.process_time()
            totals, described = _run_hypothesis(cell, rho, _stream(seed, cell, index), wanted, n_boot, seed)
            seconds = time.process_time() - started
            chunk = [
                {
                    **_cell_columns(cell),
                    "hypothesis": hypothesis,
                    "rho": rho,
                    "true_r": _truth(cell, rho),
                    "method": method,
                    **{key: int(value) if key != "sum_r" else value for key, value in tally.items()},
                    "n_boot": n_boot,
                    "cpu_s": round(seconds, 2),
                    "default_settings": described,
                    "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
                for method, tally in totals.items()
            ]
            rows.extend(chunk)
            if path is not None:
                frame = pd.DataFrame(chunk, columns=list(REALISTIC_COLUMNS))
                frame.to_csv(path, mode="a", header=not path.exists() or not path.stat().st_size, index=False)
            if progress is not None:
                rate = _ratio(totals["default"]["reject"], totals["default"]["testable"])
                progress(f"{cell.label} {hypothesis}: default rejects {rate:.3f} ({seconds:.0f} s CPU)")
    new = pd.DataFrame(rows, columns=list(REALISTIC_COLUMNS))
    return pd.concat([previous, new], ignore_index=True) if len(previous) else new


def _finished(path: Path | None) -> pd.DataFrame:
    """The rows of the (cell, hypothesis) chunks already in the study's CSV (none without one)."""
    if path is not None and path.exists() and path.stat().st_size:
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    return pd.DataFrame(columns=list(REALISTIC_COLUMNS))


def _run_hypothesis(
    cell: Cell, rho: float, rng: np.random.Generator, wanted: int, n_boot: int, seed: int
) -> tuple[dict[str, dict[str, float]], str]:
    """Every method's counts over ``wanted`` replicates of one cell and ρ, analysed in batches of :data:`_BATCH`."""
    totals: dict[str, dict[str, float]] = {}
    described = ""
    for first in range(0, wanted, _BATCH):
        batch = [simulate(cell, rho, rng) for _ in range(min(_BATCH, wanted - first))]
        counts, described = _realistic_chunk(cell, rho, batch, n_boot, seed + first)
        for method, part in counts.items():
            _add(totals.setdefault(method, {}), part)
    return totals, described


def _cell_columns(cell: Cell) -> dict[str, Any]:
    """The columns of the long table that describe the cell."""
    names = ("n", "schedule", "n_examples", "phi", "link", "special", "runs", "well_specified")
    return {"cell": cell.label, **{name: getattr(cell, name) for name in names}}


#: The contract of issue 23 on the realistic grid.
CONTRACT_TYPE1 = 0.065
CONTRACT_COVERAGE = (0.925, 0.975)
CONTRACT_FLAGS = 0.20


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / float(denominator) if denominator else float("nan")


def realistic_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: the contract's quantities from the long table of :func:`run_realistic`.

    Parameters
    ----------
    table : DataFrame
        :func:`run_realistic`'s result, or the CSV it wrote (a partial one gives the cells it has).

    Returns
    -------
    DataFrame
        Per cell: ``untestable`` (share of the default's null rows reported untestable), ``type1`` and its
        Monte Carlo ``se_type1`` (rejections at α = 0.05 among testable null rows), ``coverage_h0``,
        ``coverage_03``, ``coverage_05`` (of ``true_r``), ``power_03``, ``power_05``, ``flags`` (share of
        testable null rows with diagnostics), ``flag_if_reject`` and ``flag_if_accept`` (P(flag | p < .05) and
        P(flag | p ≥ .05) under the null), ``power_unflagged_03``/``_05``, ``gam_share`` (testable rows whose
        fit is GAM), ``mean_r_05`` beside ``true_r_05``; the same rates for ``lagged`` and ``t-test`` (columns
        prefixed ``lagged_``, ``ttest_``); for pooled cells
        ``fixed_``/``random_`` type-I, coverage and power. ``default_settings`` says what the default was.
    """
    rows = []
    for _cell, part in table.groupby("cell", sort=False):
        first = part.iloc[0]
        out: dict[str, Any] = {
            key: first[key]
            for key in ("cell", "n", "schedule", "n_examples", "phi", "link", "special", "runs", "well_specified")
        }
        out["default_settings"] = first["default_settings"]
        out.update(_method_rates(part, "default", ""))
        null = _tally_of(part, "default", "H0")
        if null is not None:
            out["flags"] = _ratio(null["flagged"], null["testable"])
            out["flag_if_reject"] = _ratio(null["flagged_reject"], null["reject"])
            out["flag_if_accept"] = _ratio(null["flagged"] - null["flagged_reject"], null["testable"] - null["reject"])
            out["gam_share"] = _ratio(null["gam_rows"], null["testable"])
            out["replicates"] = int(null["replicates"])
        for method, prefix in (
            ("lagged", "lagged_"),
            ("t-test", "ttest_"),
            ("pooled fixed", "fixed_"),
            ("pooled random", "random_"),
        ):
            out.update(_method_rates(part, method, prefix))
        rows.append(out)
    return pd.DataFrame(rows)


def _tally_of(part: pd.DataFrame, method: str, hypothesis: str) -> pd.Series | None:
    found = part[(part["method"] == method) & (part["hypothesis"] == hypothesis)]
    return None if found.empty else found.iloc[0]


def _method_rates(part: pd.DataFrame, method: str, prefix: str) -> dict[str, Any]:
    """One method's rates in one cell (its rows of the long table), column names prefixed."""
    out: dict[str, Any] = {}
    null = _tally_of(part, method, "H0")
    if null is not None:
        type1 = _ratio(null["reject"], null["testable"])
        out[f"{prefix}untestable"] = 1 - _ratio(null["testable"], null["replicates"])
        out[f"{prefix}type1"] = type1
        out[f"{prefix}se_type1"] = np.sqrt(type1 * (1 - type1) / null["testable"]) if null["testable"] else np.nan
        out[f"{prefix}coverage_h0"] = _ratio(null["covered"], null["intervals"])
    for hypothesis, tag in (("rho=0.3", "03"), ("rho=0.5", "05")):
        alternative = _tally_of(part, method, hypothesis)
        if alternative is None:
            continue
        out[f"{prefix}power_{tag}"] = _ratio(alternative["reject"], alternative["testable"])
        out[f"{prefix}coverage_{tag}"] = _ratio(alternative["covered"], alternative["intervals"])
        if not prefix:
            out[f"power_unflagged_{tag}"] = _ratio(alternative["unflagged_reject"], alternative["unflagged"])
            out[f"mean_r_{tag}"] = _ratio(alternative["sum_r"], alternative["testable"])
            out[f"true_r_{tag}"] = alternative["true_r"]
    return out


def contract_status(value: float, low: float, high: float, count: float) -> str:
    """A rate's status against the contract's bounds: ``ok``, ``over`` or ``FAIL``.

    ``ok`` inside [low, high], ``over`` outside by at most two Monte Carlo standard errors of a rate measured on
    ``count`` rows (the s.e. at least that of 0.05, so a rate of 0 is not judged exact), else ``FAIL``.

    Parameters
    ----------
    value : float
        The measured rate.
    low, high : float
        The contract's bounds.
    count : float
        Rows it was measured on.

    Returns
    -------
    str
        ``ok``, ``over`` or ``FAIL``.
    """
    se = np.sqrt(max(value * (1 - value), 0.05 * 0.95) / count) if count else np.nan
    distance = max(low - value, value - high, 0.0)
    return "ok" if distance == 0 else ("over" if distance <= 2 * se else "FAIL")


def realistic_contract(summary: pd.DataFrame) -> pd.DataFrame:
    """The contract's verdict per cell and criterion: value, bound, and whether it holds.

    Criteria: type-I ≤ 0.065 among testable rows (single-run cells; pooled cells: the pooled table's fixed and
    random effects, one verdict per group), coverage of the 95% intervals in [0.925, 0.975] (under the null and
    both alternatives), flags ≤ 20% under the null in well-specified single-run cells. ``status`` is ``ok``,
    ``over`` (the bound is broken by less than two Monte Carlo standard errors: not distinguishable from the
    bound at this many replicates) or ``FAIL``.
    """
    records = []

    def check(cell: str, criterion: str, value: float, low: float, high: float, count: float) -> None:
        if not np.isfinite(value):
            return
        status = contract_status(value, low, high, count)
        records.append(
            {"cell": cell, "criterion": criterion, "value": value, "bound": f"[{low:g}, {high:g}]", "status": status}
        )

    for row in summary.itertuples(index=False):
        data = row._asdict()
        pooled = int(row.runs) > 1
        # A pooled cell is judged on its pooled table (one verdict per group of runs), a single-run cell on its rows.
        count = data.get("replicates", np.nan) / int(row.runs)
        kinds = (("fixed_", "pooled fixed"), ("random_", "pooled random")) if pooled else (("", ""),)
        for prefix, name in kinds:
            label = f"{name} " if name else ""
            check(row.cell, f"{label}type-I", data.get(f"{prefix}type1", np.nan), 0.0, CONTRACT_TYPE1, count)
            for tag, shown in (("h0", "H0"), ("03", "ρ=0.3"), ("05", "ρ=0.5")):
                value = data.get(f"{prefix}coverage_{tag}", np.nan)
                check(row.cell, f"{label}coverage ({shown})", value, *CONTRACT_COVERAGE, count)
        if row.well_specified and not pooled:
            check(row.cell, "flags under H0", data.get("flags", np.nan), 0.0, CONTRACT_FLAGS, count)
    return pd.DataFrame(records, columns=["cell", "criterion", "value", "bound", "status"])


def realistic_tables(summary: pd.DataFrame) -> str:
    """The summary as Markdown: the default's contract table, its flags, the comparison, pooled seeds."""
    single = summary[summary["runs"] == 1]
    pooled = summary[summary["runs"] > 1]
    lines = [*_contract_section(single), *_flags_section(single), *_comparison_section(single)]
    if not pooled.empty:
        lines += _pooled_section(pooled)
    settings = sorted(set(summary["default_settings"].astype(str)))
    lines += ["", f"Default as recorded by analyse: {'; '.join(settings)}."]
    return "\n".join(lines) + "\n"


def _fmt(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "–" if not np.isfinite(number) else f"{number:.{digits}f}"


def _pct(value: Any) -> str:
    number = float(value) if value is not None else float("nan")
    return "–" if not np.isfinite(number) else f"{100 * number:.0f}%"


def _table(title: str, columns: list[str], rows: list[list[str]]) -> list[str]:
    """A bold title and a Markdown table (one list of cells per row), as every section writes them."""
    lines = [f"**{title}**", "", "| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    return lines + ["| " + " | ".join(cells) + " |" for cells in rows]


_ESTIMATES = ("type1", "se_type1", "coverage_h0", "coverage_03", "coverage_05", "power_03", "power_05")
_ESTIMATE_COLUMNS = ["type-I ± MC s.e.", "coverage H0", "coverage ρ=.3", "coverage ρ=.5", "power ρ=.3", "power ρ=.5"]


def _estimates(row: dict[str, Any], prefix: str = "") -> list[str]:
    """Type-I ± its MC s.e., the three coverages and the two powers of a row (columns named ``prefix…``)."""
    value = {name: _fmt(row.get(f"{prefix}{name}")) for name in _ESTIMATES}
    return [
        f"{value['type1']} ± {value['se_type1']}",
        *(value[name] for name in ("coverage_h0", "coverage_03", "coverage_05", "power_03", "power_05")),
    ]


def _contract_section(single: pd.DataFrame) -> list[str]:
    return _table(
        "The default among rows reported testable (α = 0.05)",
        ["cell", "untestable", *_ESTIMATE_COLUMNS, "true r (ρ=.5)", "mean r (ρ=.5)", "GAM rows"],
        [
            [
                str(row["cell"]),
                _pct(row.get("untestable")),
                *_estimates(row),
                _fmt(row.get("true_r_05")),
                _fmt(row.get("mean_r_05")),
                _pct(row.get("gam_share")),
            ]
            for row in single.to_dict("records")
        ],
    )


def _flags_section(single: pd.DataFrame) -> list[str]:
    names = ("flags", "flag_if_reject", "flag_if_accept", "power_unflagged_03", "power_unflagged_05")
    return [
        "",
        *_table(
            "The default's diagnostics: flag rate under the null, flags given the verdict, power among unflagged rows",
            [
                "cell",
                "flagged (H0)",
                "P(flag \\| p < .05)",
                "P(flag \\| p ≥ .05)",
                "power unflagged ρ=.3",
                "power unflagged ρ=.5",
            ],
            [[str(row["cell"]), *(_fmt(row.get(name)) for name in names)] for row in single.to_dict("records")],
        ),
    ]


def _comparison_section(single: pd.DataFrame) -> list[str]:
    rows = [
        [
            str(row["cell"]),
            *(
                " / ".join(_fmt(row.get(f"{prefix}{name}"), 2) for name in ("type1", "power_03", "power_05"))
                for prefix in ("", "lagged_", "ttest_")
            ),
        ]
        for row in single.to_dict("records")
    ]
    title = (
        "Beside the default: type-I / power ρ=.3 / power ρ=.5 (default: testable rows; lagged test and ppcor's"
        " t-test: every row, no check)"
    )
    return ["", *_table(title, ["cell", "default", "lagged", "t-test"], rows)]


def _pooled_section(pooled: pd.DataFrame) -> list[str]:
    rows = [
        [str(row["cell"]), prefix[:-1], *_estimates(row, prefix)]
        for row in pooled.to_dict("records")
        for prefix in ("fixed_", "random_")
    ]
    title = "Pooled seeds (the meta table of `Analysis.pooled`): type-I, coverage under H0 and ρ = 0.3, 0.5, power"
    return ["", *_table(title, ["cell", "effects", *_ESTIMATE_COLUMNS], rows)]
