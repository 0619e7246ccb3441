"""The item-level study (issue 34): :func:`gengen.analyse`'s default on item-level trajectories.

Every replicate is drawn by :func:`gengen.calibration.item_level.simulate_items` (fixed examples with difficulties, a
logistic
or probit link, item effects that persist and that churn, fast-then-slow abilities, a stuck set and a class-prior
set) and analysed by the public ``gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=seed)`` with
whatever its defaults are. Tallied per cell and hypothesis, on the run-level rows the default reports testable:
rejections at α = 0.05 over all pairs and on the main pair (``ood_a``–``ood_b``), coverage of the 95% intervals
(of 0 for every pair under the null, of the simulated partial correlation for the main pair under an
alternative), the share of rows flagged in ``diagnostics``, and how often rows with the stuck or the class-prior
set are reported untestable; pooled cells add the meta table's fixed and random effects. ``gengen simulate
--study items``; docs/calibration.md ("Item-level grid").
"""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen.calibration.item_level import ItemCell, PartialCorr, item_partial_corr, item_table, simulate_items
from gengen.calibration.realistic import _add, _ratio, _table, _tally_rows
from gengen.errors import GengenError

__all__ = ["ITEMS_COLUMNS", "ITEMS_GRID", "ITEMS_QUICK_GRID", "items_summary", "items_tables", "run_items"]

#: Replicates analysed per call of gengen.analyse (single-model cells; one replicate per call with several models,
#: so that each call's verdict across models is one replicate's).
_BATCH = 60

_SPECIALS = ("stuck", "class-prior")


def _items_cells() -> tuple[ItemCell, ...]:
    """The "before" grid of issue 34: n = 40, N = 1,000, a stuck and a class-prior set, log-spaced and even, 1 and
    3 seeds (null only); then the alternatives and the rest of the design space, in order of importance."""
    return (
        ItemCell("log n=40", specials=_SPECIALS, rhos=(0.0,)),
        ItemCell("even n=40", schedule="even", specials=_SPECIALS, rhos=(0.0,)),
        ItemCell("log n=40, 3 seeds", runs=3, specials=_SPECIALS, rhos=(0.0,)),
        ItemCell("even n=40, 3 seeds", schedule="even", runs=3, specials=_SPECIALS, rhos=(0.0,)),
        ItemCell("log n=40 alternatives", rhos=(0.0, 0.3, 0.5)),
        ItemCell("log n=40 latent ID", id_dependence="latent", rhos=(0.0,)),
        ItemCell("dense-early n=40", schedule="dense-early", specials=_SPECIALS, rhos=(0.0,)),
        ItemCell("probit log n=40", link="probit", specials=_SPECIALS, rhos=(0.0,)),
        ItemCell("log n=11", n=11, rhos=(0.0,)),
        ItemCell("log n=100", n=100, rhos=(0.0,)),
        ItemCell("WNLI-sized N=71", n_examples=71, rhos=(0.0,)),
        ItemCell("log N=30000", n_examples=30_000, rhos=(0.0,)),
        ItemCell("log n=40, 10 seeds", runs=10, rhos=(0.0,)),
        ItemCell("log n=40, 4 models", models=4, rhos=(0.0,)),
    )


#: The item-level grid (docs/calibration.md, "Item-level grid").
ITEMS_GRID: tuple[ItemCell, ...] = _items_cells()
#: A CI-sized cell (the suite checks the simulator's sanity on it, not calibration).
ITEMS_QUICK_GRID: tuple[ItemCell, ...] = (
    ItemCell("log n=20 N=200", n=20, n_examples=200, specials=_SPECIALS, rhos=(0.0,)),
)

#: Columns of the long table (one row per cell × hypothesis × method × subset of rows).
ITEMS_COLUMNS = (
    "cell",
    "n",
    "n_examples",
    "schedule",
    "link",
    "runs",
    "models",
    "specials",
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


@functools.cache
def _truth(cell: ItemCell, rho: float, draws: int = 4000) -> PartialCorr:
    """The main pair's partial correlation by simulation (0 under a measured-ID null by construction)."""
    if rho == 0 and cell.id_dependence == "measured":
        return PartialCorr(0.0, 0.0, 0)
    return item_partial_corr(cell, rho, draws=draws)


def _subsets(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Run-level rows: all pairs, the main pair, and the pairs holding the stuck or the class-prior set."""
    a, b = rows["testset_a"].astype(str), rows["testset_b"].astype(str)
    out = {"all pairs": rows, "main pair": rows[(a == "ood_a") & (b == "ood_b")]}
    for name in ("stuck", "class_prior"):
        holding = rows[(a == name) | (b == name)]
        if len(holding):
            out[f"with {name}"] = holding
    return out


def _chunk(
    cell: ItemCell, rho: float, replicates: list[Any], n_boot: int, seed: int, truth_draws: int
) -> tuple[dict[tuple[str, str], dict[str, float]], str]:
    import gengen

    truth = _truth(cell, rho, truth_draws).value
    table = item_table(cell, replicates)
    found = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=seed)
    runs = found.pairs[found.pairs["level"] == "run"]
    counts: dict[tuple[str, str], dict[str, float]] = {}
    for subset, rows in _subsets(runs).items():
        main = (rows["testset_a"].astype(str) == "ood_a") & (rows["testset_b"].astype(str) == "ood_b")
        # Coverage of the simulated value on the main pair, of 0 on every other pair (independent sets).
        part = _tally_rows(rows[main], "p_deciding", "ci_low", "ci_high", truth, "diagnostics")
        _add(part, _tally_rows(rows[~main], "p_deciding", "ci_low", "ci_high", 0.0, "diagnostics"))
        counts[("default", subset)] = part
    if cell.runs > 1:
        pooled = found.pooled
        main = (pooled["testset_a"].astype(str) == "ood_a") & (pooled["testset_b"].astype(str) == "ood_b")
        for kind in ("fixed", "random"):
            columns = (f"p_{kind}", f"ci_low_{kind}", f"ci_high_{kind}")
            for subset, chosen, value in (("main pair", main, truth), ("other pairs", ~main, 0.0)):
                counts[(f"pooled {kind}", subset)] = _tally_rows(
                    pooled[chosen].assign(testable=True), *columns, value, "diagnostics"
                )
    settings = found.settings
    return counts, f"fit={settings.get('fit')}; inference={'+'.join(settings.get('inference', []))}"


def run_items(
    grid: tuple[ItemCell, ...] = ITEMS_GRID,
    *,
    replicates: int = 300,
    n_boot: int = 299,
    seed: int = 2026,
    csv: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    truth_draws: int = 4000,
) -> pd.DataFrame:
    """Type-I error, coverage, power, flags and untestable shares of :func:`gengen.analyse`'s default on ``grid``.

    Parameters
    ----------
    grid : tuple of ItemCell
        :data:`ITEMS_GRID` (docs) or your own cells.
    replicates : int
        Replicates (groups of ``models`` × ``runs``) per cell and hypothesis.
    n_boot : int
        Sieve resamples per run.
    seed : int
        Seed of every simulation (each cell and hypothesis its own stream, keyed by the cell's label) and of
        analyse's resampling.
    csv : str or Path, optional
        Append each finished (cell, hypothesis) to this CSV and skip those already in it (a rerun resumes).
    progress : callable, optional
        Called with one line after each (cell, hypothesis).
    truth_draws : int
        Simulated runs behind each true value (:func:`~gengen.calibration.item_level.item_partial_corr`; its s.e. is
        recorded in ``true_r_se``).

    Returns
    -------
    DataFrame
        Columns :data:`ITEMS_COLUMNS`: per cell, hypothesis, method (``default``, ``pooled fixed``, ``pooled
        random``) and ``rows`` (``all pairs``, ``main pair``, ``with stuck``, ``with class_prior``, ``other
        pairs``): counts of rows (``replicates``), those reported testable with a finite p, rejections among
        them at α = 0.05, intervals and those covering the truth (``true_r`` for the main pair, 0 elsewhere),
        flagged rows and rejections among flagged and unflagged ones.

    Examples
    --------
    >>> from gengen.calibration.item_level import ItemCell
    >>> table = run_items((ItemCell("tiny", n=11, n_examples=100, rhos=(0.0,)),), replicates=3, n_boot=99)
    >>> sorted(set(table["rows"]))
    ['all pairs', 'main pair']
    """
    if replicates < 1:
        raise GengenError(f"replicates: must be at least 1, got {replicates}")
    path = Path(csv) if csv is not None else None
    previous = (
        pd.read_csv(path, keep_default_na=False, na_values=[""])
        if path is not None and path.exists() and path.stat().st_size
        else pd.DataFrame(columns=list(ITEMS_COLUMNS))
    )
    done = set(zip(previous["cell"], previous["hypothesis"], strict=True))
    rows: list[dict[str, Any]] = []
    for cell in grid:
        for index, rho in enumerate(cell.rhos):
            hypothesis = "H0" if rho == 0 else f"rho={rho:g}"
            if (cell.label, hypothesis) in done:
                continue
            rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(cell.label.encode()), index]))
            started = time.process_time()
            totals: dict[tuple[str, str], dict[str, float]] = {}
            described = ""
            batch = _BATCH if cell.models == 1 else 1
            for first in range(0, replicates, batch):
                drawn = [simulate_items(cell, rho, rng) for _ in range(min(batch, replicates - first))]
                counts, described = _chunk(cell, rho, drawn, n_boot, seed + first, truth_draws)
                for key, part in counts.items():
                    _add(totals.setdefault(key, {}), part)
            seconds = time.process_time() - started
            truth = _truth(cell, rho, truth_draws)
            chunk = [
                {
                    "cell": cell.label,
                    "n": cell.n,
                    "n_examples": cell.n_examples,
                    "schedule": cell.schedule,
                    "link": cell.link,
                    "runs": cell.runs,
                    "models": cell.models,
                    "specials": "+".join(cell.specials),
                    "hypothesis": hypothesis,
                    "rho": rho,
                    "true_r": truth.value,
                    "true_r_se": truth.se,
                    "method": method,
                    "rows": subset,
                    **{key: int(value) if key != "sum_r" else value for key, value in tally.items()},
                    "n_boot": n_boot,
                    "cpu_s": round(seconds, 2),
                    "default_settings": described,
                }
                for (method, subset), tally in totals.items()
            ]
            rows.extend(chunk)
            if path is not None:
                frame = pd.DataFrame(chunk, columns=list(ITEMS_COLUMNS))
                frame.to_csv(path, mode="a", header=not path.exists() or not path.stat().st_size, index=False)
            if progress is not None:
                main = totals[("default", "main pair")]
                rate = _ratio(main["reject"], main["testable"])
                progress(
                    f"{cell.label} {hypothesis}: default rejects {rate:.3f} on the main pair ({seconds:.0f} s CPU)"
                )
    new = pd.DataFrame(rows, columns=list(ITEMS_COLUMNS))
    return pd.concat([previous, new], ignore_index=True) if len(previous) else new


def items_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per cell, hypothesis, method and subset of rows: the rates of :func:`run_items`'s counts.

    Parameters
    ----------
    table : DataFrame
        :func:`run_items`'s result or the CSV it wrote.

    Returns
    -------
    DataFrame
        The identifying columns, ``replicates`` (rows), ``untestable`` (share not reported testable),
        ``reject`` (rejection rate at α = 0.05 among testable rows: type-I under H0, power otherwise), its
        Monte Carlo ``se``, ``coverage`` and ``flags`` (share of testable rows with diagnostics).
    """
    out = table[["cell", "hypothesis", "true_r", "method", "rows", "replicates"]].copy()
    testable = table["testable"].astype(float)
    rate = table["reject"].astype(float) / testable.where(testable > 0)
    out["untestable"] = 1.0 - testable / table["replicates"].astype(float)
    out["reject"] = rate
    out["se"] = np.sqrt(rate * (1 - rate) / testable.where(testable > 0))
    out["coverage"] = table["covered"].astype(float) / table["intervals"].astype(float).where(table["intervals"] > 0)
    out["flags"] = table["flagged"].astype(float) / testable.where(testable > 0)
    return out


def items_tables(table: pd.DataFrame) -> str:
    """:func:`items_summary` as one Markdown table (rates to three decimals, shares in %)."""
    summary = items_summary(table)

    def fmt(value: float, digits: int = 3) -> str:
        return "–" if not np.isfinite(value) else f"{value:.{digits}f}"

    def pct(value: float) -> str:
        return "–" if not np.isfinite(value) else f"{100 * value:.0f}%"

    rows = [
        [
            str(row.cell),
            str(row.hypothesis),
            str(row.method),
            str(row.rows),
            str(int(row.replicates)),
            pct(row.untestable),
            f"{fmt(row.reject)} ± {fmt(row.se)}",
            fmt(row.coverage),
            pct(row.flags),
        ]
        for row in summary.itertuples(index=False)
    ]
    columns = [
        "cell",
        "hypothesis",
        "method",
        "rows",
        "rows analysed",
        "untestable",
        "rejects ± MC s.e.",
        "coverage",
        "flagged",
    ]
    return "\n".join(_table("gengen.analyse's default on item-level trajectories (α = 0.05)", columns, rows)) + "\n"
