"""The sieve on training time (issue 34, item 2): before/after on the same draws.

Two kinds of cells, each analysed by :func:`gengen.stats.sieve.sieve_partial_corr_matrix` twice on the same data and
seed: without the checkpoints' steps (the sieve before this item: an autoregression in checkpoint index) and with
them (the training-time correction, :mod:`gengen.stats.sieve_time`). Recorded per row: artanh r, ``se_z``, the
effective df, the p-value, whether a column note (Ljung–Box or variance change) fired, and the correction factor.

* ``ou``: two independent Ornstein–Uhlenbeck paths in training steps (length 5% of training, unit variance) at the
  n checkpoints of a schedule (``gengen.calibration.learning_curves.checkpoint_steps``, step 0 left out), linear
  control on the item-level simulator's ID curve; the true sd of artanh r by brute force (40,000 pairs).
* ``items``: a cell of the item-level simulator (:mod:`gengen.calibration.item_level`, null, measured-ID
  dependence) with the default's control choice (:func:`gengen.stats.control_choice.choose_control`, i.e.
  ``fit="auto"``) or one forced; pooled cells add the fixed- and random-effects p of the main pair
  (:func:`gengen.stats.meta.fisher_meta` on the runs' ``se_z`` and ``df_sieve``).

Usage::

    python benches/calibration_training_time.py ou N SCHEDULE REPS > ou.tsv
    python benches/calibration_training_time.py items REPS SCHEDULE N N_EXAMPLES RUNS [auto|linear|gam] > items.tsv

Seeds: ``ou`` draws from ``numpy.random.default_rng(34)``; item replicate r from ``default_rng([34, 2, r])``; the
sieve's seed is the replicate (``1000 r + seed`` for pooled runs). n_boot = 199.
"""

from __future__ import annotations

import sys
from typing import Literal

import numpy as np

from gengen.calibration.item_level import ItemCell, ability_curve, simulate_items
from gengen.calibration.learning_curves import TOTAL_STEPS, checkpoint_steps
from gengen.stats.control_choice import choose_control
from gengen.stats.meta import fisher_meta
from gengen.stats.sieve import sieve_partial_corr_matrix
from gengen.stats.sieve_notes import sieve_column_notes

N_BOOT = 199


def _row(
    label: str,
    version: str,
    replicate: int,
    seed: int,
    fit: Literal["linear", "gam"],
    e: np.ndarray,
    x: np.ndarray,
    steps: np.ndarray | None,
) -> tuple[float, float, float, float]:
    """Analyse one run, print its row, return (z, se_z, df, p)."""
    result = sieve_partial_corr_matrix(e, x, fit=fit, n_boot=N_BOOT, seed=seed, steps=steps)
    flagged = sum(len(notes) > 0 for notes in sieve_column_notes(result, ["a", "b"])) / 2
    z = float(np.arctanh(result.r[0, 1]))
    values = (z, float(result.se_z[0, 1]), float(result.df[0, 1]), float(result.p_value[0, 1]))
    print(label, version, replicate, seed, fit, *values, flagged, float(result.time_inflation[0, 1]), sep="\t")
    return values


def ou(n: int, schedule: str, reps: int) -> None:
    """The ``ou`` cells (module docstring)."""
    steps = checkpoint_steps(n + 1, schedule)[1:].astype(float)
    x = ability_curve(steps)
    factor = np.linalg.cholesky(np.exp(-np.abs(np.subtract.outer(steps, steps)) / (0.05 * TOTAL_STEPS)))
    residual = np.eye(n) - np.column_stack([np.ones(n), x]) @ np.linalg.pinv(np.column_stack([np.ones(n), x]))
    rng = np.random.default_rng(34)
    draws = residual @ (factor @ rng.standard_normal((n, 40_000)))
    a, b = draws[:, ::2], draws[:, 1::2]
    sd_z = np.arctanh((a * b).sum(0) / np.sqrt((a * a).sum(0) * (b * b).sum(0))).std()
    label = f"ou n={n} {schedule} (brute-force sd z {sd_z:.4f})"
    for replicate in range(reps):
        e = factor @ rng.standard_normal((n, 2))
        for version, given in (("index", None), ("steps", steps)):
            _row(label, version, replicate, replicate, "linear", e, x, given)


def items(
    reps: int, schedule: str, n: int, n_examples: int, runs: int, force: Literal["auto", "linear", "gam"]
) -> None:
    """The ``items`` cells (module docstring)."""
    cell = ItemCell("bench", n=n, n_examples=n_examples, schedule=schedule, runs=runs, rhos=(0.0,))
    label = f"items {schedule} n={n} N={n_examples} runs={runs} fit={force}"
    for replicate in range(reps):
        draw = simulate_items(cell, 0.0, np.random.default_rng([34, 2, replicate]))
        per_run: dict[str, list[tuple[float, float, float, float]]] = {"index": [], "steps": []}
        for run in range(runs):
            values = draw.accuracy[0, run]
            fit = choose_control(values[:, 1:3], values[:, 0]).fit if force == "auto" else force
            for version, given in (("index", None), ("steps", draw.steps)):
                row = _row(label, version, replicate, 1000 * replicate + run, fit, values[:, 1:3], values[:, 0], given)
                per_run[version].append(row)
        if runs > 1:
            for version, rows in per_run.items():
                z, se, df, _ = np.array(rows).T
                meta = fisher_meta(np.tanh(z), np.full(runs, n), np.ones(runs), variance=se**2, df=df)
                print(label, f"pooled-{version}", replicate, "-", "-", meta.p_fixed, meta.p_random, meta.tau2, sep="\t")


if __name__ == "__main__":
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "ou":
        ou(int(args[0]), args[1], int(args[2]))
    else:
        chosen = args[5] if len(args) > 5 else "auto"
        if chosen not in ("auto", "linear", "gam"):
            sys.exit(f"fit: {chosen!r} is not one of auto, linear, gam")
        items(int(args[0]), args[1], int(args[2]), int(args[3]), int(args[4]), chosen)  # type: ignore[arg-type]
