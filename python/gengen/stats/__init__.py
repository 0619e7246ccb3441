"""Every statistic gengen computes: the typed, validated Python face of its Rust core :mod:`gengen._core`.

Every function takes numpy arrays (pandas Series and DataFrames are accepted; DataFrame column names become
labels), validates them, and calls the core, which does the numerics in Rust, in parallel, with the GIL
released. Bad input raises :class:`gengen.errors.InvalidArgumentError` or
:class:`gengen.errors.DegenerateDataError` (both ``ValueError`` subclasses) naming the argument at fault. The
numbers follow R's ppcor (Kim, 2015) for estimates and t-tests, R's ``p.adjust`` for adjustments, the
Freedman–Lane scheme for permutation tests, and percentile/BCa bootstrap intervals.

Checkpoint trajectories are autocorrelated, and ppcor's t-test then overstates significance (44% false
positives at a nominal 5% with lag-1 autocorrelation 0.9 and 50 checkpoints). The AR-sieve test
(:func:`sieve_partial_corr_matrix`, the analysis' default), the lagged regression
(:func:`lagged_partial_corr_matrix`) and prewhitening (:func:`prewhitened_partial_corr_matrix`) stay calibrated
(docs/calibration.md).

The modules, from the bottom up (none imports the analysis, report, comparison, training or command-line
layers; ``tests/test_stats_layering.py`` checks it):

- :mod:`~gengen.stats.options`: the ``Literal`` option types, their choice lists and their defaults;
- :mod:`~gengen.stats.validation`: the input checks every function shares;
- :mod:`~gengen.stats.controls`: the control as a typed value, :class:`Linear` or :class:`Gam`, that every
  ``fit=`` takes (as do the names ``"linear"`` and ``"gam"``);
- :mod:`~gengen.stats.gam`: the GAM control (penalised regression splines);
- :mod:`~gengen.stats.control_choice`: which control a run needs (linear or GAM), by a curvature test;
- :mod:`~gengen.stats.correlation`: partial and semi-partial correlations (ppcor's), their matrices and
  batches, residuals;
- :mod:`~gengen.stats.adjust`: R's ``p.adjust``;
- :mod:`~gengen.stats.resampling`: Freedman–Lane permutation tests and bootstrap intervals;
- :mod:`~gengen.stats.lagged`: the lagged-regression and prewhitened tests for autocorrelated trajectories;
- :mod:`~gengen.stats.autocorr`: lag-1 autocorrelation of residuals and the warning it triggers;
- :mod:`~gengen.stats.sieve`: the AR-sieve bootstrap of the partial correlation;
- :mod:`~gengen.stats.influence`: leave-one-checkpoint-out estimates and the verdict that survives them;
- :mod:`~gengen.stats.meta`: Fisher-z fixed- and random-effects meta-analysis;
- :mod:`~gengen.stats.matrices`: the Mantel test of two correlation matrices;
- :mod:`~gengen.stats.global_share`: the share of non-null pairs (Storey's pi1) with a test-set jackknife
  interval, and the smallest |r| a pair's test detects.

Every public name is importable from here (``from gengen.stats import partial_corr``); the modules load on
first use (PEP 562), so that :mod:`gengen.stats.options` stays as light as the command line needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.stats._lazy import lazy_names

if TYPE_CHECKING:
    from gengen.stats.adjust import (
        p_adjust,
    )
    from gengen.stats.autocorr import (
        AUTOCORR_THRESHOLD,
        autocorrelation_warning,
        lag1_autocorrelation,
    )
    from gengen.stats.control_choice import (
        ControlChoice,
        CurvatureTest,
        choose_control,
        curvature_test,
    )
    from gengen.stats.controls import (
        Gam,
        Linear,
    )
    from gengen.stats.correlation import (
        CorrMatrices,
        PartialCorr,
        PartialCorrMatrix,
        consistent_interval,
        partial_corr,
        partial_corr_matrix,
        partial_corr_matrix_batch,
        pcor,
        residualise,
        spcor,
    )
    from gengen.stats.gam import (
        GamFit,
        default_max_edf,
        gam_fit,
    )
    from gengen.stats.global_share import (
        GlobalShare,
        detectable_r,
        global_share,
        storey_share,
    )
    from gengen.stats.influence import (
        CARRYING_SHARE,
        LeaveOneOut,
        leave_one_out_partial_corr,
        leave_one_out_test,
    )
    from gengen.stats.lagged import (
        LaggedPartialCorrMatrix,
        PrewhitenedPartialCorrMatrix,
        lagged_partial_corr_matrix,
        prewhitened_partial_corr_matrix,
    )
    from gengen.stats.matrices import (
        MantelTest,
        mantel,
        upper_triangle,
    )
    from gengen.stats.meta import (
        MetaResult,
        fisher_meta,
    )
    from gengen.stats.options import (
        Adjustment,
        Alternative,
        BootstrapScheme,
        Fit,
        GamBasis,
        GamMethod,
        IntervalMethod,
        Method,
        PermutationScheme,
        ResidualMethod,
        Semi,
    )
    from gengen.stats.resampling import (
        BootstrapCI,
        PermutationTest,
        bootstrap_ci,
        bootstrap_ci_batch,
        bootstrap_indices,
        default_block_length,
        permutation_indices,
        permutation_test,
        permutation_test_batch,
    )
    from gengen.stats.sieve import (
        SIEVE_METHOD,
        SievePartialCorrMatrix,
        curvature_notes,
        curvature_shift,
        default_max_order,
        fit_autoregression,
        gam_control_z,
        ljung_box,
        sieve_column_notes,
        sieve_partial_corr_matrix,
    )

# Public name -> the module of this package that defines it.
_MODULE_OF: dict[str, str] = {
    "CorrMatrices": "correlation",
    "PartialCorr": "correlation",
    "PartialCorrMatrix": "correlation",
    "consistent_interval": "correlation",
    "partial_corr": "correlation",
    "partial_corr_matrix": "correlation",
    "partial_corr_matrix_batch": "correlation",
    "pcor": "correlation",
    "residualise": "correlation",
    "spcor": "correlation",
    "BootstrapCI": "resampling",
    "PermutationTest": "resampling",
    "bootstrap_ci": "resampling",
    "bootstrap_ci_batch": "resampling",
    "bootstrap_indices": "resampling",
    "default_block_length": "resampling",
    "permutation_indices": "resampling",
    "permutation_test": "resampling",
    "permutation_test_batch": "resampling",
    "Gam": "controls",
    "Linear": "controls",
    "GamFit": "gam",
    "default_max_edf": "gam",
    "gam_fit": "gam",
    "ControlChoice": "control_choice",
    "CurvatureTest": "control_choice",
    "choose_control": "control_choice",
    "curvature_test": "control_choice",
    "p_adjust": "adjust",
    "GlobalShare": "global_share",
    "detectable_r": "global_share",
    "global_share": "global_share",
    "storey_share": "global_share",
    "LaggedPartialCorrMatrix": "lagged",
    "PrewhitenedPartialCorrMatrix": "lagged",
    "lagged_partial_corr_matrix": "lagged",
    "prewhitened_partial_corr_matrix": "lagged",
    "AUTOCORR_THRESHOLD": "autocorr",
    "autocorrelation_warning": "autocorr",
    "lag1_autocorrelation": "autocorr",
    "SIEVE_METHOD": "sieve",
    "SievePartialCorrMatrix": "sieve",
    "curvature_notes": "sieve",
    "curvature_shift": "sieve",
    "gam_control_z": "sieve",
    "default_max_order": "sieve",
    "fit_autoregression": "sieve",
    "ljung_box": "sieve",
    "sieve_column_notes": "sieve",
    "sieve_partial_corr_matrix": "sieve",
    "CARRYING_SHARE": "influence",
    "LeaveOneOut": "influence",
    "leave_one_out_partial_corr": "influence",
    "leave_one_out_test": "influence",
    "MetaResult": "meta",
    "fisher_meta": "meta",
    "MantelTest": "matrices",
    "mantel": "matrices",
    "upper_triangle": "matrices",
    "Adjustment": "options",
    "Alternative": "options",
    "BootstrapScheme": "options",
    "Fit": "options",
    "GamBasis": "options",
    "GamMethod": "options",
    "IntervalMethod": "options",
    "Method": "options",
    "PermutationScheme": "options",
    "ResidualMethod": "options",
    "Semi": "options",
}

__all__ = [
    "AUTOCORR_THRESHOLD",
    "CARRYING_SHARE",
    "SIEVE_METHOD",
    "Adjustment",
    "Alternative",
    "BootstrapCI",
    "BootstrapScheme",
    "ControlChoice",
    "CorrMatrices",
    "CurvatureTest",
    "Fit",
    "Gam",
    "GamBasis",
    "GamFit",
    "GamMethod",
    "GlobalShare",
    "IntervalMethod",
    "LaggedPartialCorrMatrix",
    "LeaveOneOut",
    "Linear",
    "MantelTest",
    "MetaResult",
    "Method",
    "PartialCorr",
    "PartialCorrMatrix",
    "PermutationScheme",
    "PermutationTest",
    "PrewhitenedPartialCorrMatrix",
    "ResidualMethod",
    "Semi",
    "SievePartialCorrMatrix",
    "autocorrelation_warning",
    "bootstrap_ci",
    "bootstrap_ci_batch",
    "bootstrap_indices",
    "choose_control",
    "consistent_interval",
    "curvature_notes",
    "curvature_shift",
    "curvature_test",
    "default_block_length",
    "default_max_edf",
    "default_max_order",
    "detectable_r",
    "fisher_meta",
    "fit_autoregression",
    "gam_control_z",
    "gam_fit",
    "global_share",
    "lag1_autocorrelation",
    "lagged_partial_corr_matrix",
    "leave_one_out_partial_corr",
    "leave_one_out_test",
    "ljung_box",
    "mantel",
    "p_adjust",
    "partial_corr",
    "partial_corr_matrix",
    "partial_corr_matrix_batch",
    "pcor",
    "permutation_indices",
    "permutation_test",
    "permutation_test_batch",
    "prewhitened_partial_corr_matrix",
    "residualise",
    "sieve_column_notes",
    "sieve_partial_corr_matrix",
    "spcor",
    "storey_share",
    "upper_triangle",
]


__getattr__, __dir__ = lazy_names(
    __name__, {name: f"{__name__}.{module}" for name, module in _MODULE_OF.items()}, globals(), __all__
)
