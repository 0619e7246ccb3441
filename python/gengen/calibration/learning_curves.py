r"""Simulated fine-tuning learning curves: the trajectories the realistic calibration study analyses.

A fine-tuning run is scored on an in-domain (ID) test set and two out-of-distribution (OOD) test sets at a
checkpoint schedule whose first row is the model before fine-tuning (step 0). What makes these trajectories
hard for a correlation across checkpoints, and what this module reproduces:

- **The jump at step 0.** Before fine-tuning every test set is at chance (0.5, binary tasks); the first
  evaluation already sits far up the learning curve.
- **Dense-early, log-spaced schedules.** ID accuracy rises from 0.5 to 0.85 in the first ~15% of training
  (:math:`c(s) = 0.5 + 0.35 (1 - e^{-s/\tau})`, :math:`\tau = 0.05 T`, 95% of the rise by :math:`0.15 T`);
  checkpoints are log-spaced (step 0, then :math:`T/100 \dots T` geometrically), dense-early (half of them
  evenly in the first 15%, half evenly over the rest) or evenly spaced.
- **Fixed test sets.** Every accuracy is a count out of the same N examples at every checkpoint. Example i of
  a test set has a latent threshold :math:`u_i \sim U(0, 1)`, fixed for the run, and is answered correctly
  when the checkpoint's true accuracy exceeds it, so the measured accuracy is the empirical CDF
  :math:`\hat p_t = \#\{i: u_i < p_t\}/N`: exactly k/N, with a measurement error
  (variance :math:`p_t(1 - p_t)/N`) that persists across checkpoints with similar :math:`p_t` rather than
  being redrawn at each. At step 0 the model guesses: each example is right with probability 0.5,
  independently (a fresh Binomial(N, 0.5) count).
- **OOD tracks ID.** After step 0, OOD's true accuracy is a link of the *measured* ID accuracy :math:`x_t`
  (the series the analysis conditions on, so that "independent given ID" is exactly the null):
  linear :math:`p_{j,t} = 0.5 + b_j (x_t - 0.5) + \sigma e_{j,t}` or saturating
  :math:`p_{j,t} = 0.5 + 0.35 b_j\, g((x_t - 0.5)/0.35) + \sigma e_{j,t}`,
  :math:`g(v) = (1 - e^{-4v})/(1 - e^{-4})`, with :math:`b = (0.6, 0.4)`, :math:`\sigma = 0.02` and
  :math:`e_j` stationary unit-variance AR(1) noise in the checkpoint index (φ ∈ {0.5, 0.9}).
- **Correlated noise under the alternative.** :math:`e_a = \sqrt{1-\rho}\, v_a + \sqrt{\rho}\, w`,
  :math:`e_b = \sqrt{1-\rho}\, v_b + \sqrt{\rho}\, w` with :math:`v_a, v_b, w` independent AR(1) processes of
  the same φ: the noises (and their innovations) correlate at ρ. The observed series add independent
  measurement errors, so the partial correlation the data carry is attenuated (:func:`true_partial_corr`).
- **Special test sets.** ``stuck``: test set b stays at chance after step 0, at
  :math:`0.5 + K_t/N` with :math:`K_t` a rounded N(0, 1.5²) (the model answers "yes" to everything but a
  few examples, as HANS often is); ``plateau``: test set b's true accuracy is frozen for the last half of
  the checkpoints (the same count on the same examples); ``duplicates``: a quarter of the rows after step 0
  repeat the row before them under their own step number, as when two evaluations see the same weights.

ID's own true accuracy is :math:`c(s_t)` plus AR(1) (0.5) noise of sd 0.005 after step 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from gengen.calibration.cell import SCHEDULES, Cell, Replicate, check_curve_cell
from gengen.errors import GengenError

__all__ = [
    "CurveCell",
    "check_curve_cell",
    "checkpoint_steps",
    "curve_table",
    "design_partial_corr",
    "id_curve",
    "simulate_curve_runs",
    "true_partial_corr",
]

#: Training length (steps) of every simulated run.
TOTAL_STEPS = 100_000
#: Slopes of the two OOD test sets' links, their noise sd, ID's ceiling.
SLOPES = (0.6, 0.4)
NOISE_SD = 0.02
ID_GAIN = 0.35
ID_NOISE_SD = 0.005
#: Standard deviation of the stuck test set's count around N/2 (in examples).
STUCK_SD = 1.5
TESTSETS = ("id", "ood_a", "ood_b")


#: Correlations of the two OOD noises under the alternatives of the realistic grid.
REALISTIC_RHOS = (0.3, 0.5)


def CurveCell(  # the name of the realistic grid's cells before they became gengen.calibration.simulate.Cell
    label: str, *, n: int = 20, phi: float = 0.9, link: str = "linear", alternatives: bool = True, **fields: Any
) -> Cell:
    """A cell of the realistic grid: a :class:`gengen.calibration.simulate.Cell` of the ``"curves"`` process.

    Parameters
    ----------
    label : str
    n : int
        Checkpoint rows including step 0 (and the repeated rows of ``duplicates``).
    phi : float
        AR(1) coefficient of the OOD noise (the cell's ``coef_a``).
    link : {"linear", "saturating"}
        The cell's ``shape``.
    alternatives : bool
        Whether the study also simulates ρ = 0.3, 0.5 (the cell's ``rhos``); without: the null only.
    **fields
        The other fields of a curves cell (``schedule``, ``n_examples``, ``special``, ``jump``, ``runs``,
        ``well_specified``), with :class:`~gengen.calibration.simulate.Cell`'s defaults.

    Returns
    -------
    Cell
    """
    rhos = (0.0, *REALISTIC_RHOS) if alternatives else (0.0,)
    return Cell(label, n=n, process="curves", coef_a=(phi,), shape=link, rhos=rhos, **fields)


def checkpoint_steps(n: int, schedule: str = "log", total: int = TOTAL_STEPS) -> np.ndarray:
    """The n distinct training steps of a schedule, starting at step 0 (the model before fine-tuning).

    Parameters
    ----------
    n : int
        Checkpoints, step 0 included (at least 3).
    schedule : {"log", "dense-early", "even"}
        ``log``: step 0, then n − 1 steps geometrically from ``total/100`` to ``total``; ``dense-early``:
        step 0, then half of the rest evenly up to 15% of training and half evenly over the remainder;
        ``even``: evenly from 0 to ``total``.
    total : int
        The last step.

    Returns
    -------
    ndarray of int64
        Increasing steps.

    Examples
    --------
    >>> checkpoint_steps(6, "log", total=100_000).tolist()
    [0, 1000, 3162, 10000, 31623, 100000]
    """
    if n < 3:
        raise GengenError(f"n: a schedule needs at least 3 checkpoints, got {n}")
    rest = n - 1
    if schedule == "log":
        later = np.geomspace(total / 100, total, rest)
    elif schedule == "dense-early":
        early = rest // 2
        cut = 0.15 * total
        later = np.concatenate([np.linspace(cut / early, cut, early), np.linspace(cut, total, rest - early + 1)[1:]])
    elif schedule == "even":
        later = np.linspace(total / rest, total, rest)
    else:
        raise GengenError(f"schedule: {schedule!r} is not one of {', '.join(SCHEDULES)}")
    steps = np.concatenate([[0], np.round(later)]).astype(np.int64)
    if np.any(np.diff(steps) <= 0):
        raise GengenError(f"schedule: {n} {schedule} checkpoints of {total} steps are not distinct")
    return steps


def id_curve(steps: np.ndarray, total: int = TOTAL_STEPS) -> np.ndarray:
    """ID's true accuracy at ``steps``: 0.5 + 0.35 (1 − exp(−s/τ)), τ = 0.05 total."""
    return 0.5 + ID_GAIN * (1.0 - np.exp(-np.asarray(steps, dtype=float) / (0.05 * total)))


def _ar1(rng: np.random.Generator, phi: float, size: tuple[int, int]) -> np.ndarray:
    """Stationary unit-variance AR(1) series (rows), started from the stationary distribution."""
    rows, n = size
    shocks = rng.standard_normal((rows, n))
    out = np.empty((rows, n))
    out[:, 0] = shocks[:, 0]
    scale = np.sqrt(1.0 - phi * phi)
    for t in range(1, n):
        out[:, t] = phi * out[:, t - 1] + scale * shocks[:, t]
    return out


def _threshold_counts(rng: np.random.Generator, p: np.ndarray, n_examples: int) -> np.ndarray:
    """#{i: u_i < p_t} for one fixed set of N uniform thresholds u, at every p_t of a row (rows independent).

    Exact and O(n) per row: the counts at the sorted p are cumulative multinomial cell counts, drawn as
    successive binomials of the examples not yet counted.
    """
    p = np.clip(p, 0.0, 1.0)
    order = np.argsort(p, axis=1)
    sorted_p = np.take_along_axis(p, order, axis=1)
    counts = np.empty(p.shape, dtype=np.int64)
    below = np.zeros(p.shape[0], dtype=np.int64)
    previous = np.zeros(p.shape[0])
    for t in range(p.shape[1]):
        remaining = n_examples - below
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(previous < 1.0, (sorted_p[:, t] - previous) / (1.0 - previous), 0.0)
        below = below + rng.binomial(remaining, np.clip(share, 0.0, 1.0))
        counts[:, t] = below
        previous = sorted_p[:, t]
    out = np.empty_like(counts)
    np.put_along_axis(out, order, counts, axis=1)
    return out


def _link(cell: Cell, x: np.ndarray, j: int) -> np.ndarray:
    """Test set j's noise-free accuracy after step 0 at measured ID accuracy x."""
    slope, jump = SLOPES[j], cell.jump[j]
    if cell.link == "linear":
        return 0.5 + jump + slope * (x - 0.5)
    v = (x - 0.5) / ID_GAIN
    return 0.5 + jump + ID_GAIN * slope * (1.0 - np.exp(-4.0 * v)) / (1.0 - np.exp(-4.0))


def _duplicate(arrays: tuple[np.ndarray, ...], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A quarter of the rows after step 0, chosen at random, replaced by a copy of the row before them."""
    n = arrays[0].shape[1]
    chosen = np.sort(rng.choice(np.arange(1, n), size=n // 4, replace=False))
    out = tuple(array.copy() for array in arrays)
    for t in chosen:  # in increasing order, so that a run of chosen rows repeats one checkpoint
        for array in out:
            array[:, t] = array[:, t - 1]
    return out


def simulate_curve_runs(cell: Cell, rho: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Steps (rows) and counts (runs, rows, 3: id, ood_a, ood_b) of one replicate of ``cell``.

    Parameters
    ----------
    cell : CurveCell
    rho : float
        Correlation of the two OOD noises (0: the null), in [0, 1).
    rng : numpy.random.Generator

    Returns
    -------
    steps : ndarray of int64, shape (n,)
    counts : ndarray of int64, shape (runs, n, 3)
        Correct answers out of ``cell.n_examples``.

    Examples
    --------
    >>> import numpy as np
    >>> cell = CurveCell("base", n=11, n_examples=200)
    >>> steps, counts = simulate_curve_runs(cell, 0.0, np.random.default_rng(1))
    >>> steps.shape, counts.shape, int(counts.max()) <= 200
    ((11,), (1, 11, 3), True)
    """
    steps, counts, _ = _simulate(cell, rho, rng)
    return steps, counts


def _simulate(cell: Cell, rho: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, counts and the OOD test sets' conditional means given ID (runs, n, 2) of one replicate."""
    if not 0.0 <= rho < 1.0:
        raise GengenError(f"rho: must lie in [0, 1), got {rho}")
    runs, big_n = cell.runs, cell.n_examples
    n = cell.n
    steps = checkpoint_steps(n, cell.schedule)
    counts = np.empty((runs, n, 3), dtype=np.int64)
    # ID: the curve plus small AR(0.5) training noise; measured on its fixed test set.
    id_true = id_curve(steps)[None, :] + ID_NOISE_SD * _ar1(rng, 0.5, (runs, n))
    id_true[:, 0] = 0.5
    counts[:, 1:, 0] = _threshold_counts(rng, id_true[:, 1:], big_n)
    x = counts[:, :, 0] / big_n
    noise = [_ar1(rng, cell.phi, (runs, n - 1)) for _ in range(2)]
    if rho:
        shared = _ar1(rng, cell.phi, (runs, n - 1))
        noise = [np.sqrt(1.0 - rho) * e + np.sqrt(rho) * shared for e in noise]
    means = np.full((runs, n, 2), 0.5)
    for j in range(2):
        means[:, 1:, j] = _link(cell, x[:, 1:], j)
        p = means[:, 1:, j] + NOISE_SD * noise[j]
        if j == 1 and cell.special == "plateau":
            half = (n - 1) // 2
            p[:, half:] = p[:, [half - 1]]
        counts[:, 1:, j + 1] = _threshold_counts(rng, p, big_n)
    if cell.special == "stuck":
        wobble = np.rint(STUCK_SD * rng.standard_normal((runs, n - 1))).astype(np.int64)
        counts[:, 1:, 2] = big_n // 2 + wobble
    # Step 0: the model before fine-tuning guesses on every test set.
    counts[:, 0, :] = rng.binomial(big_n, 0.5, size=(runs, 3))
    if cell.special == "duplicates":
        # A repeated row keeps its own step number: two evaluations of the same weights.
        counts, means = _duplicate((counts, means), rng)
    return steps, counts, means


def design_partial_corr(cell: Cell, rho: float, *, replicates: int = 20_000, seed: int = 0) -> float:
    r"""The partial correlation of the two OOD test sets given ID that the design of ``cell`` carries.

    The measurement error of a fixed test set persists across checkpoints with similar accuracy, so a
    regression on ID absorbs much of it and the closed form of :func:`true_partial_corr` understates the
    correlation the residuals keep. This is the design's own value: over ``replicates`` simulated runs, the
    deviations :math:`d_{j,t} = \hat p_{j,t} - \mu_{j,t}` from each test set's conditional mean given ID
    (its link after step 0, chance at step 0) are regressed on :math:`[1, x_t]` within each run, and

    .. math::
       \rho_{\text{design}} = \frac{\sum \langle r_a, r_b \rangle}{\sqrt{\sum \lVert r_a \rVert^2
       \sum \lVert r_b \rVert^2}},

    the sums running over runs (the limit of the fixed-effect pooled correlation of many runs). Zero under the
    null (ρ = 0) by construction.

    Examples
    --------
    >>> cell = CurveCell("base", n=20, n_examples=30000)
    >>> 0.27 < design_partial_corr(cell, 0.3, replicates=2000) < 0.34
    True
    """
    if rho == 0:
        return 0.0
    rng = np.random.default_rng(np.random.SeedSequence([seed, 23]))
    design = dataclasses.replace(cell, runs=replicates)
    _, counts, means = _simulate(design, rho, rng)
    x = counts[:, :, 0] / cell.n_examples
    deviations = counts[:, :, 1:] / cell.n_examples - means
    # Within each run: residuals of a simple regression on x (vectorised over runs).
    xc = x - x.mean(axis=1, keepdims=True)
    dc = deviations - deviations.mean(axis=1, keepdims=True)
    slope = np.einsum("rt,rtj->rj", xc, dc) / np.einsum("rt,rt->r", xc, xc)[:, None]
    residual = dc - xc[:, :, None] * slope[:, None, :]
    sums = np.array(
        [np.sum(residual[..., 0] * residual[..., 1]), np.sum(residual[..., 0] ** 2), np.sum(residual[..., 1] ** 2)]
    )
    return float(sums[0] / np.sqrt(sums[1] * sums[2]))


def true_partial_corr(cell: Cell, rho: float) -> float:
    r"""The partial correlation of the two OOD test sets given ID that a replicate of ``cell`` carries.

    Notes
    -----
    The residual of test set j given ID is :math:`\sigma e_{j,t} + m_{j,t}`, with measurement error
    :math:`m_{j,t}` of variance :math:`p_{j,t}(1 - p_{j,t})/N`, independent across test sets, so

    .. math:: \rho_{\text{partial}} = \frac{\rho\, \sigma^2}{\sqrt{(\sigma^2 + \bar v_a)(\sigma^2 + \bar v_b)}},
       \qquad \bar v_j = \frac{1}{n - 1} \sum_{t \ge 1} \frac{p_{j,t} (1 - p_{j,t})}{N},

    with :math:`p_{j,t}` the noise-free link of ID's curve. Zero under the null whatever the cell; special
    cells (stuck, plateau) have no alternative.

    Examples
    --------
    >>> round(true_partial_corr(CurveCell("base", n_examples=30000), 0.3), 3)
    0.294
    """
    if rho == 0:
        return 0.0
    steps = checkpoint_steps(cell.n, cell.schedule)[1:]
    x = id_curve(steps)
    variances = []
    for j in range(2):
        p = _link(cell, x, j)
        variances.append(float(np.mean(p * (1 - p))) / cell.n_examples)
    sigma2 = NOISE_SD**2
    return float(rho * sigma2 / np.sqrt((sigma2 + variances[0]) * (sigma2 + variances[1])))


def curve_table(
    cell: Cell, replicates: Sequence[tuple[np.ndarray, np.ndarray] | Replicate], first: int = 0
) -> pd.DataFrame:
    """Replicates of :func:`simulate_curve_runs` (steps, counts) or :func:`gengen.calibration.simulate.simulate` as
    one score
    table for :func:`gengen.analyse`.

    Replicate r is model ``rep{first + r}``; its runs are ``seed=0``, ``seed=1``, …; values are counts / N and
    ``n_examples`` is N, as an lm-eval import would record them.
    """
    frames = []
    for offset, replicate in enumerate(replicates):
        if isinstance(replicate, Replicate):
            steps = replicate.steps
            values = np.concatenate([replicate.id_scores[:, :, None], replicate.scores], axis=-1)
        else:
            steps, counts = replicate
            values = counts / cell.n_examples
        runs, n, m = values.shape
        frames.append(
            pd.DataFrame(
                {
                    "model": f"rep{first + offset}",
                    "run": np.repeat([f"seed={s}" for s in range(runs)], n * m),
                    "step": np.tile(np.repeat(steps, m), runs),
                    "testset": np.tile(TESTSETS, runs * n),
                    "value": values.reshape(-1),
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    table["metric"] = "acc"
    table["n_examples"] = cell.n_examples
    return table
