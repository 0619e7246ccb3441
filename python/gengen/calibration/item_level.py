r"""Item-level trajectories: every test set a fixed set of examples, scored example by example (issue 34).

Real scores are counts of examples answered right on the same test set at every checkpoint. What this module
simulates, per replicate (one group of ``models`` models × ``runs`` seeds, scored at the same checkpoints):

- **Fixed examples.** Each test set has N examples with difficulties :math:`d_i \sim N(0, \text{item\_sd}^2)`,
  drawn once per replicate and shared by every model, seed and checkpoint.
- **Per-example randomness that persists and that churns.** Example i of a test set is answered right at
  checkpoint t of a run with probability :math:`F(\theta_t - d_i - u_i - w_{i,t})`: :math:`u_i \sim N(0,
  \text{persist\_sd}^2)` is drawn once per run (what this seed happens to know), :math:`w_{i,t} \sim N(0,
  \text{churn\_sd}^2)` is redrawn with probability ``churn`` at each checkpoint and kept otherwise. F is the
  logistic or the standard normal (probit) distribution function.
- **Abilities on a fast-then-slow curve.** ID's ability at training step s of T is :math:`\theta(s) = A_m (1 -
  e^{-s/\tau}) + D s/T` (:math:`\tau = 0.05 T`, A = 2.5 × (0.9 … 1.1 across models), D = 0.5: 95% of the climb
  by 0.15 T, then a slow drift) plus training noise of sd 0.05 (an Ornstein–Uhlenbeck process in training steps,
  length scale ``memory`` × T). Checkpoints follow :func:`gengen.calibration.learning_curves.checkpoint_steps`
  (log-spaced,
  dense-early or even), without step 0: n checkpoints after fine-tuning started.
- **OOD given ID.** OOD set j's ability is :math:`\theta_{j,t} = c_j + b_j \hat\theta_t + \sigma \delta_{j,t}`
  with :math:`(b, c) = ((0.8, -0.3), (0.6, 0.2))`, :math:`\sigma` = ``noise_sd`` and :math:`\hat\theta_t` the ID
  ability that the *measured* ID accuracy reveals (the inverse of the ID set's expected accuracy), so that
  "independent given ID" is exactly the null of the data the analysis sees; with ``id_dependence="latent"``
  :math:`\hat\theta_t` is the latent ID ability instead, and ID's measurement error leaves a partial
  correlation in the observed accuracies under the null (:func:`item_partial_corr` computes it). The deviations
  :math:`\delta_j` are unit-variance Ornstein–Uhlenbeck processes in training steps (length scale ``memory`` ×
  T); under the alternative :math:`\delta_a = \sqrt{1-\rho}\, v_a + \sqrt\rho\, w`, :math:`\delta_b =
  \sqrt{1-\rho}\, v_b + \sqrt\rho\, w`, so the latent abilities' deviations correlate at ρ.
- **Special sets** (extra OOD test sets, independent of everything under every hypothesis): ``stuck``, a set of N
  examples whose ability stays at chance (:math:`\theta = 0`, items as above); ``class-prior``, a 104-example set
  (like WSC) with 38 examples of one class, answered all one class at each checkpoint, the class switching with
  probability 0.25 from one checkpoint to the next: its accuracy is 38/104 or 66/104.

Where item effects matter (``persist_sd`` or ``churn_sd`` above 0, or ``item_sd`` above 0) every example is drawn
(one uniform per example and checkpoint, vectorised); otherwise a count is drawn from its exact distribution,
Binomial(N, p). The partial correlation the observed accuracies carry is computed by simulation
(:func:`item_partial_corr`). Everything is seeded: the same generator gives the same replicate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import special as sp_special

from gengen.calibration.cell import SCHEDULES
from gengen.calibration.learning_curves import TOTAL_STEPS, checkpoint_steps
from gengen.errors import GengenError

__all__ = [
    "CLASS_PRIOR_EXAMPLES",
    "CLASS_PRIOR_MINORITY",
    "ID_DEPENDENCES",
    "ITEM_LINKS",
    "ITEM_SPECIALS",
    "ItemCell",
    "ItemReplicate",
    "PartialCorr",
    "ability_curve",
    "expected_accuracy",
    "item_partial_corr",
    "item_table",
    "simulate_items",
]

#: Links of ability to an example's probability of being answered right.
ITEM_LINKS = ("logistic", "probit")
#: What the OOD abilities follow: the ID ability the measured ID accuracy reveals, or the latent one.
ID_DEPENDENCES = ("measured", "latent")
#: Extra OOD test sets a cell may carry.
ITEM_SPECIALS = ("stuck", "class-prior")
#: The class-prior set: 104 examples (WSC's validation set), 38 in the minority class.
CLASS_PRIOR_EXAMPLES = 104
CLASS_PRIOR_MINORITY = 38
#: Probability that the class-prior set's answered class switches between two checkpoints.
CLASS_PRIOR_SWITCH = 0.25
#: The ID curve: gain A (scaled 0.9 … 1.1 across models), drift D over training, time constant τ / T, noise sd.
ID_GAIN = 2.5
ID_DRIFT = 0.5
ID_TAU = 0.05
ID_NOISE_SD = 0.05
#: OOD set j's ability: c_j + b_j θ̂ + σ δ_j.
OOD_SLOPES = (0.8, 0.6)
OOD_OFFSETS = (-0.3, 0.2)
#: Gauss–Hermite nodes of the logistic-normal integral (within 1e-8 of quadrature for sd ≤ 3).
_HERMITE = np.polynomial.hermite_e.hermegauss(96)


@dataclass(frozen=True)
class ItemCell:
    """One item-level design (module docstring).

    Parameters
    ----------
    label : str
        The cell's name in the study's tables.
    n : int
        Checkpoints per run (11 to 100 in the grid), all after fine-tuning started.
    n_examples : int
        Examples N of the ID set and of each OOD set (71, WNLI, to 30,000).
    schedule : {"log", "dense-early", "even"}
        Checkpoint schedule (:func:`gengen.calibration.learning_curves.checkpoint_steps`).
    link : {"logistic", "probit"}
        F, the link of ability to an example's probability of being right.
    runs : int
        Seeds per model (1, 3, 10).
    models : int
        Models per replicate (1, 2, 4, 7), each with its own ID curve's gain.
    item_sd, persist_sd, churn_sd : float
        Standard deviations of the difficulties, of the per-run item effects and of the churning item effects.
    churn : float
        Probability that an example's churning effect is redrawn at a checkpoint, in [0, 1].
    noise_sd : float
        σ, the sd of an OOD ability's deviation from its line in ID (logit or probit units).
    memory : float
        Length scale of the deviations' and the training noise's Ornstein–Uhlenbeck processes, a share of training.
    specials : tuple of str
        Extra OOD sets: ``"stuck"`` and/or ``"class-prior"``.
    rhos : tuple of float
        Correlations of the two OOD abilities' deviations to simulate, each in [0, 1) (0: the null).
    id_dependence : {"measured", "latent"}
        Whether the OOD abilities follow the ID ability that the measured ID accuracy reveals (the null holds
        exactly in the data the analysis sees) or the latent ID ability (ID's measurement error then carries a
        partial correlation into the observed accuracies even under the null; :func:`item_partial_corr`).
    """

    label: str
    n: int = 40
    n_examples: int = 1000
    schedule: str = "log"
    link: str = "logistic"
    runs: int = 1
    models: int = 1
    item_sd: float = 1.0
    persist_sd: float = 0.5
    churn_sd: float = 0.5
    churn: float = 0.2
    noise_sd: float = 0.15
    memory: float = 0.05
    specials: tuple[str, ...] = ()
    rhos: tuple[float, ...] = (0.0, 0.3, 0.5)
    id_dependence: str = "measured"

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise GengenError(f"schedule: {self.schedule!r} is not one of {', '.join(SCHEDULES)}")
        if self.link not in ITEM_LINKS:
            raise GengenError(f"link: {self.link!r} is not one of {', '.join(ITEM_LINKS)}")
        if not 6 <= self.n <= 1000:
            raise GengenError(f"n: checkpoints per run must lie in [6, 1000], got {self.n}")
        if self.n_examples < 10:
            raise GengenError(f"n_examples: must be at least 10, got {self.n_examples}")
        if self.runs < 1 or self.models < 1:
            raise GengenError(f"runs, models: must be at least 1, got {self.runs}, {self.models}")
        for name in ("item_sd", "persist_sd", "churn_sd", "noise_sd"):
            if not getattr(self, name) >= 0:
                raise GengenError(f"{name}: must be at least 0, got {getattr(self, name)}")
        if not 0.0 <= self.churn <= 1.0:
            raise GengenError(f"churn: a probability in [0, 1], got {self.churn}")
        if not self.memory > 0:
            raise GengenError(f"memory: must be above 0, got {self.memory}")
        unknown = [name for name in self.specials if name not in ITEM_SPECIALS]
        if unknown or len(set(self.specials)) != len(self.specials):
            raise GengenError(f"specials: {self.specials} must be distinct values of {', '.join(ITEM_SPECIALS)}")
        if not self.rhos or any(not 0.0 <= rho < 1.0 for rho in self.rhos):
            raise GengenError(f"rhos: each correlation must lie in [0, 1), got {self.rhos}")
        if self.id_dependence not in ID_DEPENDENCES:
            raise GengenError(f"id_dependence: {self.id_dependence!r} is not one of {', '.join(ID_DEPENDENCES)}")

    @property
    def testsets(self) -> tuple[str, ...]:
        """Test set names: ``id``, ``ood_a``, ``ood_b`` (the main pair), then ``stuck``, ``class_prior``."""
        return ("id", "ood_a", "ood_b", *(name.replace("-", "_") for name in self.specials))

    @property
    def item_effects(self) -> bool:
        """Whether examples differ (difficulties or item effects), so that counts are drawn example by example."""
        return self.item_sd > 0 or self.persist_sd > 0 or self.churn_sd > 0

    def examples(self, testset: str) -> int:
        """N of a test set."""
        return CLASS_PRIOR_EXAMPLES if testset == "class_prior" else self.n_examples


class ItemReplicate(NamedTuple):
    """One replicate: steps (n,), the test sets' names, accuracies (models, runs, n, test sets)."""

    steps: np.ndarray
    testsets: tuple[str, ...]
    accuracy: np.ndarray


def _cdf(x: np.ndarray, link: str) -> np.ndarray:
    return sp_special.expit(x) if link == "logistic" else sp_special.ndtr(x)


def expected_accuracy(theta: np.ndarray | float, sd: float, link: str = "logistic") -> np.ndarray:
    r"""E F(θ + s Z), Z standard normal: the expected accuracy at ability θ over normal item effects of sd s.

    Parameters
    ----------
    theta : array_like
        Abilities (minus an example's difficulty).
    sd : float
        Standard deviation s of the normal item effects integrated out (0: F(θ)).
    link : {"logistic", "probit"}

    Returns
    -------
    ndarray
        Same shape as ``theta``.

    Notes
    -----
    Probit: the closed form :math:`\Phi(\theta / \sqrt{1 + s^2})`. Logistic: the logistic-normal integral by
    96-node Gauss–Hermite quadrature, :math:`\sum_k w_k\, \mathrm{expit}(\theta + s z_k) / \sqrt{2\pi}`.

    Examples
    --------
    >>> round(float(expected_accuracy(0.0, 1.0)), 6), round(float(expected_accuracy(1.0, 1.0, "probit")), 3)
    (0.5, 0.76)
    """
    theta = np.asarray(theta, dtype=float)
    if link not in ITEM_LINKS:
        raise GengenError(f"link: {link!r} is not one of {', '.join(ITEM_LINKS)}")
    if sd == 0:
        return _cdf(theta, link)
    if link == "probit":
        return sp_special.ndtr(theta / np.sqrt(1.0 + sd * sd))
    nodes, weights = _HERMITE
    values = sp_special.expit(theta[..., None] + sd * nodes)
    return np.asarray(values @ weights / np.sqrt(2.0 * np.pi))


def ability_curve(steps: np.ndarray, gain: float = ID_GAIN, total: int = TOTAL_STEPS) -> np.ndarray:
    r"""ID's noise-free ability at ``steps``: :math:`A (1 - e^{-s/(0.05 T)}) + D s / T` (fast, then a drift).

    Examples
    --------
    >>> ability_curve(np.array([0, 5_000, 100_000])).round(3).tolist()
    [0.0, 1.605, 3.0]
    """
    s = np.asarray(steps, dtype=float)
    return gain * (1.0 - np.exp(-s / (ID_TAU * total))) + ID_DRIFT * s / total


def _ou(rng: np.random.Generator, steps: np.ndarray, length: float, rows: int) -> np.ndarray:
    """Stationary unit-variance Ornstein–Uhlenbeck paths at ``steps`` (rows × n): correlation exp(−Δs/length)."""
    decay = np.exp(-np.diff(steps.astype(float)) / length)
    shocks = rng.standard_normal((rows, steps.size))
    out = np.empty_like(shocks)
    out[:, 0] = shocks[:, 0]
    for t in range(1, steps.size):
        out[:, t] = decay[t - 1] * out[:, t - 1] + np.sqrt(1.0 - decay[t - 1] ** 2) * shocks[:, t]
    return out


def _churning(rng: np.random.Generator, sd: float, churn: float, size: tuple[int, int]) -> np.ndarray:
    """Item effects (examples × n) redrawn with probability ``churn`` at each checkpoint, kept otherwise."""
    fresh = rng.standard_normal(size) * sd
    redraw = rng.random(size) < churn
    redraw[:, 0] = True
    last = np.maximum.accumulate(np.where(redraw, np.arange(size[1]), 0), axis=1)
    return np.take_along_axis(fresh, last, axis=1)


def _counts(rng: np.random.Generator, cell: ItemCell, theta: np.ndarray, difficulties: np.ndarray) -> np.ndarray:
    """Correct answers (rows × n) on one test set of fixed ``difficulties`` at abilities ``theta`` (rows × n).

    Rows are runs: each draws its own persistent and churning item effects; examples are drawn one by one
    where they differ, otherwise the count is Binomial(N, F(θ)).
    """
    rows, n = theta.shape
    big_n = difficulties.size
    if not cell.item_effects:
        return rng.binomial(big_n, _cdf(theta, cell.link))
    out = np.empty((rows, n), dtype=np.int64)
    for row in range(rows):
        effect = difficulties[:, None] + cell.persist_sd * rng.standard_normal((big_n, 1))
        if cell.churn_sd > 0:
            effect = effect + _churning(rng, cell.churn_sd, cell.churn, (big_n, n))
        p = _cdf(theta[row][None, :] - effect, cell.link)
        out[row] = (rng.random((big_n, n)) < p).sum(axis=0)
    return out


class _Curve(NamedTuple):
    """The expected accuracy of one test set's fixed examples on a grid of abilities (for inversion and truth)."""

    theta: np.ndarray
    accuracy: np.ndarray


def _set_curve(cell: ItemCell, difficulties: np.ndarray, extra_sd: float, resolution: int = 200) -> _Curve:
    """Mean over the set's examples of E F(θ − d_i + s Z), s² = persist² + churn² + extra², on a θ grid.

    Difficulties are summarised by ``resolution`` quantiles where the set is larger (200: the curve moves by
    ~1e-4 at most).
    """
    theta = np.linspace(-12.0, 12.0, 241)
    sd = float(np.sqrt(cell.persist_sd**2 + cell.churn_sd**2 + extra_sd**2))
    d = difficulties
    if d.size > resolution:
        d = np.quantile(difficulties, (np.arange(resolution) + 0.5) / resolution)
    accuracy = expected_accuracy(theta[:, None] - d[None, :], sd, cell.link).mean(axis=1)
    return _Curve(theta, accuracy)


def _invert(curve: _Curve, accuracy: np.ndarray) -> np.ndarray:
    """The ability whose expected accuracy is ``accuracy`` (clipped to the grid's range)."""
    return np.interp(accuracy, curve.accuracy, curve.theta)


def _class_prior(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """Accuracy of the class-prior set (rows × n): 38/104 or 66/104, the class switching w.p. 0.25."""
    switches = rng.random((rows, n)) < CLASS_PRIOR_SWITCH
    switches[:, 0] = rng.random(rows) < 0.5
    state = np.cumsum(switches, axis=1) % 2
    minority = CLASS_PRIOR_MINORITY / CLASS_PRIOR_EXAMPLES
    return np.where(state == 1, minority, 1.0 - minority)


class _Draw(NamedTuple):
    """A replicate with what the truth needs: the ID ability the OOD sets follow, and the sets' difficulties."""

    replicate: ItemReplicate
    driver: np.ndarray
    difficulties: tuple[np.ndarray, np.ndarray, np.ndarray]


def _draw(cell: ItemCell, rho: float, rng: np.random.Generator) -> _Draw:
    if not 0.0 <= rho < 1.0:
        raise GengenError(f"rho: must lie in [0, 1), got {rho}")
    steps = checkpoint_steps(cell.n + 1, cell.schedule)[1:]
    length = cell.memory * TOTAL_STEPS
    rows = cell.models * cell.runs
    big_n = cell.n_examples
    difficulties = {name: cell.item_sd * rng.standard_normal(cell.examples(name)) for name in cell.testsets}
    gains = ID_GAIN * np.linspace(0.9, 1.1, cell.models) if cell.models > 1 else np.array([ID_GAIN])
    id_theta = np.repeat(gains, cell.runs)[:, None] * (1 - np.exp(-steps / (ID_TAU * TOTAL_STEPS)))[None, :]
    id_theta = id_theta + ID_DRIFT * steps / TOTAL_STEPS + ID_NOISE_SD * _ou(rng, steps, length, rows)
    values = np.empty((rows, cell.n, len(cell.testsets)))
    values[:, :, 0] = _counts(rng, cell, id_theta, difficulties["id"]) / big_n
    if cell.id_dependence == "measured":
        # Any fixed increasing map of the measured ID accuracy keeps the null exact; a coarse curve is cheaper.
        driver = _invert(_set_curve(cell, difficulties["id"], 0.0, resolution=50), values[:, :, 0])
    else:
        driver = id_theta
    deviations = [_ou(rng, steps, length, rows) for _ in range(2)]
    if rho:
        shared = _ou(rng, steps, length, rows)
        deviations = [np.sqrt(1.0 - rho) * v + np.sqrt(rho) * shared for v in deviations]
    for j in range(2):
        theta = OOD_OFFSETS[j] + OOD_SLOPES[j] * driver + cell.noise_sd * deviations[j]
        values[:, :, 1 + j] = _counts(rng, cell, theta, difficulties[cell.testsets[1 + j]]) / big_n
    for k, name in enumerate(cell.testsets[3:], start=3):
        if name == "stuck":
            values[:, :, k] = _counts(rng, cell, np.zeros((rows, cell.n)), difficulties[name]) / big_n
        else:
            values[:, :, k] = _class_prior(rng, rows, cell.n)
    accuracy = values.reshape(cell.models, cell.runs, cell.n, len(cell.testsets))
    return _Draw(
        ItemReplicate(steps, cell.testsets, accuracy),
        driver,
        (difficulties["id"], difficulties["ood_a"], difficulties["ood_b"]),
    )


def simulate_items(cell: ItemCell, rho: float, rng: np.random.Generator) -> ItemReplicate:
    """One replicate of ``cell`` with the two main OOD abilities' deviations correlated at ``rho``.

    Parameters
    ----------
    cell : ItemCell
    rho : float
        In [0, 1); 0 is the null (OOD abilities independent given ID).
    rng : numpy.random.Generator
        The replicate's randomness: the same state gives the same replicate.

    Returns
    -------
    ItemReplicate
        Steps (n,), test set names and accuracies (models, runs, n, test sets), each a count / N.

    Examples
    --------
    >>> import numpy as np
    >>> cell = ItemCell("tiny", n=11, n_examples=200, runs=2, specials=("stuck", "class-prior"))
    >>> replicate = simulate_items(cell, 0.0, np.random.default_rng(1))
    >>> replicate.accuracy.shape, replicate.testsets[3:]
    ((1, 2, 11, 5), ('stuck', 'class_prior'))
    """
    return _draw(cell, rho, rng).replicate


def _deviation(cell: ItemCell, found: _Draw, j: int) -> np.ndarray:
    """OOD set j's accuracy less its expected value given the ID ability it follows; with a latent dependence, less
    also the share of ID's measurement error that a regression on the measured ID carries into it."""
    curve = _set_curve(cell, found.difficulties[1 + j], cell.noise_sd)
    ability = OOD_OFFSETS[j] + OOD_SLOPES[j] * found.driver
    deviation = found.replicate.accuracy[0, :, :, 1 + j] - np.interp(ability, *curve)
    if cell.id_dependence == "measured":
        return deviation
    id_curve = _set_curve(cell, found.difficulties[0], 0.0)
    id_error = found.replicate.accuracy[0, :, :, 0] - np.interp(found.driver, *id_curve)
    # Local slope of OOD's expected accuracy against ID's, both as functions of the latent ID ability.
    ood_slope = OOD_SLOPES[j] * np.interp(ability, curve.theta, np.gradient(curve.accuracy, curve.theta))
    id_slope = np.interp(found.driver, id_curve.theta, np.gradient(id_curve.accuracy, id_curve.theta))
    return deviation - ood_slope / id_slope * id_error


class PartialCorr(NamedTuple):
    """The partial correlation the observed accuracies carry, and the Monte Carlo standard error of its value."""

    value: float
    se: float
    runs: int


def item_partial_corr(cell: ItemCell, rho: float, *, draws: int = 4000, seed: int = 0) -> PartialCorr:
    r"""The partial correlation of the two main OOD sets' observed accuracies given ID, by simulation.

    Parameters
    ----------
    cell : ItemCell
    rho : float
        Correlation of the latent abilities' deviations.
    draws : int
        Simulated runs (each with its own examples' effects and measurement noise; split in 20 batches).
    seed : int

    Returns
    -------
    PartialCorr
        ``value``, its Monte Carlo ``se`` (the spread of the 20 batches' values / √20) and the runs simulated.

    Notes
    -----
    The deviation of OOD set j at checkpoint t is its observed accuracy minus its expected accuracy given
    ID, :math:`\hat p_{j,t} - \bar F_j(c_j + b_j \hat\theta_t)`, with :math:`\bar F_j(\theta)` the mean over the
    set's examples of :math:`E\,F(\theta - d_i + s Z)`, :math:`s^2 = \sigma^2 + \text{persist}^2 +
    \text{churn}^2`. Within each run the deviations are regressed on [1, ID accuracy] (persistent item effects
    make part of the measurement error a smooth function of the ability, which the control absorbs) and

    .. math:: r = \frac{\sum \langle e_a, e_b\rangle}{\sqrt{\sum \lVert e_a\rVert^2 \sum \lVert e_b\rVert^2}},

    summed over runs: the limit of the fixed-effect pooled partial correlation of many runs. With
    ``id_dependence="measured"`` the two sets' deviations are independent given ID under the null, so the value
    is 0 up to its Monte Carlo error. With ``"latent"`` the abilities follow the latent ID ability
    :math:`\theta_t`, which the measured ID accuracy :math:`x_t = \bar F_{id}(\theta_t) + e_t` shows with error
    :math:`e_t`; a regression on :math:`x_t` then carries :math:`-\beta_{j,t} e_t` into OOD set j's residual,
    :math:`\beta_{j,t} = b_j \bar F_j'(c_j + b_j\theta_t) / \bar F_{id}'(\theta_t)` (the local slope of OOD's
    expected accuracy against ID's), and the deviation is :math:`\hat p_{j,t} - \bar F_j(c_j + b_j \theta_t) -
    \beta_{j,t} e_t`: the two sets share ID's measurement error, and the value is positive under the null.

    Examples
    --------
    >>> cell = ItemCell("base", n=20, n_examples=500)
    >>> truth = item_partial_corr(cell, 0.5, draws=400)
    >>> 0.0 < truth.value < 0.5, truth.se < 0.05
    (True, True)
    """
    if draws < 20:
        raise GengenError(f"draws: at least 20 runs (20 batches), got {draws}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 34]))
    per_batch = -(-draws // 20)
    sums = np.zeros((20, 3))
    # One draw of examples per batch (runs within a batch share them, as seeds of a model do).
    design = dataclasses.replace(cell, models=1, runs=per_batch, specials=())
    for batch in range(20):
        found = _draw(design, rho, rng)
        x = found.replicate.accuracy[0, :, :, 0]
        deviations = np.stack([_deviation(cell, found, j) for j in range(2)], axis=-1)
        xc = x - x.mean(axis=1, keepdims=True)
        dc = deviations - deviations.mean(axis=1, keepdims=True)
        slope = np.einsum("rt,rtj->rj", xc, dc) / np.einsum("rt,rt->r", xc, xc)[:, None]
        e = dc - xc[:, :, None] * slope[:, None, :]
        sums[batch] = [np.sum(e[..., 0] * e[..., 1]), np.sum(e[..., 0] ** 2), np.sum(e[..., 1] ** 2)]
    total = sums.sum(axis=0)
    value = float(total[0] / np.sqrt(total[1] * total[2]))
    batches = sums[:, 0] / np.sqrt(sums[:, 1] * sums[:, 2])
    return PartialCorr(value, float(batches.std(ddof=1) / np.sqrt(20)), per_batch * 20)


def item_table(cell: ItemCell, replicates: list[ItemReplicate], first: int = 0) -> pd.DataFrame:
    """Replicates as one score table for :func:`gengen.analyse`.

    Replicate r's models are ``rep{first + r}`` (one model) or ``rep{first + r}/m{k}``; runs ``seed=0``, …;
    ``value`` is the accuracy and ``n_examples`` the set's N, as an lm-eval import records them.

    Examples
    --------
    >>> import numpy as np
    >>> cell = ItemCell("tiny", n=11, n_examples=100)
    >>> table = item_table(cell, [simulate_items(cell, 0.0, np.random.default_rng(0))])
    >>> len(table), sorted(table.testset.unique())
    (33, ['id', 'ood_a', 'ood_b'])
    """
    frames = []
    for offset, replicate in enumerate(replicates):
        models, runs, n, m = replicate.accuracy.shape
        names = [f"rep{first + offset}" if models == 1 else f"rep{first + offset}/m{k}" for k in range(models)]
        frames.append(
            pd.DataFrame(
                {
                    "model": np.repeat(names, runs * n * m),
                    "run": np.tile(np.repeat([f"seed={s}" for s in range(runs)], n * m), models),
                    "step": np.tile(np.repeat(replicate.steps, m), models * runs),
                    "testset": np.tile(replicate.testsets, models * runs * n),
                    "value": replicate.accuracy.reshape(-1),
                    "n_examples": np.tile([cell.examples(name) for name in replicate.testsets], models * runs * n),
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    table["metric"] = "acc"
    return table
