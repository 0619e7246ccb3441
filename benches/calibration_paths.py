"""Pooled seeds, heterogeneity across models and every inference path on item-level curves (issue 34, items 4-5).

Every replicate is drawn by :func:`gengen.item_level.simulate_items` (log-spaced checkpoints, N = 1,000 examples,
n = 40 unless stated; docs/calibration.md, "Item-level grid") and analysed by the public ``gengen.analyse``.

Kinds:

* ``pooled REPS RUNS [N_BOOT] [alone]``: one model, ``RUNS`` seeds; a third test set ``ood_c`` = (ood_a + ood_b)/2
  truly co-moves with both, so ood_a/ood_b is a null pair beside two real ones (``alone``: the null pair only).
  Writes every run-level row of the pairs (estimate, ``se_z``, ``df_sieve``, interval) and the pooled table's
  p-values, so that other poolings can be evaluated on the same draws.
* ``models REPS [N_BOOT] [INFERENCE]``: 4 models, one run each, the same null in all four; the verdict's Cochran's
  Q (``p_heterogeneity``), ``p_joint`` and class for the null pair ood_a/ood_b.
* ``paths REPS N_EXAMPLES [N_BOOT] [N] [SCHEDULE] [PATHS]``: one run with a stuck set beside the main pair; every
  inference path's (or the comma-separated ``PATHS``') deciding p on every run-level row.

Seeds: replicate r of a kind draws from ``numpy.random.default_rng([34, 5, KIND_CODE, r])``; analyse's seed is r.

Usage::

    python benches/calibration_paths.py pooled 300 10 > pooled10.csv
    python benches/calibration_paths.py rates pooled10.csv
"""

from __future__ import annotations

import sys
import time
import zlib

import numpy as np
import pandas as pd

_RUN_COLUMNS = (
    "model", "run", "testset_a", "testset_b", "testable", "r_partial", "se_z", "df_sieve", "ci_low", "ci_high",
    "ci_level", "p_deciding", "fit", "estimand", "r_innovation", "df_lagged", "diagnostics",
)  # fmt: skip


def _rng(kind: str, rep: int) -> np.random.Generator:
    return np.random.default_rng([34, 5, zlib.crc32(kind.encode()), rep])


def _with_ood_c(table: pd.DataFrame) -> pd.DataFrame:
    wide = table.pivot_table(index=["model", "run", "step"], columns="testset", values="value").reset_index()
    wide["ood_c"] = (wide["ood_a"] + wide["ood_b"]) / 2.0
    long = wide.melt(id_vars=["model", "run", "step"], var_name="testset", value_name="value")
    long["metric"] = "acc"
    long["n_examples"] = 1000
    return long


def _pooled(reps: int, runs: int, n_boot: int, third: bool = True, batch: int = 30) -> pd.DataFrame:
    import gengen
    from gengen.calibration.item_level import ItemCell, item_table, simulate_items

    beside = ", a real pair beside" if third else ""
    cell = ItemCell(f"log n=40, {runs} seeds{beside}", runs=runs, rhos=(0.0,))
    out = []
    for first in range(0, reps, batch):
        count = min(batch, reps - first)
        drawn = [
            simulate_items(cell, 0.0, _rng(f"pooled{runs}" + ("" if third else " alone"), first + i))
            for i in range(count)
        ]
        table = item_table(cell, drawn, first=first)
        table = _with_ood_c(table) if third else table
        found = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=first)
        runs_rows = found.pairs[found.pairs["level"] == "run"]
        frame = runs_rows[[c for c in _RUN_COLUMNS if c in runs_rows.columns]].copy()
        pooled = found.pooled[["model", "testset_a", "testset_b", "p_fixed", "p_random", "tau2"]]
        frame = frame.merge(pooled, on=["model", "testset_a", "testset_b"], how="left")
        frame["cell"] = cell.label
        out.append(frame)
        print(f"pooled {runs}: {first + count}/{reps}", file=sys.stderr, flush=True)
    return pd.concat(out, ignore_index=True)


def _models(reps: int, n_boot: int, inference: str) -> pd.DataFrame:
    import gengen
    from gengen.across.verdict import build_verdict
    from gengen.calibration.item_level import ItemCell, item_table, simulate_items

    cell = ItemCell("log n=40, 4 models", models=4, rhos=(0.0,))
    rows = []
    for rep in range(reps):
        table = item_table(cell, [simulate_items(cell, 0.0, _rng("models", rep))], first=rep)
        found = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=rep, inference=inference)
        verdict = build_verdict(found, n_perm=19)
        for row in verdict.pairs.itertuples(index=False):
            rows.append(
                {
                    "cell": cell.label,
                    "rep": rep,
                    "inference": inference,
                    "pair": f"{row.testset_a}/{row.testset_b}",
                    "n_groups": row.n_groups,
                    "p_heterogeneity": row.p_heterogeneity,
                    "p_common": row.p_common,
                    "p_joint": getattr(row, "p_joint", np.nan),
                    "verdict": row.verdict,
                }
            )
        runs_rows = found.pairs[found.pairs["level"] == "run"]
        for row in runs_rows.itertuples(index=False):
            rows.append(
                {
                    "cell": cell.label,
                    "rep": rep,
                    "inference": inference,
                    "pair": f"run {row.testset_a}/{row.testset_b}",
                    "p_deciding": row.p_deciding,
                    "testable": row.testable,
                }
            )
    return pd.DataFrame(rows)


#: Every inference path: its label and the options that ask for it.
_PATHS: dict[str, dict[str, str]] = {
    "sieve": {},
    "lagged": {"inference": "lagged"},
    "t-test": {"inference": "t-test"},
    "block permutation": {"inference": "permutation", "scheme": "block"},
    "circular permutation": {"inference": "permutation", "scheme": "circular"},
}


def _paths(
    reps: int,
    n_examples: int,
    n_boot: int,
    n: int = 40,
    schedule: str = "log",
    paths: tuple[str, ...] = tuple(_PATHS),
    batch: int = 30,
) -> pd.DataFrame:
    import gengen
    from gengen.calibration.item_level import ItemCell, item_table, simulate_items

    cell = ItemCell(
        f"{schedule} n={n} N={n_examples}", n=n, n_examples=n_examples, schedule=schedule, specials=("stuck",),
        rhos=(0.0,),
    )  # fmt: skip
    out = []
    for first in range(0, reps, batch):
        count = min(batch, reps - first)
        drawn = [simulate_items(cell, 0.0, _rng(f"paths{n_examples}{schedule}{n}", first + i)) for i in range(count)]
        table = item_table(cell, drawn, first=first)
        for inference, options in ((name, _PATHS[name]) for name in paths):
            found = gengen.analyse(table, id_testset="id", n_boot=n_boot, seed=first, **options)  # type: ignore[arg-type]
            runs_rows = found.pairs[found.pairs["level"] == "run"]
            frame = runs_rows[[c for c in _RUN_COLUMNS if c in runs_rows.columns]].copy()
            frame["inference"] = inference
            frame["cell"] = cell.label
            out.append(frame)
        print(f"paths {n_examples}: {first + count}/{reps}", file=sys.stderr, flush=True)
    return pd.concat(out, ignore_index=True)


def _rate(p: pd.Series) -> str:
    p = p.dropna()
    if not len(p):
        return "–"
    rate = float((p < 0.05).mean())
    return f"{rate:.3f} ± {np.sqrt(rate * (1 - rate) / len(p)):.3f} (of {len(p)})"


def _textbook(z: np.ndarray, v: np.ndarray, df: np.ndarray) -> tuple[float, float, float]:
    """The pooled p-values before issue 34's second round — the fixed effect on Satterthwaite's t, the
    DerSimonian–Laird random effect on the normal — and the fixed effect widened by Q/(R − 1) on t with R − 1 df
    where Q > R − 1 (measured, not adopted)."""
    from scipy import stats

    w = 1 / v
    fixed = np.sum(w * z) / np.sum(w)
    nu = np.sum(w) ** 2 / np.sum(w**2 / df)
    q = np.sum(w * (z - fixed) ** 2)
    tau2 = max(0.0, (q - (len(z) - 1)) / (np.sum(w) - np.sum(w**2) / np.sum(w)))
    w_random = 1 / (v + tau2)
    random = np.sum(w_random * z) / np.sum(w_random)
    spread = q / (len(z) - 1)
    widened = (
        float(2 * stats.t.sf(abs(fixed) * np.sqrt(np.sum(w) / spread), len(z) - 1))
        if spread > 1
        else float(2 * stats.t.sf(abs(fixed) * np.sqrt(np.sum(w)), nu))
    )
    return (
        float(2 * stats.t.sf(abs(fixed) * np.sqrt(np.sum(w)), nu)),
        float(2 * stats.norm.sf(abs(random) * np.sqrt(np.sum(w_random)))),
        widened,
    )


def rates(path: str) -> None:
    """Rates at α = 0.05 with Monte Carlo s.e.: for a ``pooled`` file the textbook pooling (before, written out)
    and :func:`gengen.stats.meta.fisher_meta` on the same runs now (after); for ``paths`` each path's
    rejections by pair; for ``models`` Cochran's Q, ``p_joint`` and the wrong verdicts on the null pair."""
    from gengen.stats.meta import fisher_meta

    table = pd.read_csv(path)
    if "inference" in table.columns and "p_heterogeneity" in table.columns:
        verdicts = table[table["pair"] == "ood_a/ood_b"]
        wrong = verdicts["verdict"].fillna("") != "undetermined"
        print(
            f"Q {_rate(verdicts['p_heterogeneity'])} | p_joint {_rate(verdicts['p_joint'])} | wrong verdicts "
            f"{wrong.mean():.3f} ± {np.sqrt(wrong.mean() * (1 - wrong.mean()) / len(wrong)):.3f}"
        )
        runs = table[table["pair"] == "run ood_a/ood_b"]
        print(f"run-level main pair {_rate(runs.loc[runs['testable'].astype(bool), 'p_deciding'])}")
        return
    table = table[table["testable"].astype(bool)]
    if "inference" in table.columns:
        for (inference, a, b), part in table.groupby(["inference", "testset_a", "testset_b"]):
            print(f"{inference} | {a}/{b} | {_rate(part['p_deciding'])}")
        return
    rows = []
    for (_, a, b), runs in table[np.isfinite(table["se_z"])].groupby(["model", "testset_a", "testset_b"]):
        if len(runs) < 2:
            continue
        now = fisher_meta(
            runs["r_partial"].to_numpy(),
            np.zeros(len(runs)),
            np.zeros(len(runs)),
            variance=runs["se_z"].to_numpy() ** 2,
            df=runs["df_sieve"].to_numpy(),
        )
        before = _textbook(
            np.arctanh(runs["r_partial"].to_numpy()), runs["se_z"].to_numpy() ** 2, runs["df_sieve"].to_numpy()
        )
        rows.append((f"{a}/{b}", *before, now.p_fixed, now.p_random))
    pooled = pd.DataFrame(
        rows, columns=["pair", "fixed before", "random before", "fixed widened", "fixed after", "random after"]
    )
    for null, part in pooled.groupby(pooled["pair"] == "ood_a/ood_b"):
        label = "null pair" if null else "real pairs (power)"
        print(label, " | ".join(f"{name} {_rate(part[name])}" for name in pooled.columns[1:]))


def main(argv: list[str]) -> None:
    kind = argv[0]
    start = time.process_time()
    if kind == "rates":
        rates(argv[1])
        return
    if kind == "pooled":
        third = len(argv) <= 4 or argv[4] != "alone"
        out = _pooled(int(argv[1]), int(argv[2]), int(argv[3]) if len(argv) > 3 else 299, third)
    elif kind == "models":
        out = _models(int(argv[1]), int(argv[2]) if len(argv) > 2 else 299, argv[3] if len(argv) > 3 else "sieve")
    elif kind == "paths":
        extra = {}
        if len(argv) > 4:
            extra["n"] = int(argv[4])
        if len(argv) > 5:
            extra["schedule"] = argv[5]
        if len(argv) > 6:
            extra["paths"] = tuple(argv[6].split(","))
        out = _paths(int(argv[1]), int(argv[2]), int(argv[3]) if len(argv) > 3 else 299, **extra)
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    out.to_csv(sys.stdout, index=False)
    print(f"# CPU {time.process_time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
