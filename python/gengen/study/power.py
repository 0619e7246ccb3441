r"""The design that answers: predicted power of a study's design, and the cheapest design that reaches a target.

``gengen plan --power`` calls :func:`plan_power`. Its inputs (:class:`PowerInputs`) come from a pilot analysis
(:func:`pilot_inputs`: the output folder of ``gengen analyse``) or from stated assumptions about the curves
(:func:`assumed_inputs`: the study file's schedule and test-set sizes plus an assumed residual autocorrelation,
noise and accuracy). For a target partial correlation :math:`\rho` of a pair and a budget of GPU-hours it lists
candidate designs — seeds :math:`S`, evaluations per run :math:`n` (spaced densely through the rise, then
evenly), examples per test set :math:`N` and OOD test sets scored :math:`K` (so :math:`m = K(K-1)/2` pairs
tested) — with their predicted power and GPU-hours, and recommends the cheapest one with at least the target
power for both questions.

The power model
---------------
One run's evidence about a pair is its Fisher :math:`z = \operatorname{artanh} r` with information
:math:`I_1 = 1/\operatorname{se}_z^2`. For residual series that are AR(1) with lag-one autocorrelations
:math:`\phi_a, \phi_b`, Bartlett's formula gives :math:`\operatorname{Var}(z) \approx 1/(n_\text{eff} - 3 - k)` with

.. math:: n_\text{eff} = n \frac{1 - \phi_a \phi_b}{1 + \phi_a \phi_b}

(:func:`effective_n`; :math:`k = 1`: ID is regressed out). A test set's residual is the model's own deviation
from its ID trend (sd :math:`\sigma`, the signal that can co-move) plus measurement noise of variance
:math:`p(1-p)/N` on :math:`N` examples at accuracy :math:`p`; its reliability is
:math:`\text{rel} = \sigma^2 / (\sigma^2 + p(1-p)/N)` (:func:`reliability`), and the partial correlation the data
carry is attenuated to :math:`\rho_\text{obs} = \rho \sqrt{\text{rel}_a \text{rel}_b}`. Treating measurement
noise as white, the residual's autocorrelation is :math:`\phi = \text{rel}\cdot\phi_\text{model}`: more
examples raise :math:`\rho_\text{obs}` but also the autocorrelation. A pilot fixes :math:`\phi_\text{model}`
(its measured :math:`\phi` divided by its reliability) and an efficiency :math:`\kappa`, the ratio of its
measured information to the model's at its own design (the AR-sieve's information is not exactly Bartlett's);
a candidate gets :math:`I_1 = \kappa\,(n_\text{eff} - 3 - k)`, never more than :math:`n - 3 - k`.

:math:`S` seeds pooled by inverse variance (fixed effect) give :math:`I = S I_1`, referred to Student's t on
:math:`S (I_1 + 1)` degrees of freedom (Satterthwaite's, as :func:`gengen.stats.meta.fisher_meta` uses). The
chosen pair is tested at :math:`\alpha/m` (Holm's first step, the most lenient it ever is, is Bonferroni's), so
its power is

.. math:: P = \Pr(|T| > t_{1-\alpha/(2m)}), \quad T \approx \operatorname{artanh}(\rho_\text{obs})\sqrt{I} + \varepsilon

(:func:`pair_power`). **The global question** — is the share of co-moving pairs above 0 — is answered as the
verdict answers it: Storey's :math:`\hat\pi_1` of the pairs' p-values with its interval over test sets, "above
0" when the interval's lower end is (:mod:`gengen.across.global_share`). Its power has no closed form (the pairs that
share a test set are dependent, the interval resamples test sets), so :func:`global_power` simulates the design's
statistics — per run K series whose correlations carry :math:`\rho_\text{obs}` inside cliques of co-moving test
sets and have information :math:`I_1` — and puts them through the verdict's own functions
(:mod:`gengen.study.power_global`). Fewer OOD test sets than the interval needs give power 0. :func:`plan_power` runs
that simulation only for the candidates it has to compare (cheapest first), about 2–6 s each. Where a design scores
that many test sets (:data:`gengen.stats.share.MIN_TESTSETS_INTERVAL`), the chosen pair's power is taken from the
same simulation (seeds pooled with random effects, Holm's step-down among the model's pairs, the share co-moving),
as the verdict calls a pair: the closed form's :math:`\alpha/m` ignores that Holm's later steps are more lenient
when many pairs co-move, and missed the pipeline by up to 0.28 there (docs/power.md). The closed form stays the
screen of the search and the answer below that many test sets.

How well this predicts what ``gengen analyse`` finds is measured by :func:`simulated_power` on the learning-curve
simulator of ``gengen simulate`` (docs/power.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from gengen.errors import ConfigError, InputError
from gengen.study.config import StudyConfig
from gengen.study.schedule import evaluation_steps, planned_steps
from gengen.study.tables import DataSpec

__all__ = [
    "Design",
    "PowerInputs",
    "PowerPlan",
    "assumed_inputs",
    "current_design",
    "design_steps",
    "effective_n",
    "format_power_plan",
    "global_power",
    "information_per_run",
    "pair_power",
    "pilot_inputs",
    "plan_power",
    "predict",
    "reliability",
    "simulated_power",
    "simulated_powers",
]

#: Covariates regressed out of every pair (the ID score).
CONTROLS = 1
#: The largest residual autocorrelation the model extrapolates from (Bartlett's formula degenerates at 1).
MAX_PHI = 0.99
#: Share of the training run the rise takes when a pilot cannot tell (the curves simulator's 95% point).
DEFAULT_RISE = 0.15
#: How a run's information grows with its checkpoints over the same training, :math:`I \\propto n^{1/2}`: between
#: noise autocorrelated in the checkpoint index (exponent 1) and in training time (towards 0); measured on the
#: learning-curve simulator (docs/power.md: n = 20 to 100, dense-early and log spacing, N = 1,000); a pilot's
#: analysis of every other checkpoint does not measure it (it lands above 1 on every schedule: docs/power.md).
EVALUATION_EXPONENT = 0.5
#: The signal sd the closed-form reliability assumes when not told: it reproduces the attenuation of fixed test
#: sets in the learning-curve simulator (``design_partial_corr`` at N = 200, 1,000, 30,000; docs/power.md).
DEFAULT_NOISE_SD = 0.04

SEED_CHOICES = (1, 2, 3, 5, 8, 10, 15, 20)
EVALUATION_CHOICES = (20, 40, 60, 100)
EXAMPLE_CHOICES = (200, 500, 1_000, 2_000, 5_000, 10_000, 30_000)
#: The most designs one plan simulates while searching (cheapest first), so that the planner stays interactive.
MAX_SIMULATED_DESIGNS = 12
#: Numbers of OOD test sets beyond the study's own that the planner also considers (the global answer's interval
#: needs at least :data:`gengen.stats.share.MIN_TESTSETS_INTERVAL`).
ADDED_TESTSET_CHOICES = (12, 16, 20, 30, 40)


# ---------------------------------------------------------------------------------------------- the model


def effective_n(n: float, phi_a: float, phi_b: float) -> float:
    r"""Bartlett's effective number of checkpoints of a correlation between two AR(1) series of length n.

    :math:`n (1 - \phi_a\phi_b)/(1 + \phi_a\phi_b)`: the sample correlation of independent AR(1) series has
    variance :math:`(1 + \phi_a\phi_b)/((1 - \phi_a\phi_b) n)` to first order.

    Parameters
    ----------
    n : float
        Checkpoints.
    phi_a, phi_b : float
        Lag-one autocorrelations of the two series.

    Returns
    -------
    float
        The number of independent pairs of values with the same variance of r.

    Examples
    --------
    >>> effective_n(40, 0.0, 0.9), round(effective_n(40, 0.5, 0.5), 2)
    (40.0, 24.0)
    """
    product = phi_a * phi_b
    return float(n * (1.0 - product) / (1.0 + product))


def reliability(noise_sd: float, accuracy: float, n_examples: float) -> float:
    r"""Share of a test set's residual variance that is the model's own signal, not measurement noise.

    :math:`\sigma^2 / (\sigma^2 + p(1 - p)/N)`.

    Parameters
    ----------
    noise_sd : float
        Standard deviation σ of the test set's own deviations from its ID trend.
    accuracy : float
        Its accuracy p.
    n_examples : float
        Its examples N.

    Returns
    -------
    float
        In [0, 1].

    Examples
    --------
    >>> round(reliability(0.02, 0.5, 625), 3)  # measurement variance equal to the signal's
    0.5
    """
    measurement = accuracy * (1.0 - accuracy) / n_examples
    signal = noise_sd**2
    return float(signal / (signal + measurement)) if signal + measurement > 0 else 0.0


def _critical(alpha: float, df: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(1.0 - alpha / 2.0, df)) if np.isfinite(df) else float(stats.norm.ppf(1.0 - alpha / 2.0))


def pair_power(rho_observed: float, information: float, alpha: float, df: float = math.inf) -> float:
    r"""Power of the two-sided test of one pair's Fisher z with information I at level alpha.

    :math:`\Pr(|\delta + \varepsilon| > c)` with :math:`\delta = \operatorname{artanh}(\rho)\sqrt{I}`,
    :math:`\varepsilon` standard normal and :math:`c` Student's t quantile on ``df`` (normal when infinite).

    Parameters
    ----------
    rho_observed : float
        The partial correlation the data carry.
    information : float
        Information about artanh r (1/variance).
    alpha : float
        Two-sided level.
    df : float
        Degrees of freedom of the reference t (infinite: normal).

    Returns
    -------
    float
        The probability of a rejection.

    Examples
    --------
    >>> round(pair_power(0.0, 20.0, 0.05), 3)  # the level under the null
    0.05
    """
    if information <= 0:
        return alpha
    from scipy import stats

    delta = math.atanh(min(abs(rho_observed), 0.999999)) * math.sqrt(information)
    critical = _critical(alpha, df)
    return float(stats.norm.sf(critical - delta) + stats.norm.cdf(-critical - delta))


def global_power(
    rho_observed: float,
    information: float,
    *,
    seeds: int,
    testsets: int,
    share: float,
    replicates: int | None = None,
    seed: int = 0,
) -> float:
    r"""Power of the verdict's global answer (the share of co-moving pairs' interval above 0) for a design.

    :func:`gengen.study.power_global.predicted_global_power`: the design's statistics simulated and put through the
    verdict's own functions (:mod:`gengen.across.global_share`).

    Parameters
    ----------
    rho_observed : float
        The partial correlation a co-moving pair's data carry.
    information : float
        Information about artanh r of one run.
    seeds : int
        Runs pooled per model.
    testsets : int
        OOD test sets K (their K(K - 1)/2 pairs).
    share : float
        Share of the pairs that co-move.
    replicates : int, optional
        Simulated models (default :data:`gengen.study.power_global.PLANNER_REPLICATES`, fewer where seeds × pairs
        exceed :data:`gengen.study.power_global.PLANNER_ROWS` / that, never below 100).
    seed : int
        Seed of the simulation.

    Returns
    -------
    float
        The probability that the verdict's interval of the share lies above 0.

    Examples
    --------
    >>> global_power(0.5, 20.0, seeds=3, testsets=8, share=0.1)  # 8 test sets: too few for an interval
    0.0
    """
    from gengen.study.power_global import predicted_global_power

    if replicates is None:  # large designs: fewer replicates, so that one takes seconds
        replicates = _planner_replicates(seeds, testsets)
    return predicted_global_power(
        rho_observed,
        information,
        seeds=seeds,
        testsets=testsets,
        share=share,
        replicates=replicates,
        seed=seed,
        chosen_pair=False,
    ).power


@dataclass(frozen=True)
class PowerInputs:
    """What the power model knows about the curves: measured in a pilot or assumed.

    Attributes
    ----------
    n : int
        Evaluations per run of the reference design (the pilot's, or the study file's schedule).
    phi : float
        Lag-one autocorrelation of the residual series (given ID) there.
    noise_sd : float
        Standard deviation of a test set's own deviations from its ID trend (sets the reliability).
    accuracy : float
        Typical accuracy of the OOD test sets (sets the measurement variance p(1 - p)/N).
    n_examples : int
        Examples per test set of the reference design.
    pairs, testsets, runs : int
        OOD pairs tested, OOD test sets and seeds per model there.
    information : float or None
        Measured information about artanh r per run (median 1/se_z²); None: Bartlett's n_eff - 3 - k.
    measured_rho : bool
        Whether ρ is meant as the pilot's own measurement shows it (at its N): then only the change of
        reliability from the pilot's N attenuates it; else ρ is the signal's and attenuated by rel(N).
    source : str
        Where these numbers come from, for the printed plan.
    evaluation_exponent : float
        How the information per run grows with checkpoints over the same training, :math:`I \\propto n^e`
        (:func:`information_per_run`); default :data:`EVALUATION_EXPONENT` (a pilot's own thinning does not
        measure it: docs/power.md, "Why P5 misses").
    """

    n: int
    phi: float
    noise_sd: float
    accuracy: float
    n_examples: int
    pairs: int
    testsets: int
    runs: int
    information: float | None = None
    measured_rho: bool = False
    source: str = "assumed"
    evaluation_exponent: float = EVALUATION_EXPONENT

    def __post_init__(self) -> None:
        checks = {
            "n": self.n > 3 + CONTROLS,
            "phi": 0.0 <= self.phi <= MAX_PHI,
            "noise_sd": self.noise_sd > 0,
            "accuracy": 0.0 < self.accuracy < 1.0,
            "n_examples": self.n_examples >= 1,
            "testsets": self.testsets >= 2,
            "runs": self.runs >= 1,
            "evaluation_exponent": 0.0 <= self.evaluation_exponent <= 1.0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ConfigError(option=name, problem=f"out of range: {getattr(self, name)!r}")

    def reference_information(self) -> float:
        """Information per run at the reference design: measured, else Bartlett's n_eff - 3 - k."""
        if self.information is not None:
            return float(self.information)
        return max(effective_n(self.n, self.phi, self.phi) - 3 - CONTROLS, 0.0)


@dataclass(frozen=True)
class Design:
    """One candidate design: seeds, evaluations per run, examples per test set, OOD test sets scored."""

    seeds: int
    evaluations: int
    n_examples: int
    testsets: int

    @property
    def pairs(self) -> int:
        """Pairs of OOD test sets tested: K(K - 1)/2."""
        return self.testsets * (self.testsets - 1) // 2


def information_per_run(inputs: PowerInputs, evaluations: int) -> float:
    r"""Information about artanh r of one run with ``evaluations`` checkpoints over the same training.

    The reference information times :math:`(n/n_\text{ref})^e` with the inputs' evaluation exponent :math:`e`
    (default :data:`EVALUATION_EXPONENT`), never above
    :math:`n - 3 - k` (independent checkpoints).
    """
    scaled = inputs.reference_information() * (evaluations / inputs.n) ** inputs.evaluation_exponent
    return float(min(max(scaled, 0.0), evaluations - 3 - CONTROLS))


def _planner_replicates(seeds: int, testsets: int) -> int:
    """Simulated models of one planner design: PLANNER_REPLICATES, fewer where seeds × pairs exceed PLANNER_ROWS /
    that, never below MIN_PLANNER_REPLICATES."""
    from gengen.study.power_global import MIN_PLANNER_REPLICATES, PLANNER_REPLICATES, PLANNER_ROWS

    rows = seeds * testsets * (testsets - 1) // 2
    return min(PLANNER_REPLICATES, max(MIN_PLANNER_REPLICATES, PLANNER_ROWS // max(rows, 1)))


def simulated_powers(
    rho_observed: float,
    information: float,
    *,
    seeds: int,
    testsets: int,
    share: float,
    alpha: float = 0.05,
    replicates: int | None = None,
    seed: int = 0,
) -> tuple[float, float]:
    """The global power and, with enough test sets for the global interval, the chosen pair's, from one simulation.

    :func:`gengen.study.power_global.predicted_global_power` with the chosen pair measured where ``testsets`` is
    at least :data:`gengen.stats.share.MIN_TESTSETS_INTERVAL` (random effects, Holm among the model's pairs at
    ``alpha``); NaN for the pair below that (the plan keeps the closed form :func:`pair_power` there).

    Parameters
    ----------
    rho_observed, information : float
        Partial correlation a co-moving pair's data carry, and the information about artanh r of one run.
    seeds, testsets : int
        Runs pooled per model and OOD test sets.
    share : float
        Share of the pairs that co-move.
    alpha : float
        Level of the pair's Holm-adjusted test.
    replicates : int, optional
        Simulated models (default as :func:`global_power`).
    seed : int
        Seed of the simulation.

    Returns
    -------
    global : float
        The probability that the verdict's interval of the share lies above 0.
    pair : float
        The probability that the chosen pair's Holm-adjusted p is below ``alpha`` (NaN below the interval's
        test sets).

    Examples
    --------
    >>> simulated_powers(0.5, 20.0, seeds=3, testsets=8, share=0.1)  # too few test sets: no interval, no pair
    (0.0, nan)
    """
    from gengen.stats.share import MIN_TESTSETS_INTERVAL
    from gengen.study.power_global import predicted_global_power

    with_pair = testsets >= MIN_TESTSETS_INTERVAL
    result = predicted_global_power(
        rho_observed,
        information,
        seeds=seeds,
        testsets=testsets,
        share=share,
        alpha=alpha,
        replicates=replicates if replicates is not None else _planner_replicates(seeds, testsets),
        seed=seed,
        chosen_pair=with_pair,
    )
    return result.power, (result.pair_power if with_pair else float("nan"))


def predict(
    inputs: PowerInputs, design: Design, rho: float, *, share: float = 0.1, alpha: float = 0.05
) -> tuple[float, float, float]:
    """Predicted power of ``design`` for one pair and for the global question, and the observed ρ.

    Parameters
    ----------
    inputs : PowerInputs
        The pilot's measurements or the assumptions.
    design : Design
        The candidate.
    rho : float
        Partial correlation of a co-moving pair (see :attr:`PowerInputs.measured_rho`).
    share : float
        Share of pairs co-moving, for the global question.
    alpha : float
        Level of the pair's test (the global interval is the verdict's 95% one).

    Returns
    -------
    pair : float
        Power for the chosen pair: tested at alpha / pairs (closed form) below
        :data:`gengen.stats.share.MIN_TESTSETS_INTERVAL` test sets, else from :func:`simulated_powers`.
    global : float
        Power of the verdict's global answer (:func:`global_power`).
    rho_observed : float
        The partial correlation the design's data carry.
    """
    pair, rho_observed, per_run = _pair_prediction(inputs, design, rho, alpha)
    overall, simulated_pair = simulated_powers(
        rho_observed, per_run, seeds=design.seeds, testsets=design.testsets, share=share, alpha=alpha
    )
    return (simulated_pair if math.isfinite(simulated_pair) else pair), overall, rho_observed


def _pair_prediction(inputs: PowerInputs, design: Design, rho: float, alpha: float) -> tuple[float, float, float]:
    """The chosen pair's power, the observed ρ and the information per run of ``design``."""
    rel = reliability(inputs.noise_sd, inputs.accuracy, design.n_examples)
    if inputs.measured_rho:
        rel /= reliability(inputs.noise_sd, inputs.accuracy, inputs.n_examples)
    rho_observed = float(min(rho * rel, 0.999))
    per_run = information_per_run(inputs, design.evaluations)
    df = design.seeds * (per_run + 1.0)
    pair = pair_power(rho_observed, design.seeds * per_run, alpha / max(design.pairs, 1), df)
    return pair, rho_observed, per_run


# ---------------------------------------------------------------------------------------------- inputs


def _median(values: Sequence[float] | np.ndarray | pd.Series) -> float:
    array = np.asarray(values, dtype=float)
    array = array[np.isfinite(array)]
    return float(np.median(array)) if array.size else float("nan")


def _examples(scores: pd.DataFrame) -> np.ndarray:
    """Examples behind each score: ``n_examples``, else from an accuracy's standard error.

    lm-eval's stderr of an accuracy is :math:`\\sqrt{p(1-p)/(N-1)}`, so :math:`N = p(1-p)/\\text{se}^2 + 1`.
    """
    recorded = (
        scores["n_examples"].to_numpy(float, na_value=np.nan)
        if "n_examples" in scores.columns
        else np.full(len(scores), np.nan)
    )
    if "stderr" in scores.columns:
        p = scores["value"].to_numpy(float, na_value=np.nan)
        se = scores["stderr"].to_numpy(float, na_value=np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            implied = np.where((p > 0) & (p < 1) & (se > 0), p * (1 - p) / se**2 + 1, np.nan)
        recorded = np.where(np.isfinite(recorded), recorded, np.round(implied))
    return recorded


def pilot_inputs(
    pilot: object,
    *,
    pair: tuple[str, str] | None = None,
    n_examples: int | None = None,
    noise_sd: float = DEFAULT_NOISE_SD,
) -> PowerInputs:
    """The power model's inputs measured in a pilot analysis (a folder of ``gengen analyse`` or an Analysis).

    Parameters
    ----------
    pilot : str, Path or gengen.Analysis
        The output folder of ``gengen analyse``, or the analysis itself.
    pair : (str, str), optional
        Measure the pair's own information, autocorrelation and test sets (else the medians over all pairs).
    n_examples : int, optional
        Examples per test set, where the pilot's scores record neither ``n_examples`` nor the ``stderr`` of
        an accuracy (from which N = p(1 - p)/se² + 1).
    noise_sd : float
        The assumed signal sd of the reliability (a pilot cannot separate it from the measurement noise of a
        fixed test set, whose error persists across checkpoints).

    Returns
    -------
    PowerInputs
        The n, information (median 1/se_z²) and φ (median lag-one autocorrelation of the residuals) of the pilot's
        testable run-level rows, the median accuracy and n_examples of its OOD test sets; ρ is then read as
        the pilot's design would measure it (``measured_rho``).

    Raises
    ------
    InputError
        The folder is not an analysis, has no testable run-level rows, the pair is not in it, or no
        ``n_examples`` is known.
    """
    from gengen.analyse.result import Analysis

    where = str(pilot) if not isinstance(pilot, Analysis) else "pilot analysis"
    analysis = pilot if isinstance(pilot, Analysis) else Analysis.from_dir(Path(str(pilot)))
    pairs = analysis.pairs
    rows = pairs[(pairs["level"] == "run") & pairs["testable"].astype(bool)] if len(pairs) else pairs
    if rows.empty:
        raise InputError(f"{where}: no testable run-level pairs; the pilot has nothing to measure power from")
    names = sorted(set(rows["testset_a"].astype(str)) | set(rows["testset_b"].astype(str)))
    all_pairs = rows[["testset_a", "testset_b"]].drop_duplicates()
    if pair is not None:
        a, b = pair
        chosen = rows[
            ((rows["testset_a"] == a) & (rows["testset_b"] == b))
            | ((rows["testset_a"] == b) & (rows["testset_b"] == a))
        ]
        if chosen.empty:
            raise InputError(
                f"{where}: option --pair: {a},{b} is not a testable pair of the pilot "
                f"(its OOD test sets: {', '.join(names)})"
            )
        rows = chosen
    n = round(_median(rows["n"]))
    phi = _median(pd.concat([rows.get("acf1_a", pd.Series(dtype=float)), rows.get("acf1_b", pd.Series(dtype=float))]))
    phi = 0.0 if not np.isfinite(phi) else float(np.clip(phi, 0.0, MAX_PHI))
    information = None
    if "se_z" in rows.columns and np.isfinite(rows["se_z"].to_numpy(float)).any():
        information = _median(1.0 / rows["se_z"].to_numpy(float) ** 2)
    runs_per_model = rows.groupby("model")["run"].nunique() if "model" in rows.columns else pd.Series([1])
    metric = str(rows["metric"].iloc[0])
    scores = analysis.scores
    ood = scores[scores["testset"].astype(str).isin(set(pair) if pair is not None else set(names))]
    if "metric" in ood.columns:
        ood = ood[ood["metric"].astype(str) == metric]
    if ood.empty:
        raise InputError(f"{where}: scores.parquet has no OOD scores of {metric!r} to measure accuracy from")
    examples = _examples(ood)
    if n_examples is None and not np.isfinite(examples).any():
        raise InputError(
            f"{where}: the scores record neither n_examples nor stderr; give the examples per test set (--examples)"
        )
    return PowerInputs(
        n=n,
        phi=phi,
        noise_sd=noise_sd,
        accuracy=float(np.clip(_median(ood["value"]), 0.01, 0.99)),
        n_examples=int(n_examples if n_examples is not None else round(_median(examples))),
        pairs=len(all_pairs),
        testsets=len(names),
        runs=round(_median(runs_per_model)),
        information=information,
        measured_rho=True,
        source=f"pilot {where}" + (f", pair {pair[0]},{pair[1]}" if pair is not None else ""),
    )


def assumed_inputs(
    config: StudyConfig,
    *,
    phi: float = 0.5,
    noise_sd: float = DEFAULT_NOISE_SD,
    accuracy: float = 0.7,
) -> PowerInputs:
    """The power model's inputs from a study file and stated assumptions (no pilot).

    n is the study's evaluations per run (its first model and regime), N the median size of its OOD test sets
    (``evaluation.max_examples`` applied), K its OOD test sets, S its seeds; φ, σ and the accuracy are assumed
    (φ = 0.5 gives Bartlett's information of the AR-sieve measured at n = 20 in the learning-curve simulator).

    Parameters
    ----------
    config : StudyConfig
        The study.
    phi : float
        Assumed lag-one autocorrelation of the residuals.
    noise_sd : float
        Assumed sd of a test set's own deviations from its ID trend.
    accuracy : float
        Assumed typical OOD accuracy.

    Returns
    -------
    PowerInputs
        With ``measured_rho`` False: ρ is the signal's.
    """
    current = current_design(config)
    return PowerInputs(
        n=current.evaluations,
        phi=phi,
        noise_sd=noise_sd,
        accuracy=accuracy,
        n_examples=current.n_examples,
        pairs=current.pairs,
        testsets=current.testsets,
        runs=current.seeds,
        source=f"assumed curves (phi = {phi:g}, noise sd = {noise_sd:g}, accuracy = {accuracy:g})",
    )


# ---------------------------------------------------------------------------------------------- designs


def _ood(config: StudyConfig) -> list[DataSpec]:
    return [t for t in config.testsets if t.name != config.id_testset]


def _total_steps(config: StudyConfig) -> int:
    from gengen.study.plan import _data_size

    model = config.models[0]
    training = config.training_for(model)
    shots = config.data.shots[0] if config.data.shots else None
    n_train = shots if shots is not None else _data_size(config.task.train, None)
    return planned_steps(training, n_train)


def current_design(config: StudyConfig) -> Design:
    """The design a study file describes: its seeds, evaluations, median OOD test-set size and OOD test sets."""
    from gengen.study.plan import _data_size

    ood = _ood(config)
    if len(ood) < 2:
        raise ConfigError(f"testsets: {len(ood)} OOD test set(s) besides the ID one; a pair needs two")
    evaluations = len(evaluation_steps(config.evaluation, _total_steps(config)))
    sizes = [_data_size(t, config.evaluation.max_examples) for t in ood]
    return Design(_replicates(config), evaluations, int(np.median(sizes)), len(ood))


def _replicates(config: StudyConfig) -> int:
    """Replicates of one condition: training seeds (times data seeds in a few-shot study)."""
    data_seeds = len(config.data.data_seeds) if config.data.shots else 1
    return len(config.training.seeds) * data_seeds


def design_steps(total: int, evaluations: int, rise: float = DEFAULT_RISE) -> list[int]:
    """Evaluation steps dense through the rise, then even.

    Step 0, half of the rest evenly up to ``rise`` × total, half evenly over the remainder (duplicates from
    rounding dropped, so short runs may get fewer).

    Parameters
    ----------
    total : int
        The run's last step.
    evaluations : int
        Evaluations wanted, step 0 and the last step included.
    rise : float
        Share of training the rise takes.

    Returns
    -------
    list of int
        Increasing steps from 0 to ``total``.

    Examples
    --------
    >>> design_steps(1000, 9)
    [0, 38, 75, 112, 150, 362, 575, 788, 1000]
    """
    rest = max(evaluations - 1, 1)
    early = rest // 2
    cut = rise * total
    points = np.concatenate(
        [np.linspace(cut / max(early, 1), cut, early), np.linspace(cut, total, rest - early + 1)[1:]]
    )
    return sorted({0, *(round(float(p)) for p in points if p >= 1), total})


def _study_with(config: StudyConfig, design: Design, keep: Sequence[str], rise: float) -> StudyConfig:
    """The study with the design's evaluation steps and examples and its OOD test sets."""
    total = _total_steps(config)
    evaluation = replace(
        config.evaluation,
        steps=tuple(s for s in design_steps(total, design.evaluations, rise) if 0 < s < total),
        every=None,
        log_points=None,
        max_examples=design.n_examples,
    )
    testsets = tuple(t for t in config.testsets if t.name == config.id_testset or t.name in keep)
    return replace(config, evaluation=evaluation, testsets=testsets)


@dataclass(frozen=True)
class PowerPlan:
    """Result of :func:`plan_power`.

    Attributes
    ----------
    table : DataFrame
        Candidate designs: ``label, seeds, evaluations, n_examples, testsets, pairs, rho_observed, power_pair,
        power_global, gpu_hours, meets`` (``meets``: both powers reach the target within the budget).
    recommended : int or None
        Row of ``table`` recommended (None: no candidate reaches the target within the budget).
    inputs : PowerInputs
    rho, target, share, alpha : float
    budget : float or None
        GPU-hours allowed.
    pair : (str, str) or None
    kept_testsets : list of str
        The OOD test sets the recommended design scores (the chosen pair's first).
    steps : list of int
        The recommended design's evaluation steps.
    few_shot : bool
        Whether replicates are training seeds times data seeds (a few-shot study).
    added_testsets : int
        OOD test sets the recommended design scores beyond those the study names.
    searched : str
        How many designs' global power was simulated, and whether the search stopped at its limit.
    """

    table: pd.DataFrame
    recommended: int | None
    inputs: PowerInputs
    rho: float
    target: float
    share: float
    alpha: float
    budget: float | None
    pair: tuple[str, str] | None
    kept_testsets: list[str]
    steps: list[int]
    few_shot: bool = False
    added_testsets: int = 0
    searched: str = ""


def plan_power(
    config: StudyConfig,
    inputs: PowerInputs,
    *,
    rho: float,
    budget: float | None = None,
    target: float = 0.8,
    share: float = 0.1,
    alpha: float = 0.05,
    pair: tuple[str, str] | None = None,
    rise: float = DEFAULT_RISE,
    gpus: int = 1,
    gpu_memory_gib: float = 80.0,
    tflops: float = 989.0,
    mfu: float = 0.35,
    tokens_per_example: int = 64,
    models: Sequence[str] | None = None,
) -> PowerPlan:
    """Candidate designs of ``config`` with predicted power and GPU-hours, and the cheapest that reaches ``target``.

    Parameters
    ----------
    config : StudyConfig
        The study: its models and cost model (:func:`gengen.study.plan.plan_study`) and its current design.
    inputs : PowerInputs
        :func:`pilot_inputs` or :func:`assumed_inputs`.
    rho : float
        The partial correlation of a co-moving pair (as the pilot measures it, with a pilot).
    budget : float, optional
        GPU-hours the whole study may take (training and scoring of every model).
    target : float
        Power wanted for the chosen pair and for the global question.
    share : float
        Share of the pairs assumed to co-move, for the global question's proxy.
    alpha : float
        Level of both tests (the pair's is divided by the pairs tested).
    pair : (str, str), optional
        The chosen pair (kept among the test sets scored); default a typical pair.
    rise : float
        Share of training the rise takes (evaluation steps are dense up to it, then even).
    gpus : int
        GPUs one run may use (cost model of :func:`gengen.study.plan.plan_study`).
    gpu_memory_gib : float
        Memory of one GPU.
    tflops : float
        Peak TFLOP/s of one GPU.
    mfu : float
        Assumed model-FLOPs utilisation.
    tokens_per_example : int
        Mean prompt length in tokens.
    models : sequence of str, optional
        Only these models' runs count towards the GPU-hours.

    Returns
    -------
    PowerPlan
        The candidates, the recommended row and the steps and test sets it scores.
    """
    from gengen.study.plan import _data_size, plan_study

    checks = {
        "rho": 0 < rho < 1,
        "target": 0 < target < 1,
        "share": 0 < share <= 1,
        "alpha": 0 < alpha < 1,
        "budget": budget is None or budget > 0,
        "rise": 0 < rise < 1,
    }
    for name, ok in checks.items():
        if not ok:
            raise ConfigError(option=name, problem=f"out of range: {locals()[name]!r}")
    ood = [t.name for t in _ood(config)]
    if pair is not None:
        missing = [name for name in pair if name not in ood]
        if missing or pair[0] == pair[1]:
            raise ConfigError(
                option="pair", problem=f"{','.join(pair)}: not two OOD test sets of the study ({', '.join(ood)})"
            )
        ood = [*pair, *(name for name in ood if name not in pair)]
    current = current_design(config)
    largest = max(_data_size(t, None) for t in _ood(config))
    examples = sorted({n for n in EXAMPLE_CHOICES if n <= largest} | {current.n_examples})
    total = _total_steps(config)
    # A short run cannot hold more distinct steps than it has: each choice is what design_steps gives.
    asked = {len(design_steps(total, n, rise)): n for n in sorted(EVALUATION_CHOICES, reverse=True)}
    asked.setdefault(current.evaluations, current.evaluations)
    evaluations = sorted(asked)
    testsets = sorted({*range(2, len(ood) + 1)})
    cost: dict[tuple[int, int, int], float] = {}
    for n in evaluations:
        for size in examples:
            for k in testsets:
                study = _study_with(config, Design(1, n, size, k), ood[:k], rise)
                rows = plan_study(
                    study,
                    gpus=gpus,
                    gpu_memory_gib=gpu_memory_gib,
                    tflops=tflops,
                    mfu=mfu,
                    tokens_per_example=tokens_per_example,
                    models=models,
                )
                cost[(n, size, k)] = sum(r.gpu_hours for r in rows) / current.seeds  # per replicate
            # More OOD test sets than the study names (the global answer needs enough of them): each one more
            # costs what the last one the study names cost to score at this design.
            last = cost[(n, size, len(ood))] - cost.get((n, size, len(ood) - 1), cost[(n, size, len(ood))])
            for k in ADDED_TESTSET_CHOICES:
                if k > len(ood):
                    cost[(n, size, k)] = cost[(n, size, len(ood))] + (k - len(ood)) * max(last, 0.0)
    records = []
    for seeds in sorted({*SEED_CHOICES, current.seeds}):
        for (n, size, k), hours in cost.items():
            design = Design(seeds, n, size, k)
            power_pair, observed, per_run = _pair_prediction(inputs, design, rho, alpha)
            records.append(
                {
                    "seeds": seeds,
                    "evaluations": n,
                    "n_examples": size,
                    "testsets": k,
                    "pairs": design.pairs,
                    "rho_observed": observed,
                    "information": per_run,
                    "power_pair": power_pair,
                    "power_global": float("nan"),  # simulated only where a choice needs it (_GlobalPowers)
                    "gpu_hours": seeds * hours,
                }
            )
    grid = pd.DataFrame(records)
    within = grid["gpu_hours"] <= budget if budget is not None else pd.Series(True, index=grid.index)
    grid["within_budget"] = within
    powers = _GlobalPowers(grid, share, alpha)
    chosen = _choose(grid, current, target, powers)
    grid["meets"] = within & (grid["power_pair"] >= target) & (grid["power_global"] >= target)
    table = pd.DataFrame([{"label": label, **grid.loc[index].to_dict()} for label, index in chosen])
    best = table.index[table["label"] == "recommended"]
    recommended = int(best[0]) if len(best) else None
    steps: list[int] = []
    kept: list[str] = []
    added = 0
    if recommended is not None:
        row = table.loc[recommended]
        steps = design_steps(total, asked[int(row["evaluations"])], rise)
        kept = ood[: int(row["testsets"])]
        added = int(row["testsets"]) - len(ood)
    few_shot = bool(config.data.shots)
    return PowerPlan(
        table,
        recommended,
        inputs,
        rho,
        target,
        share,
        alpha,
        budget,
        pair,
        kept,
        steps,
        few_shot,
        max(added, 0),
        f"global power simulated for {powers.simulated} designs"
        + (
            f" (the cheapest-first searches stop after {MAX_SIMULATED_DESIGNS} simulations; designs they did not "
            "reach may meet the target)"
            if powers.exhausted
            else ""
        ),
    )


class _GlobalPowers:
    r"""The global power of the grid's rows, simulated when first asked for and written into ``grid``.

    At the same seeds and test sets, global power rises with a co-moving pair's signal
    :math:`\delta = \operatorname{artanh}(\rho_\text{obs})\sqrt{I_1}`, so a row whose δ is at most that of a
    row that already fell short of the target is not simulated (it falls short too).
    """

    def __init__(self, grid: pd.DataFrame, share: float, alpha: float = 0.05) -> None:
        self.grid = grid
        self.share = share
        self.alpha = alpha
        self.short: dict[tuple[int, int], float] = {}
        self.simulated = 0
        self.exhausted = False

    def __call__(self, index: int, target: float | None = None) -> float:
        row = self.grid.loc[index]
        if np.isfinite(row["power_global"]):
            return float(row["power_global"])
        key = (int(row["seeds"]), int(row["testsets"]))
        information, observed = float(row["information"]), float(row["rho_observed"])
        delta = math.atanh(observed) * math.sqrt(max(information, 0.0))
        if target is not None and delta <= self.short.get(key, -math.inf):
            return -math.inf  # weaker than a row below the target: below it too, not simulated
        if target is not None and self.simulated >= MAX_SIMULATED_DESIGNS:
            self.exhausted = True
            return -math.inf  # the search's time is spent: the plan says how many it simulated
        power, pair = simulated_powers(
            observed, information, seeds=key[0], testsets=key[1], share=self.share, alpha=self.alpha
        )
        self.simulated += 1
        self.grid.loc[index, "power_global"] = power
        if math.isfinite(pair):  # enough test sets: the chosen pair from the same simulation (Holm, random effects)
            self.grid.loc[index, "power_pair"] = pair
        if target is not None and power < target:
            self.short[key] = max(delta, self.short.get(key, -math.inf))
        return power

    def first_meeting(self, rows: pd.DataFrame, target: float) -> int | None:
        """The first of ``rows`` (in their order) whose pair and global power reach ``target``: the closed-form
        pair power screens, the simulation (global, and the pair's where it measures it) decides."""
        for index in rows.index[rows["power_pair"] >= target]:
            if self(int(index), target) >= target and self.grid.loc[index, "power_pair"] >= target:
                return int(index)
        return None


def _choose(grid: pd.DataFrame, current: Design, target: float, powers: _GlobalPowers) -> list[tuple[str, int]]:
    """The rows to print: the current design, the cheapest change of one lever that meets the target, the
    recommended design (cheapest that meets it; ties: more power), else the most powerful within the budget."""

    def at(**fixed: int) -> pd.Series:
        mask = pd.Series(True, index=grid.index)
        for name, value in fixed.items():
            mask &= grid[name] == value
        return mask

    def cheapest_first(rows: pd.DataFrame) -> pd.DataFrame:
        return rows.sort_values(["gpu_hours", "power_pair"], ascending=[True, False])

    levers = {
        "seeds": dict(evaluations=current.evaluations, n_examples=current.n_examples, testsets=current.testsets),
        "evaluations": dict(seeds=current.seeds, n_examples=current.n_examples, testsets=current.testsets),
        "examples": dict(seeds=current.seeds, evaluations=current.evaluations, testsets=current.testsets),
        "test sets": dict(seeds=current.seeds, evaluations=current.evaluations, n_examples=current.n_examples),
    }
    now = at(
        seeds=current.seeds, evaluations=current.evaluations, n_examples=current.n_examples, testsets=current.testsets
    )
    current_index = int(grid.index[now][0])
    powers(current_index)
    chosen = [("current", current_index)]
    current_meets = bool(
        grid.loc[current_index, "within_budget"]
        and grid.loc[current_index, "power_pair"] >= target
        and grid.loc[current_index, "power_global"] >= target
    )
    if not current_meets:  # the current design meets it already: no lever rows
        for lever, fixed in levers.items():
            found = powers.first_meeting(cheapest_first(grid[at(**fixed) & grid["within_budget"]]), target)
            if found is not None:
                chosen.append((f"only {lever}", found))
    recommended = powers.first_meeting(cheapest_first(grid[grid["within_budget"]]), target)
    if recommended is not None:
        chosen.append(("recommended", recommended))
        return chosen
    # Nothing meets the target: per number of test sets, the affordable row with the most information about a
    # pair, and of those the one whose weaker power is the highest (how far the budget gets).
    affordable = grid[grid["within_budget"]] if grid["within_budget"].any() else grid
    strength = affordable["seeds"] * affordable["information"] * np.arctanh(affordable["rho_observed"]) ** 2
    best = strength.groupby(affordable["testsets"]).idxmax()
    for index in best:
        powers(int(index))
    # The cheapest-first search may have stopped at its simulation limit before it reached a design that meets
    # the target, while a row simulated since (these most powerful ones) meets it: never say "no candidate
    # reaches" of a design the plan has just simulated above the target; the cheapest such row is recommended.
    simulated = grid[grid["within_budget"] & np.isfinite(grid["power_global"].to_numpy(dtype=float))]
    meeting = simulated[(simulated["power_pair"] >= target) & (simulated["power_global"] >= target)]
    if len(meeting):
        chosen.append(("recommended", int(cheapest_first(meeting).index[0])))
        return chosen
    weakest = np.minimum(grid.loc[best, "power_pair"], grid.loc[best, "power_global"])
    chosen.append(("most power", int(weakest.idxmax())))
    return chosen


def format_power_plan(plan: PowerPlan, study: str | Path) -> str:
    """The plan as a small table, the recommendation and the next commands.

    Parameters
    ----------
    plan : PowerPlan
        The result of :func:`plan_power`.
    study : str or Path
        The study file, for the commands printed.

    Returns
    -------
    str
        Lines for the terminal.
    """
    from gengen.stats.share import MIN_TESTSETS_INTERVAL
    from gengen.study.power_global import PLANNER_REPLICATES

    inputs = plan.inputs
    what = f"pair {plan.pair[0]},{plan.pair[1]}" if plan.pair is not None else "a typical pair"
    meaning = "as the pilot measures it" if inputs.measured_rho else "of the signal, before measurement noise"
    budget = f"{plan.budget:,.0f} GPU-hours" if plan.budget is not None else "no GPU budget"
    lines = [
        f"power at rho = {plan.rho:g} ({meaning}), target {plan.target:.0%}, alpha = {plan.alpha:g}, {budget}",
        f"from {inputs.source}: n = {inputs.n}, {inputs.runs} seed(s), {inputs.testsets} OOD test sets, "
        f"N = {inputs.n_examples:,}, residual lag-1 autocorrelation {inputs.phi:.2f}, information per run "
        f"{inputs.reference_information():.1f}, growing as n^{inputs.evaluation_exponent:g} at other numbers of "
        "evaluations"
        + (
            " (assumed: 0.5 to 1.1 by schedule on simulated curves, docs/power.md; a pilot measures the information "
            "at its own n only)"
            if inputs.evaluation_exponent == EVALUATION_EXPONENT
            else ""
        ),
        f"pair: {what}, tested at alpha / pairs (from {MIN_TESTSETS_INTERVAL} OOD test sets: Holm's step-down "
        f"among the pairs, in the global simulation); global: the verdict's interval of the share of co-moving "
        f"pairs above 0, {plan.share:.0%} of pairs co-moving in groups (simulated, {PLANNER_REPLICATES} models a "
        f"design; it needs at least {MIN_TESTSETS_INTERVAL} OOD test sets; docs/power.md)",
        f"{'design':<17} {'seeds':>5} {'evals':>5} {'examples':>8} {'sets':>4} {'pairs':>5} {'r seen':>6} "
        f"{'P(pair)':>7} {'P(global)':>9} {'GPU-h':>10}",
    ]
    for row in plan.table.itertuples():
        lines.append(
            f"{row.label:<17} {row.seeds:>5} {row.evaluations:>5} {row.n_examples:>8,} {row.testsets:>4} "
            f"{row.pairs:>5} {row.rho_observed:>6.2f} {row.power_pair:>7.2f} {row.power_global:>9.2f} "
            f"{row.gpu_hours:>10,.1f}"
        )
    lines.append(plan.searched)
    named = int(plan.table.loc[plan.table["label"] == "current", "testsets"].iloc[0])
    if named < MIN_TESTSETS_INTERVAL:
        lines.append(
            f"the study names {named} OOD test sets: the global answer's interval needs {MIN_TESTSETS_INTERVAL}, so "
            "it cannot answer the global question; designs with more add test sets (each costing what the study's "
            "last one costs to score)"
        )
    if plan.recommended is None:
        lines.append(
            f"no candidate reaches {plan.target:.0%} for both questions within the budget; the last row is the "
            "most a design within it gets (raise the budget, or test fewer pairs)"
        )
        return "\n".join(lines)
    row = plan.table.loc[plan.recommended]
    seeds = ", ".join(str(s) for s in range(1, int(row["seeds"]) + 1))
    replicates = (
        f"  [training] seeds = [{seeds}]"
        if not plan.few_shot
        else f"  replicates: {int(row['seeds'])} (training seeds x data.data_seeds)"
    )
    lines += [
        f"recommended: {int(row['seeds'])} replicates, {len(plan.steps)} evaluations dense through the rise then even, "
        f"{int(row['n_examples']):,} examples per test set, {int(row['testsets'])} OOD test sets "
        f"({', '.join(plan.kept_testsets)}"
        + (
            f", and {plan.added_testsets} more OOD test sets, none a split or subset of another"
            if plan.added_testsets
            else ""
        )
        + f"): {int(row['pairs'])} pairs",
        "in the study file:",
        replicates,
        f"  [evaluation] steps = [{', '.join(str(s) for s in plan.steps if s)}]  # replaces every / log_points",
        f"  [evaluation] max_examples = {int(row['n_examples'])}",
        f"next: gengen plan {study} --gpus 1   then   gengen run {study}",
    ]
    return "\n".join(lines)


def simulated_power(
    design: Design,
    rho: float,
    *,
    replicates: int,
    phi: float = 0.9,
    alpha: float = 0.05,
    pairs: int = 1,
    n_boot: int = 299,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Power of ``gengen.analyse``'s default for one pair of ``design``, measured on ``gengen simulate``'s curves.

    Each replicate is one model of ``design.seeds`` runs of the learning-curve simulator
    (:class:`gengen.calibration.simulate.Cell` of the ``"curves"`` process: dense-early schedule of
    ``design.evaluations``
    checkpoints, ``design.n_examples`` examples per test set, AR(1) noise φ correlated at ``rho`` between the two
    OOD test sets), analysed by the public :func:`gengen.analyse` with its defaults; a replicate counts as found
    when the pair's p-value (the seeds' fixed-effect pooled ``p_fixed``, or the run's ``p_deciding`` with one
    seed) is below ``alpha / pairs``.

    Parameters
    ----------
    design : Design
        Seeds, evaluations and examples simulated (its test sets are always two).
    rho : float
        Correlation of the two OOD noises in the simulator (its partial correlation is
        :func:`gengen.calibration.learning_curves.design_partial_corr`).
    replicates : int
        Simulated models (groups of ``design.seeds`` runs).
    phi : float
        AR(1) coefficient of the simulated noise.
    alpha : float
        Level.
    pairs : int
        Pairs the level is divided by.
    n_boot : int
        Sieve resamples per run.
    seed : int
        Seed of the simulation and of the analysis.

    Returns
    -------
    power : float
        The share of replicates found.
    mc_se : float
        Its Monte Carlo standard error.
    power_random : float
        The share found by the random-effects ``p_random`` (what the verdict pools seeds with; equal to
        ``power`` with one seed).
    """
    import gengen
    from gengen.calibration.learning_curves import CurveCell, curve_table
    from gengen.calibration.simulate import simulate

    cell = CurveCell(
        "power", n=design.evaluations, phi=phi, schedule="dense-early", n_examples=design.n_examples, runs=design.seeds
    )
    rng = np.random.default_rng(np.random.SeedSequence([seed, 33]))
    level = alpha / max(pairs, 1)
    found = found_random = 0
    batch = max(1, 120 // design.seeds)
    for first in range(0, replicates, batch):
        group = [simulate(cell, rho, rng) for _ in range(min(batch, replicates - first))]
        analysis = gengen.analyse(curve_table(cell, group, first), id_testset="id", n_boot=n_boot, seed=seed + first)
        if design.seeds > 1:
            found += int((analysis.pooled["p_fixed"].to_numpy(float) < level).sum())
            found_random += int((analysis.pooled["p_random"].to_numpy(float) < level).sum())
        else:
            runs = analysis.pairs[analysis.pairs["level"] == "run"]
            hits = int((runs["p_deciding"].to_numpy(float) < level).sum())
            found, found_random = found + hits, found_random + hits
    power = found / replicates
    return power, math.sqrt(max(power * (1 - power), 1e-12) / replicates), found_random / replicates
