"""The automatic control choice (issue 34, item 3): candidate rules for ``fit="auto"`` on the same draws.

Each replicate table is analysed with the default sieve path under every rule below, and under the line (for
the correlation between "the rule chose the GAM" and "the linear control's test rejected"):

- ``per-run``: the choice of commit 68c728c — each run's own curvature test (``choose_control``: BH 0.05, the
  GAM when at least max(min(2, m'), ⌈m'/2⌉) test sets curve);
- ``pooled``: one choice per pooling cell from all its runs' curvature tests, Stouffer-combined per test set,
  then the same rule (BH 0.05); the same as ``per-run`` for single runs;
- ``pooled-lenient``: pooled, a set counted as curved at an unadjusted 0.20, the same floor and majority
  (``gengen.analyse.core.group_controls``: the default adopted; with at most 4 test sets, as in every cell here,
  the majority is the floor of two);
- ``gam``: the capped GAM always (``fit="gam"``).

Usage (one cell per process, so that cells can run side by side)::

    python benches/calibration_control.py run CELL REPLICATES ALT_REPLICATES OUT.csv
    python benches/calibration_control.py rates OUT1.csv [OUT2.csv ...]
    python benches/calibration_control.py markdown OUT1.csv [OUT2.csv ...]   # docs/calibration.md's table

CELL is a label of the contract grid (``gengen.calibration.contract.CONTRACT_GRID``) or of :data:`EXTRA`.
Seeds: the contract's (cell label, hypothesis index, ``seed`` 2026), so the draws are the contract runner's;
``n_boot`` 199, α = 0.05.
"""

from __future__ import annotations

import math
import sys
import time
import zlib
from importlib import import_module
from typing import Any

import numpy as np
import pandas as pd

import gengen
from gengen.calibration.contract import (
    CONTRACT_GRID,
    ContractCell,
    _draw_table,
    _pair_masks,
    _tally_paths,
    _tally_verdict,
    _truth,
)
from gengen.calibration.simulate import Cell
from gengen.stats.control_choice import choose_control, choose_pooled_control, curvature_test

core = import_module("gengen.analyse.core")

SEED = 2026
N_BOOT = 199
#: The textbook cells of the issue's audit beside the contract grid's (gengen.calibration.simulate).
EXTRA = {
    "textbook AR(1) 0.9, n=40 (linear link)": ContractCell(
        Cell("textbook AR(1) 0.9, n=40 (linear link)", n=40, coef_a=(0.9,), rhos=(0.0, 0.5))
    ),
    "curves saturating n=20": ContractCell(
        Cell("curves saturating n=20", n=20, process="curves", shape="saturating", rhos=(0.0, 0.5))
    ),
}
RULES = ("per-run", "pooled", "pooled-lenient", "gam")


def _per_run(groups: Any, settings: Any) -> list[Any]:
    """Rule (a), commit 68c728c's group_control: each group's own ``choose_control``."""
    from dataclasses import replace

    if settings.fit != "auto":
        return list(groups)
    out = []
    for group in groups:
        usable = core._usable(group)
        if not usable or len(group.id_values) < core.minimum_rows(1):
            control = ("linear", "untestable")
        else:
            choice = choose_control(group.scores[usable].to_numpy(dtype=float), group.id_values)
            control = (choice.fit, choice.reason)
        out.append(replace(group, control=control))
    return out


def _bh_cell(groups: list[Any]) -> tuple[str, str]:
    """Rule (b): the pooled p-values at BH 0.05 (the curvature tests as the package's default pools them)."""
    names = list(dict.fromkeys(name for group in groups for name in core._usable(group)))
    tests = []
    for group in groups:
        usable = core._usable(group)
        if usable and len(group.id_values) >= core.minimum_rows(1):
            test = curvature_test(group.scores[usable].to_numpy(dtype=float), group.id_values)
            tests.append(core._aligned(test, [names.index(name) for name in usable], len(names)))
    if not tests:
        return "linear", "untestable"
    choice = choose_pooled_control(tests, level=0.05, adjust=True)
    return choice.fit, choice.reason


def _bh(groups: Any, settings: Any) -> list[Any]:
    from dataclasses import replace

    if settings.fit != "auto":
        return list(groups)
    cells: dict[Any, list[int]] = {}
    for number, group in enumerate(groups):
        cells.setdefault(core._cell_key(group, settings), []).append(number)
    controls = {}
    for members in cells.values():
        choice = _bh_cell([groups[number] for number in members])
        controls.update(dict.fromkeys(members, choice))
    return [replace(group, control=controls[number]) for number, group in enumerate(groups)]


_DEFAULT = core.group_controls
_PATCH = {"per-run": _per_run, "pooled": _bh, "pooled-lenient": _DEFAULT}


def _analyse(table: pd.DataFrame, rule: str, seed: int) -> Any:
    if rule in ("gam", "linear"):
        return gengen.analyse(table, id_testset="id", n_boot=N_BOOT, seed=seed, fit=rule)
    core.group_controls = _PATCH[rule]
    try:
        return gengen.analyse(table, id_testset="id", n_boot=N_BOOT, seed=seed)
    finally:
        core.group_controls = _DEFAULT


def _main_rows(found: Any, rho: float) -> pd.DataFrame:
    runs = found.pairs[found.pairs["level"] == "run"].reset_index(drop=True)
    main = runs[_pair_masks(runs, rho)["main pair"]]
    keep = ["model", "run", "fit", "testable", "p_deciding", "r_partial"]
    return main[[column for column in keep if column in main.columns]].reset_index(drop=True)


def run(label: str, replicates: int, alt_replicates: int, out: str) -> None:
    grid = {cell.label: cell for cell in CONTRACT_GRID} | EXTRA
    cell = grid[label]
    records = []
    for index, rho in enumerate(cell.design.rhos):
        count = replicates if rho == 0 else alt_replicates
        if count == 0 or (rho > 0 and cell.kind != "single"):
            continue
        rng = np.random.default_rng(np.random.SeedSequence([SEED, zlib.crc32(cell.label.encode()), index]))
        truth = _truth(cell, rho)[0]
        counts: dict[str, dict[tuple[str, str], dict[str, float]]] = {rule: {} for rule in RULES}
        seconds = dict.fromkeys(RULES, 0.0)
        batch = 1 if cell.kind == "models" else 60
        mains = []
        last_per_run: Any = None
        for first in range(0, count, batch):
            table = _draw_table(cell, rho, rng, min(batch, count - first), first)
            line = _main_rows(_analyse(table, "linear", SEED + first), rho)
            for rule in RULES:
                started = time.process_time()
                if rule == "pooled" and cell.kind != "pooled":
                    found = last_per_run  # one run per condition: the pooled choice is the run's own
                else:
                    found = _analyse(table, rule, SEED + first)
                last_per_run = found if rule == "per-run" else last_per_run
                seconds[rule] += time.process_time() - started
                _tally_paths(found, "default", rho, truth, counts[rule])
                if cell.kind == "models":
                    _tally_verdict(found, "default", SEED + first, counts[rule])
                main = _main_rows(found, rho)
                mains.append(
                    main.assign(
                        rule=rule,
                        linear_p=line["p_deciding"].to_numpy(),
                        linear_testable=line["testable"].to_numpy(),
                    )
                )
        joined = pd.concat(mains, ignore_index=True)
        for rule in RULES:
            part = joined[joined["rule"] == rule]
            extra = _choice_stats(part)
            for (method, subset), tally in counts[rule].items():
                if method.startswith("t-test"):
                    continue
                records.append(
                    {
                        "cell": label,
                        "kind": cell.kind,
                        "rho": rho,
                        "true_r": truth,
                        "rule": rule,
                        "method": method,
                        "rows": subset,
                        **tally,
                        **(extra if (method, subset) == ("default", "main pair") else {}),
                        "cpu_s": round(seconds[rule], 1),
                    }
                )
        print(f"{label} rho={rho}: done", file=sys.stderr, flush=True)
    pd.DataFrame(records).to_csv(out, index=False)


def _choice_stats(part: pd.DataFrame) -> dict[str, float]:
    """On the main pair: the share of runs given the GAM, the linear test's rejection rate among runs given the
    GAM and among runs left on the line, the phi coefficient of (GAM, linear rejects), and the rule's own
    type-I on the runs it left on the line."""
    both = part[part["testable"].astype(bool) & part["linear_testable"].astype(bool)]
    gam = (both["fit"].astype(str) == "gam").to_numpy()
    line_rejects = both["linear_p"].to_numpy(float) < 0.05
    own = both["p_deciding"].to_numpy(float) < 0.05
    phi = float("nan")
    if 0 < gam.mean() < 1 and 0 < line_rejects.mean() < 1:
        phi = float(np.corrcoef(gam, line_rejects)[0, 1])
    return {
        "main_runs": len(both),
        "gam_share": float(gam.mean()) if len(both) else math.nan,
        "linear_reject_if_gam": float(line_rejects[gam].mean()) if gam.any() else math.nan,
        "linear_reject_if_line": float(line_rejects[~gam].mean()) if (~gam).any() else math.nan,
        "phi_gam_linear_reject": phi,
        "reject_left_on_line": float(own[~gam].mean()) if (~gam).any() else math.nan,
    }


def rates(paths: list[str]) -> pd.DataFrame:
    table = pd.concat([pd.read_csv(path) for path in paths], ignore_index=True)
    table["rate"] = table["reject"] / table["testable"]
    table["se"] = np.sqrt(table["rate"] * (1 - table["rate"]) / table["testable"])
    table["coverage"] = table["covered"] / table["intervals"].replace(0, np.nan)
    table["flags"] = table["flagged"] / table["testable"].replace(0, np.nan)
    return table


def _rate(rows: pd.DataFrame) -> str:
    if rows.empty or not rows["testable"].sum():
        return "–"
    reject, testable = float(rows["reject"].sum()), float(rows["testable"].sum())
    rate = reject / testable
    return f"{rate:.3f} ± {math.sqrt(rate * (1 - rate) / testable):.3f}"


def markdown(paths: list[str]) -> str:
    """docs/calibration.md's table: per cell and rule, the main pair's null and power, the pooled rows, the
    choice's statistics."""
    table = pd.concat([pd.read_csv(path) for path in paths], ignore_index=True)
    lines = [
        "| cell | rule | null rows | type-I (main pair) | coverage | flags | power ρ=.3 / .5 | pooled fixed / random "
        "| GAM share | linear rejects if GAM / if line (φ) | type-I left on line |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (cell, rule), part in table.groupby(["cell", "rule"], sort=False):
        if rule == "pooled" and (part["kind"] != "pooled").all():
            continue  # one run per condition: the pooled choice is the per-run one
        null = part[(part["rho"] == 0) & (part["method"] == "default") & (part["rows"] == "main pair")]
        main = part[(part["rho"] == 0) & (part["method"] == "default") & (part["rows"] == "main pair")].iloc[0]
        powers = []
        for rho in (0.3, 0.5):
            alt = part[(part["rho"] == rho) & (part["method"] == "default") & (part["rows"] == "main pair")]
            powers.append(f"{alt['reject'].sum() / alt['testable'].sum():.2f}" if len(alt) else "–")
        pooled = []
        for kind in ("fixed", "random"):
            rows = part[(part["method"] == f"default pooled {kind}") & (part["rows"] == "main pair")]
            pooled.append(_rate(rows) if len(rows) else "–")
        verdict = part[part["method"] == "default verdict Q"]
        if len(verdict):
            pooled = [f"Q {_rate(verdict)}"]
        coverage = null["covered"].sum() / max(null["intervals"].sum(), 1)
        flags = null["flagged"].sum() / max(null["testable"].sum(), 1)
        phi = main["phi_gam_linear_reject"]
        left = main["reject_left_on_line"]
        lines.append(
            f"| {cell} | {rule} | {int(null['testable'].sum())} | {_rate(null)} | {coverage:.3f} | {flags:.2f} | "
            f"{' / '.join(powers)} | {' / '.join(pooled)} | {main['gam_share']:.2f} | "
            f"{main['linear_reject_if_gam']:.2f} / {main['linear_reject_if_line']:.2f} "
            f"({'–' if pd.isna(phi) else f'{phi:.2f}'}) | {'–' if pd.isna(left) else f'{left:.3f}'} |".replace(
                "nan", "–"
            )
        )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if argv[:1] == ["run"] and len(argv) == 5:
        run(argv[1], int(argv[2]), int(argv[3]), argv[4])
    elif argv[:1] == ["rates"] and len(argv) >= 2:
        table = rates(argv[1:])
        shown = ["cell", "rho", "rule", "method", "rows", "testable", "rate", "se", "coverage", "flags"]
        extra = [
            "gam_share",
            "linear_reject_if_gam",
            "linear_reject_if_line",
            "phi_gam_linear_reject",
            "reject_left_on_line",
            "cpu_s",
        ]
        shown += [column for column in extra if column in table.columns]
        with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_columns", 30):
            print(table[shown].round(3).to_string(index=False))
    elif argv[:1] == ["markdown"] and len(argv) >= 2:
        print(markdown(argv[1:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
