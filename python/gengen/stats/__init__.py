"""Every statistic gengen computes, typed and validated, over the Rust core :mod:`gengen._core`.

The modules, from the bottom up (none imports the analysis, report, comparison, training or CLI layers):

- :mod:`~gengen.stats.correlation`: partial and semi-partial correlations (ppcor's), their matrices and
  batches, residuals, and R's ``p.adjust``;
- :mod:`~gengen.stats.resampling`: Freedman–Lane permutation tests and bootstrap intervals;
- :mod:`~gengen.stats.gam`: the GAM control (penalised regression splines);
- :mod:`~gengen.stats.lagged`: the lagged-regression and prewhitened tests for autocorrelated trajectories;
- :mod:`~gengen.stats.autocorr`: lag-1 autocorrelation of residuals and the warning it triggers;
- :mod:`~gengen.stats.sieve`: the AR-sieve bootstrap of the partial correlation (the analysis' default);
- :mod:`~gengen.stats.meta`: Fisher-z fixed and random-effects meta-analysis;
- :mod:`~gengen.stats.mantel`: the Mantel test of two correlation matrices;
- :mod:`~gengen.stats.options`: the ``Literal`` option types, their choices and defaults;
- :mod:`~gengen.stats.validation`: the input checks every function shares.

Every public function is importable from here: ``from gengen.stats import partial_corr``.
"""

from __future__ import annotations

from gengen.stats.autocorr import AUTOCORR_THRESHOLD, autocorrelation_warning, lag1_autocorrelation
from gengen.stats.correlation import (  # noqa: F401  (option types, used by the R tests)
    Adjustment,
    BootstrapCI,
    CorrMatrices,
    GamFit,
    Method,
    PartialCorr,
    PartialCorrMatrix,
    PermutationTest,
    bootstrap_ci,
    bootstrap_ci_batch,
    bootstrap_indices,
    default_block_length,
    gam_fit,
    p_adjust,
    partial_corr,
    partial_corr_matrix,
    partial_corr_matrix_batch,
    pcor,
    permutation_indices,
    permutation_test,
    permutation_test_batch,
    residualise,
    spcor,
)
from gengen.stats.lagged import (
    LaggedPartialCorrMatrix,
    PrewhitenedPartialCorrMatrix,
    lagged_partial_corr_matrix,
    prewhitened_partial_corr_matrix,
)
from gengen.stats.meta import MetaResult, fisher_meta
from gengen.stats.sieve import (
    SievePartialCorrMatrix,
    curvature_notes,
    curvature_shift,
    fit_autoregression,
    ljung_box,
    sieve_column_notes,
    sieve_partial_corr_matrix,
)

__all__ = [
    "AUTOCORR_THRESHOLD",
    "BootstrapCI",
    "CorrMatrices",
    "GamFit",
    "LaggedPartialCorrMatrix",
    "MetaResult",
    "PartialCorr",
    "PartialCorrMatrix",
    "PermutationTest",
    "PrewhitenedPartialCorrMatrix",
    "SievePartialCorrMatrix",
    "autocorrelation_warning",
    "bootstrap_ci",
    "bootstrap_ci_batch",
    "bootstrap_indices",
    "curvature_notes",
    "curvature_shift",
    "default_block_length",
    "fisher_meta",
    "fit_autoregression",
    "gam_fit",
    "lag1_autocorrelation",
    "lagged_partial_corr_matrix",
    "ljung_box",
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
]
