r"""The simulator of gengen's calibration studies: one cell type, one :func:`simulate`, two processes.

A :class:`Cell` describes what is simulated — the process, the number of checkpoints ``n``, the noise, the link of
OOD to ID, how many runs are pooled and the noise correlations ``rhos`` to simulate (0: the null) — and
:func:`simulate` draws one replicate of it. Two processes:

- ``"textbook"``: noise around a smooth ID learning curve. n checkpoints at :math:`u_t = t/(n-1)`; ID
  :math:`c_t = 0.3 + 0.5 (1 - e^{-5u_t})/(1 - e^{-5}) + 0.01 \varepsilon_t`; OOD :math:`y_{j,t} = 0.2 + b_j
  f(x_t) + 0.02\, s_t e_{j,t}` with :math:`x_t = (c_t - 0.3)/0.5`, :math:`b = (0.3, 0.2)`, f linear, saturating
  :math:`(1 - e^{-4x})/(1 - e^{-4})` or non-monotone :math:`4x(1 - x)`; :math:`s_t = 1`, or :math:`3^{1 -
  u_t}/\sqrt{3}` (falling threefold) in heteroskedastic cells. The noises are :math:`e_a = \sqrt{1-\rho}\,v_a +
  \sqrt\rho\, w`, :math:`e_b = \sqrt{1-\rho}\,v_b + \sqrt\rho\, w` with :math:`v_a, v_b, w` independent
  stationary unit-variance AR processes (coefficients ``coef_a``, ``coef_b``) or random walks scaled by 1/√n,
  so that the correlation of the two noises, and of their innovations, is ρ.
- ``"curves"``: realistic fine-tuning learning curves (:mod:`gengen.calibration.learning_curves`: step 0 at chance,
log-spaced,
  dense-early or even schedules, accuracies counted on fixed test sets, test sets stuck at chance, plateaus,
  duplicated checkpoints, saturating links, pooled seeds).

:func:`gengen.calibration.studies.calibration_study` runs a study over cells. The method comparison of issue 9 measures
gengen's tests on textbook AR(1) and random-walk cells inside the Rust core (``gengen._core.calibration_cell``,
``rust/src/simulate.rs``: the same model with its own random streams, simulated and tested in one pass for
speed); :func:`simulate_trajectories` draws textbook runs from the same core in the store's long format.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gengen import _core
from gengen.calibration.cell import PROCESSES, Cell, Replicate
from gengen.calibration.learning_curves import simulate_curve_runs
from gengen.errors import GengenError, InvalidArgumentError

__all__ = [
    "NOISES",
    "PROCESSES",
    "Cell",
    "Replicate",
    "simulate",
    "simulate_pair_runs",
    "simulate_trajectories",
]


#: Noise models of the method comparison: (label, noise, φ).
NOISES: tuple[tuple[str, str, float], ...] = (
    ("ar1(0)", "ar1", 0.0),
    ("ar1(0.5)", "ar1", 0.5),
    ("ar1(0.9)", "ar1", 0.9),
    ("ar1(0.99)", "ar1", 0.99),
    ("random walk", "rw", 1.0),
)


def simulate(cell: Cell, rho: float, rng: np.random.Generator) -> Replicate:
    """One replicate of ``cell`` at noise correlation ``rho``, whatever its process.

    Parameters
    ----------
    cell : Cell
    rho : float
        Correlation of the two OOD noises, in [0, 1) (0: the null hypothesis).
    rng : numpy.random.Generator
        The replicate's randomness (the stream is the process's own: textbook cells draw as
        :func:`simulate_pair_runs`, curves cells as :func:`gengen.calibration.learning_curves.simulate_curve_runs`).

    Returns
    -------
    Replicate
        Steps, ID scores and the two OOD test sets' scores (accuracies: counts / N for curves).

    Examples
    --------
    >>> import numpy as np
    >>> from gengen.calibration.simulate import Cell, simulate
    >>> textbook = simulate(Cell("ar1(0.5)", n=30, coef_a=(0.5,)), 0.3, np.random.default_rng(1))
    >>> curves = simulate(Cell("log", n=11, process="curves", runs=2), 0.0, np.random.default_rng(1))
    >>> textbook.scores.shape, curves.scores.shape, curves.steps[:2].tolist()
    ((1, 30, 2), (2, 11, 2), [0, 1000])
    """
    if not 0.0 <= rho < 1.0:
        raise GengenError(f"rho: must lie in [0, 1), got {rho}")
    if cell.process == "curves":
        steps, counts = simulate_curve_runs(cell, rho, rng)
        accuracy = counts / cell.n_examples
        return Replicate(steps, accuracy[:, :, 0], accuracy[:, :, 1:])
    scores, id_scores = simulate_pair_runs(cell, rho, rng)
    return Replicate(100 * np.arange(1, cell.n + 1, dtype=np.int64), id_scores, scores)


def _stationary_noise(rng: np.random.Generator, cell: Cell, coef: tuple[float, ...], size: int) -> np.ndarray:
    """``size`` noise series of length n (rows): stationary unit-variance AR, or random walks scaled by 1/√n."""
    if cell.noise == "rw":
        return np.cumsum(rng.standard_normal((size, cell.n)), axis=1) / np.sqrt(cell.n)
    return _stationary_ar(rng, coef, cell.n, size)


def _stationary_ar(rng: np.random.Generator, coef: tuple[float, ...], n: int, size: int) -> np.ndarray:
    """``size`` stationary, unit-variance AR series of length n (rows), started by a long burn-in."""
    burn = 2000 if max((abs(c) for c in coef), default=0.0) >= 0.95 else 500
    p = len(coef)
    out = np.zeros((size, burn + n + p))
    shocks = rng.standard_normal((size, burn + n))
    for t in range(burn + n):
        value = shocks[:, t].copy()
        for i, c in enumerate(coef):
            value += c * out[:, p + t - 1 - i]
        out[:, p + t] = value
    series = out[:, -n:]
    # Unit variance from the autocovariance of the model (ψ-weights), not from the sample.
    psi = np.zeros(5000)
    psi[0] = 1.0
    for h in range(1, psi.size):
        psi[h] = sum(c * psi[h - 1 - i] for i, c in enumerate(coef) if h - 1 - i >= 0)
    return series / np.sqrt((psi**2).sum())


def simulate_pair_runs(cell: Cell, rho: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Scores (runs, n, 2) of the two OOD test sets and ID scores (runs, n) of one replicate of a textbook cell.

    Examples
    --------
    >>> import numpy as np
    >>> scores, id_scores = simulate_pair_runs(Cell("ar1(0.9)", n=20, runs=3), 0.3, np.random.default_rng(0))
    >>> scores.shape, id_scores.shape
    ((3, 20, 2), (3, 20))
    """
    n, runs = cell.n, cell.runs
    u = np.linspace(0.0, 1.0, n)
    id_scores = 0.3 + 0.5 * (1 - np.exp(-5 * u)) / (1 - np.exp(-5)) + 0.01 * rng.standard_normal((runs, n))
    x = (id_scores - 0.3) / 0.5
    f = {
        "linear": x,
        "saturating": (1 - np.exp(-4 * x)) / (1 - np.exp(-4)),
        "nonmonotone": 4 * x * (1 - x),
    }[cell.shape]
    noise_a = _stationary_noise(rng, cell, cell.coef_a, runs)
    noise_b = _stationary_noise(rng, cell, cell.noise_b, runs)
    if rho:
        shared = _stationary_noise(rng, cell, cell.coef_a, runs)
        noise_a = np.sqrt(1 - rho) * noise_a + np.sqrt(rho) * shared
        noise_b = np.sqrt(1 - rho) * noise_b + np.sqrt(rho) * shared
    scale = 3.0 ** (1 - u) / np.sqrt(3.0) if cell.heteroskedastic else np.ones(n)
    scores = np.stack([0.2 + 0.3 * f + 0.02 * scale * noise_a, 0.2 + 0.2 * f + 0.02 * scale * noise_b], axis=-1)
    return scores, id_scores


def _noise(noise: str, phi: float) -> tuple[str, float]:
    if noise in ("rw", "random_walk", "random walk"):
        return "rw", 1.0
    if noise != "ar1":
        raise InvalidArgumentError(f"noise: unknown value {noise!r}; expected 'ar1' or 'rw'")
    if not -1.0 < phi < 1.0:
        raise InvalidArgumentError(f"phi: an AR(1) coefficient must lie strictly between -1 and 1, got {phi}")
    return "ar1", float(phi)


def simulate_trajectories(
    *,
    n: int = 50,
    n_testsets: int = 2,
    noise: str = "ar1",
    phi: float = 0.9,
    shape: str = "linear",
    shared: float = 0.0,
    n_runs: int = 1,
    noise_sd: float = 0.02,
    id_noise_sd: float = 0.01,
    seed: int = 0,
    study: str = "simulated",
    model: str = "simulated",
) -> pd.DataFrame:
    """Simulated score trajectories in the store's long format.

    Parameters
    ----------
    n : int
        Checkpoints per run (steps 100, 200, …).
    n_testsets : int
        OOD test sets per run, named ``ood_1`` … ; the ID test set is ``id``.
    noise : {"ar1", "rw"}
        AR(1) noise with coefficient ``phi`` (unit variance) or a random walk scaled by 1/√n.
    phi : float
        The AR(1) coefficient, in (−1, 1).
    shape : {"linear", "saturating", "nonmonotone"}
        The function f with OOD = 0.2 + b_j f(x) + σ e_j, x the rescaled ID score.
    shared : float
        Correlation ρ ∈ [0, 1) of the OOD noises (0: the null hypothesis).
    n_runs : int
        Independent runs (``run`` = "seed=0", "seed=1", …).
    noise_sd, id_noise_sd : float
        σ of the OOD noise and of the white measurement noise of the ID score.
    seed : int
        Everything random follows from it (run i uses stream i).
    study, model : str
        Values of the ``study`` and ``model`` columns.

    Returns
    -------
    pandas.DataFrame
        Columns ``study, model, family, size, run, seed, shots, step, tokens, epoch, testset, metric, value,
        n_examples``; metric "accuracy"; one row per (run, step, test set).

    Examples
    --------
    >>> from gengen.calibration.simulate import simulate_trajectories
    >>> scores = simulate_trajectories(n=20, n_testsets=2, phi=0.5, seed=1)
    >>> scores.shape, sorted(scores.testset.unique())
    ((60, 14), ['id', 'ood_1', 'ood_2'])
    """
    noise, phi = _noise(noise, phi)
    if n_runs < 1:
        raise InvalidArgumentError(f"n_runs: must be at least 1, got {n_runs}")
    if seed < 0:
        raise InvalidArgumentError(f"seed: must be a non-negative integer, got {seed}")
    frames = []
    for run in range(n_runs):
        id_score, ood = _core.simulate_run(n, n_testsets, noise, phi, shape, shared, noise_sd, id_noise_sd, seed, run)
        values = np.column_stack([id_score, ood])
        names = ["id"] + [f"ood_{j + 1}" for j in range(n_testsets)]
        steps = 100 * np.arange(1, n + 1, dtype=np.int64)
        frame = pd.DataFrame(
            {
                "step": np.tile(steps, len(names)),
                "testset": np.repeat(names, n),
                "value": values.T.reshape(-1),
            }
        )
        frame.insert(0, "run", f"seed={run}")
        frame.insert(1, "seed", run)
        frames.append(frame)
    scores = pd.concat(frames, ignore_index=True)
    out = pd.DataFrame(
        {
            "study": study,
            "model": model,
            "family": "simulated",
            "size": f"{shape}-{noise}{'' if noise == 'rw' else f'({phi:g})'}",
            "run": scores["run"].astype(str),
            "seed": scores["seed"].astype("Int64"),
            "shots": pd.array([pd.NA] * len(scores), dtype="Int64"),
            "step": scores["step"].astype(np.int64),
            "tokens": pd.array([pd.NA] * len(scores), dtype="Int64"),
            "epoch": np.full(len(scores), np.nan),
            "testset": scores["testset"].astype(str),
            "metric": "accuracy",
            "value": scores["value"].astype(np.float64),
            "n_examples": pd.array([pd.NA] * len(scores), dtype="Int64"),
        }
    )
    return out
