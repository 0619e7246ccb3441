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
- :mod:`~gengen.stats.share`: the share of non-null pairs (Storey's pi1) with a test-set jackknife
  interval, and the smallest |r| a pair's test detects.

Every public name is importable from here (``from gengen.stats import partial_corr``); the modules load on
first use (PEP 562), so that :mod:`gengen.stats.options` stays as light as the command line needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.stats._lazy import declared_names, lazy_names, public_order

# The one list of public names: what type checkers import (``name as name`` re-exports it, and ruff's isort would
# split such lines one per statement), read at run time by declared_names to fill the lazy map and __all__.
if TYPE_CHECKING:
    from gengen.stats.adjust import (  # noqa: I001
        p_adjust as p_adjust,
    )
    from gengen.stats.autocorr import (
        AUTOCORR_THRESHOLD as AUTOCORR_THRESHOLD,
        autocorrelation_warning as autocorrelation_warning,
        lag1_autocorrelation as lag1_autocorrelation,
    )
    from gengen.stats.control_choice import (
        POOLED_LEVEL as POOLED_LEVEL,
        ControlChoice as ControlChoice,
        CurvatureTest as CurvatureTest,
        choose_control as choose_control,
        choose_pooled_control as choose_pooled_control,
        curvature_test as curvature_test,
        stouffer_curvature as stouffer_curvature,
    )
    from gengen.stats.controls import (
        Gam as Gam,
        Linear as Linear,
    )
    from gengen.stats.correlation import (
        CorrMatrices as CorrMatrices,
        PartialCorr as PartialCorr,
        PartialCorrMatrix as PartialCorrMatrix,
        consistent_interval as consistent_interval,
        partial_corr as partial_corr,
        partial_corr_matrix as partial_corr_matrix,
        partial_corr_matrix_batch as partial_corr_matrix_batch,
        pcor as pcor,
        residualise as residualise,
        spcor as spcor,
    )
    from gengen.stats.gam import (
        GamFit as GamFit,
        default_max_edf as default_max_edf,
        gam_fit as gam_fit,
    )
    from gengen.stats.share import (
        GlobalShare as GlobalShare,
        detectable_r as detectable_r,
        global_share as global_share,
        storey_share as storey_share,
    )
    from gengen.stats.influence import (
        CARRYING_SHARE as CARRYING_SHARE,
        LeaveOneOut as LeaveOneOut,
        leave_one_out_partial_corr as leave_one_out_partial_corr,
        leave_one_out_test as leave_one_out_test,
    )
    from gengen.stats.lagged import (
        LaggedPartialCorrMatrix as LaggedPartialCorrMatrix,
        PrewhitenedPartialCorrMatrix as PrewhitenedPartialCorrMatrix,
        lagged_partial_corr_matrix as lagged_partial_corr_matrix,
        prewhitened_partial_corr_matrix as prewhitened_partial_corr_matrix,
    )
    from gengen.stats.matrices import (
        MantelTest as MantelTest,
        mantel as mantel,
        upper_triangle as upper_triangle,
    )
    from gengen.stats.meta import (
        MetaResult as MetaResult,
        fisher_meta as fisher_meta,
    )
    from gengen.stats.options import (
        Adjustment as Adjustment,
        Alternative as Alternative,
        BootstrapScheme as BootstrapScheme,
        Fit as Fit,
        GamBasis as GamBasis,
        GamMethod as GamMethod,
        IntervalMethod as IntervalMethod,
        Method as Method,
        PermutationScheme as PermutationScheme,
        ResidualMethod as ResidualMethod,
        Semi as Semi,
    )
    from gengen.stats.resampling import (
        BootstrapCI as BootstrapCI,
        PermutationTest as PermutationTest,
        bootstrap_ci as bootstrap_ci,
        bootstrap_ci_batch as bootstrap_ci_batch,
        bootstrap_indices as bootstrap_indices,
        default_block_length as default_block_length,
        permutation_indices as permutation_indices,
        permutation_test as permutation_test,
        permutation_test_batch as permutation_test_batch,
    )
    from gengen.stats.sieve import (
        SIEVE_METHOD as SIEVE_METHOD,
        SievePartialCorrMatrix as SievePartialCorrMatrix,
        curvature_notes as curvature_notes,
        curvature_shift as curvature_shift,
        default_max_order as default_max_order,
        fit_autoregression as fit_autoregression,
        gam_control_z as gam_control_z,
        ljung_box as ljung_box,
        sieve_column_notes as sieve_column_notes,
        sieve_partial_corr_matrix as sieve_partial_corr_matrix,
    )

# Public name -> the module defining it (each loads on first use, PEP 562), from the imports above.
_MODULE_OF = declared_names(__file__, __name__)
__all__ = public_order(_MODULE_OF)

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals(), __all__)
