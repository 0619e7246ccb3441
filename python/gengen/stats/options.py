"""The options of gengen's statistics: each choice list is its ``Literal`` type's arguments, each default written once.

A function's signature (``method: Method = DEFAULT_METHOD``), its input check (``check_choice("method", method,
METHODS)``), the analysis options, the command line and the study configuration all read from here, so the
choices a type checker accepts are the ones the checks accept and every layer has the same default.

This module imports nothing heavy: the command line builds its options from it without loading numpy.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "ADJUSTMENTS",
    "ALTERNATIVES",
    "BOOTSTRAP_SCHEMES",
    "DEFAULT_ADJUSTMENT",
    "DEFAULT_ALTERNATIVE",
    "DEFAULT_CI_LEVEL",
    "DEFAULT_FIT",
    "DEFAULT_FIT_CHOICE",
    "DEFAULT_GAM_BASIS",
    "DEFAULT_GAM_K",
    "DEFAULT_GAM_MAX_EDF",
    "DEFAULT_GAM_METHOD",
    "DEFAULT_INTERVAL_METHOD",
    "DEFAULT_METHOD",
    "DEFAULT_N_BOOT",
    "DEFAULT_N_PERM",
    "DEFAULT_N_PERM_MANTEL",
    "FITS",
    "FIT_CHOICES",
    "GAM_BASES",
    "GAM_METHODS",
    "GAM_OPTIONS",
    "INTERVAL_METHODS",
    "METHODS",
    "PERMUTATION_SCHEMES",
    "RESIDUAL_METHODS",
    "SEMIS",
    "Adjustment",
    "Alternative",
    "BootstrapScheme",
    "Fit",
    "FitChoice",
    "GamBasis",
    "GamMaxEdf",
    "GamMethod",
    "IntervalMethod",
    "Method",
    "PermutationScheme",
    "ResidualMethod",
    "Semi",
]

#: Correlation: Pearson on the values, Spearman on average ranks, Kendall's τ_b.
Method = Literal["pearson", "spearman", "kendall"]
#: The correlations that have a residual form (Kendall's partial τ has none): what resampling tests take.
ResidualMethod = Literal["pearson", "spearman"]
#: The variable a semi-partial correlation removes the covariates from (None: both, the partial correlation).
Semi = Literal["x", "y"]
#: The control: least squares on [1, covar], or an additive model of penalised regression splines.
Fit = Literal["linear", "gam"]
#: The analysis' control option: a fixed control, or ``"auto"``, decided per group by
#: :func:`gengen.stats.control_choice.choose_control` (the statistics functions themselves take :data:`Fit`).
FitChoice = Literal["linear", "gam", "auto"]
#: Smoothing parameter selection of the GAM control (mgcv's ``method = "GCV.Cp"`` or ``"REML"``).
GamMethod = Literal["gcv", "reml"]
#: Spline basis of the GAM control (mgcv's ``bs = "cr"`` or ``bs = "tp"``).
GamBasis = Literal["cr", "tp"]
#: Cap on the GAM control's effective degrees of freedom (intercept included): ``"auto"`` for
#: :func:`gengen.stats.gam.default_max_edf` of the number of checkpoints, a number, or None for no cap.
GamMaxEdf = float | Literal["auto"] | None
PermutationScheme = Literal["free", "block", "circular"]
BootstrapScheme = Literal["iid", "block", "circular"]
#: Bootstrap interval: percentile or bias-corrected and accelerated.
IntervalMethod = Literal["percentile", "bca"]
#: Multiple-testing adjustments, R's ``p.adjust`` names ("fdr" is "BH").
Adjustment = Literal["holm", "hochberg", "hommel", "bonferroni", "BH", "fdr", "BY", "none"]
#: Mantel test alternative: does the pattern carry over (greater), or differ in either direction.
Alternative = Literal["greater", "two-sided"]

METHODS: tuple[Method, ...] = get_args(Method)
RESIDUAL_METHODS: tuple[ResidualMethod, ...] = get_args(ResidualMethod)
SEMIS: tuple[Semi, ...] = get_args(Semi)
FITS: tuple[Fit, ...] = get_args(Fit)
FIT_CHOICES: tuple[FitChoice, ...] = get_args(FitChoice)
GAM_METHODS: tuple[GamMethod, ...] = get_args(GamMethod)
GAM_BASES: tuple[GamBasis, ...] = get_args(GamBasis)
PERMUTATION_SCHEMES: tuple[PermutationScheme, ...] = get_args(PermutationScheme)
BOOTSTRAP_SCHEMES: tuple[BootstrapScheme, ...] = get_args(BootstrapScheme)
INTERVAL_METHODS: tuple[IntervalMethod, ...] = get_args(IntervalMethod)
ADJUSTMENTS: tuple[Adjustment, ...] = get_args(Adjustment)
ALTERNATIVES: tuple[Alternative, ...] = get_args(Alternative)

#: The keyword options that apply with ``fit="gam"``.
GAM_OPTIONS: Final = ("k", "gam_method", "gam_basis", "max_edf")

DEFAULT_METHOD: Final = "pearson"
DEFAULT_FIT: Final = "linear"
#: What the analysis uses when not told: the control each group's curvature test picks.
DEFAULT_FIT_CHOICE: Final = "auto"
#: Basis dimension per covariate of the GAM control (mgcv's ``k``).
DEFAULT_GAM_K: Final = 10
DEFAULT_GAM_METHOD: Final = "gcv"
DEFAULT_GAM_BASIS: Final = "cr"
#: Every GAM control is capped at ``1 + q · max(1, n / 4)`` effective degrees of freedom unless told otherwise.
DEFAULT_GAM_MAX_EDF: Final = "auto"
#: Permutations of a Freedman–Lane test: p-values resolve to 1e-4.
DEFAULT_N_PERM: Final = 9999
#: Bootstrap replicates (and the analysis' sieve replicates).
DEFAULT_N_BOOT: Final = 1999
DEFAULT_CI_LEVEL: Final = 0.95
DEFAULT_INTERVAL_METHOD: Final = "percentile"
DEFAULT_ADJUSTMENT: Final = "holm"
DEFAULT_ALTERNATIVE: Final = "greater"
#: Label permutations of the Mantel test (one matrix of a few dozen pairs: 999 resolve p to 1e-3).
DEFAULT_N_PERM_MANTEL: Final = 999
