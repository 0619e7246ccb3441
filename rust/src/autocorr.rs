//! Inference for partial correlations of autocorrelated residuals: lagged regression, AR(1) prewhitening and
//! effective sample sizes.
//!
//! Consecutive checkpoints of one run are not independent. Under the null hypothesis that the residuals
//! `e_a`, `e_b` of two test sets (after regressing out the in-domain score) are independent stationary
//! series, Bartlett's (1935) formula gives the variance of their sample correlation as
//! `Var(r) ≈ (1/n) Σ_k ρ_a(k) ρ_b(k)`: for two AR(1) series with coefficients φ_a, φ_b this is
//! `(1/n)(1 + φ_a φ_b)/(1 − φ_a φ_b)`, 9.5× the independent value at φ = 0.9, so the naive t-test rejects a
//! true null far too often. The formula also shows the cure: if one of the two series is white
//! (ρ(k) = 0 for k ≠ 0), the variance is 1/n whatever the other does.
//!
//! - **Lagged regression** ([`lagged_partial_corr_matrix`], gengen's default): with AR(1) noise,
//!   `y_t = f(z_t) + e_t` is `y_t = φ y_{t−1} + f(z_t) − φ f(z_{t−1}) + ε_t`, so each column is regressed on
//!   `[1, y_{t−1}, z_t, z_{t−1}]` (or on a smooth of each, [`lagged_gam_residuals`]); the residuals estimate
//!   the white innovations for every φ, unit root included, and the correlation of two of them is t-tested
//!   on `(n − 1) − 2 − c` degrees of freedom, c the control degrees of freedom. The calibration study
//!   (`docs/calibration.md`) keeps its type-I error within [0.035, 0.065] in every linear cell.
//! - **Prewhitening** ([`prewhitened_pair`]): each residual series is filtered by its estimated AR(1)
//!   operator, `w_t = e_t − φ̃ e_{t−1}` (t = 2 … n), where φ̃ is the lag-1 autocorrelation of the residuals
//!   corrected for its small-sample bias (Kendall, 1954; Marriott & Pope, 1954: E r₁ ≈ φ − (1 + 3φ)/n, plus
//!   one further 1/n per covariate for the degrees of freedom the regression used), clamped to [−1, 1]
//!   (φ̃ = 1 differences the series). The filtered series are correlated and tested with the t-test on
//!   `(n − 1) − 2 − k` degrees of freedom. The estimate `r_w` is the correlation of the innovations,
//!   equal to the correlation of the residuals when both share one AR(1) coefficient; its Fisher-z interval
//!   is `tanh(atanh r_w ± z/√(n − 1 − 3 − k))`.
//! - **Effective sample size** ([`bartlett_effective_n`], [`pyper_peterman_effective_n`]): the t-test on the
//!   unfiltered r with n replaced by `n_eff = n (1 − φ̃_a φ̃_b)/(1 + φ̃_a φ̃_b)` (AR(1) plug-in) or by
//!   Pyper & Peterman's (1998) `1/n_eff = 1/n + (2/n) Σ_{j=1}^{J} ((n − j)/n) ρ̂_a(j) ρ̂_b(j)` (J = n/5).
//!
//! References: Bartlett, M. S. (1935) Some aspects of the time-correlation problem in regard to tests of
//! significance, JRSS 98, 536–543. Box, G. E. P., Jenkins, G. M. (1970) Time Series Analysis, §11.2
//! (prewhitening before cross-correlation). Kendall, M. G. (1954) Note on bias in the estimation of
//! autocorrelation, Biometrika 41, 403–404. Pyper, B. J., Peterman, R. M. (1998) Comparison of methods to
//! account for autocorrelation in correlation analyses of fish data, CJFAS 55, 2127–2140.
//!
//! Size: ~550 lines of code and ~260 of tests below them (`mod tests`), kept beside the estimators they check.

use crate::dist::{normal_quantile, t_two_sided};
use crate::error::{Result, StatsError};
use crate::gam::{GamOptions, GamSmoother};
use crate::matrix::{check_finite, dot, norm, pair_matrices, Mat};
use crate::method::Method;
use crate::pcor::{check_pairable, test_statistic, unit_residuals};
use crate::rank::rank_columns;
use crate::residualise::LinearResidualiser;

/// Smallest number of checkpoints for which an AR(1) coefficient and a test after filtering exist with k
/// covariates: the filtered series has n − 1 values and the t-test needs n − 1 − 2 − k ≥ 1.
pub fn min_checkpoints(k: usize) -> usize {
    k + 4
}

/// Lag-`lag` sample autocorrelation `Σ_{t>lag} x̃_t x̃_{t−lag} / Σ x̃_t²` of the mean-centred series x̃
/// (the standard biased estimator, as R's `acf`). NaN for a constant series or `lag >= x.len()`.
pub fn autocorrelation(x: &[f64], lag: usize) -> f64 {
    let n = x.len();
    if lag >= n {
        return f64::NAN;
    }
    let centre = x.iter().sum::<f64>() / n as f64;
    let centred: Vec<f64> = x.iter().map(|v| v - centre).collect();
    let denominator = dot(&centred, &centred);
    if denominator == 0.0 {
        return f64::NAN;
    }
    dot(&centred[lag..], &centred[..n - lag]) / denominator
}

/// Lag-1 autocorrelation of every column of `series` (rows in step order): [`autocorrelation`] at lag 1,
/// NaN for a constant column or fewer than three rows (two points give ±1 whatever the process).
pub fn lag1_autocorrelations(series: &Mat) -> Vec<f64> {
    (0..series.ncols())
        .map(|j| {
            if series.nrows() < 3 {
                f64::NAN
            } else {
                autocorrelation(series.col(j), 1)
            }
        })
        .collect()
}

/// Autocorrelations at lags 1 ..= `max_lag` (see [`autocorrelation`]).
pub fn autocorrelations(x: &[f64], max_lag: usize) -> Vec<f64> {
    (1..=max_lag).map(|lag| autocorrelation(x, lag)).collect()
}

/// The AR(1) coefficient of regression residuals: the lag-1 autocorrelation r₁, with `bias_correction`
/// plus `(1 + 3 r₁ + 2k)/n` — Kendall's (1954) first-order bias of r₁ under an unknown mean, evaluated at
/// r₁, and the further downward bias that the k other fitted coefficients add (each removes about one
/// degree of freedom of low-frequency variation) — and clamped to [−1, 1].
pub fn ar1_coefficient(residuals: &[f64], k: usize, bias_correction: bool) -> Result<f64> {
    let n = residuals.len();
    if n < 3 {
        return Err(StatsError::invalid(
            "residuals",
            format!("an AR(1) coefficient needs at least 3 values, got {n}"),
        ));
    }
    check_finite("residuals", residuals)?;
    let r1 = autocorrelation(residuals, 1);
    if !r1.is_finite() {
        return Err(StatsError::degenerate(
            "residuals",
            "are constant, so their autocorrelation is undefined",
        ));
    }
    let phi = if bias_correction {
        r1 + (1.0 + 3.0 * r1 + 2.0 * k as f64) / n as f64
    } else {
        r1
    };
    Ok(phi.clamp(-1.0, 1.0))
}

/// The filtered series `w_t = e_t − φ e_{t−1}`, t = 2 … n (length n − 1).
pub fn prewhiten(residuals: &[f64], phi: f64) -> Vec<f64> {
    residuals.windows(2).map(|pair| pair[1] - phi * pair[0]).collect()
}

/// Bartlett's effective sample size of the correlation of two AR(1) series, `n (1 − φ_a φ_b)/(1 + φ_a φ_b)`,
/// never above n and never below 1 (at φ_a φ_b → 1 the series carry no independent information).
pub fn bartlett_effective_n(n: usize, phi_a: f64, phi_b: f64) -> f64 {
    let product = (phi_a * phi_b).clamp(-1.0, 1.0);
    let n = n as f64;
    if product >= 1.0 {
        return 1.0;
    }
    (n * (1.0 - product) / (1.0 + product)).clamp(1.0, n)
}

/// Pyper & Peterman's (1998) effective sample size,
/// `1/n_eff = 1/n + (2/n) Σ_{j=1}^{J} ((n − j)/n) ρ̂_a(j) ρ̂_b(j)` with `J = max_lag`, kept within [1, n].
pub fn pyper_peterman_effective_n(a: &[f64], b: &[f64], max_lag: usize) -> Result<f64> {
    let n = a.len();
    if b.len() != n {
        return Err(StatsError::invalid(
            "b",
            format!("has {} values but a has {n}", b.len()),
        ));
    }
    if n < 2 {
        return Err(StatsError::invalid(
            "a",
            format!("needs at least 2 values, got {n}"),
        ));
    }
    let lags = max_lag.min(n - 1);
    let nf = n as f64;
    let mut sum = 0.0;
    for j in 1..=lags {
        let product = autocorrelation(a, j) * autocorrelation(b, j);
        if product.is_finite() {
            sum += (nf - j as f64) / nf * product;
        }
    }
    let inverse = 1.0 / nf + 2.0 / nf * sum;
    Ok(if inverse <= 0.0 {
        nf
    } else {
        (1.0 / inverse).clamp(1.0, nf)
    })
}

/// The t-test of a correlation r on `n_eff − 2 − k` degrees of freedom (at least 1): (statistic, p, df).
pub fn effective_n_test(r: f64, n_eff: f64, k: f64) -> (f64, f64, f64) {
    let df = (n_eff - 2.0 - k).max(1.0);
    let denominator = 1.0 - r * r;
    let statistic = if denominator <= 0.0 {
        r.signum() * f64::INFINITY
    } else {
        r * (df / denominator).sqrt()
    };
    (statistic, t_two_sided(statistic, df), df)
}

/// Fisher-z interval `tanh(atanh r ± z_{1−α/2}/√(n_eff − 3 − k))`; (−1, 1) when n_eff − 3 − k ≤ 0.
pub fn fisher_interval(r: f64, n_eff: f64, k: f64, level: f64) -> (f64, f64) {
    let dof = n_eff - 3.0 - k;
    if dof <= 0.0 || !r.is_finite() {
        return (-1.0, 1.0);
    }
    let z = r.clamp(-1.0, 1.0).atanh();
    let half_width = normal_quantile(0.5 + level / 2.0) / dof.sqrt();
    ((z - half_width).tanh(), (z + half_width).tanh())
}

/// The prewhitened test of one pair of residual series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrewhitenedPair {
    /// Correlation of the filtered series (the innovations' correlation).
    pub r: f64,
    pub statistic: f64,
    pub p_value: f64,
    /// `(n − 1) − 2 − k`.
    pub df: f64,
    pub phi_a: f64,
    pub phi_b: f64,
}

/// Filters two residual series by their own AR(1) coefficients and tests the correlation of the results
/// (see the module documentation). `k` is the number of covariates the residuals were adjusted for (may be
/// fractional, e.g. a GAM's effective degrees of freedom beyond the intercept).
pub fn prewhitened_pair(a: &[f64], b: &[f64], k: f64, bias_correction: bool) -> Result<PrewhitenedPair> {
    let n = a.len();
    if b.len() != n {
        return Err(StatsError::invalid(
            "b",
            format!("has {} values but a has {n}", b.len()),
        ));
    }
    let df = n as f64 - 1.0 - 2.0 - k;
    if df < 1.0 {
        return Err(StatsError::invalid(
            "n",
            format!("{n} checkpoints with {k} covariate degree(s) of freedom leave no degrees of freedom after prewhitening"),
        ));
    }
    let k_whole = k.round().max(0.0) as usize;
    let phi_a = ar1_coefficient(a, k_whole, bias_correction)?;
    let phi_b = ar1_coefficient(b, k_whole, bias_correction)?;
    let r = centred_correlation(&prewhiten(a, phi_a), &prewhiten(b, phi_b));
    let (statistic, p_value, df) = effective_n_test(r, n as f64 - 1.0, k);
    Ok(PrewhitenedPair {
        r,
        statistic,
        p_value,
        df,
        phi_a,
        phi_b,
    })
}

/// Pearson correlation of two series (centred here); 0 when either is constant.
pub fn centred_correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let ma = a.iter().sum::<f64>() / n;
    let mb = b.iter().sum::<f64>() / n;
    let ac: Vec<f64> = a.iter().map(|v| v - ma).collect();
    let bc: Vec<f64> = b.iter().map(|v| v - mb).collect();
    let denominator = norm(&ac) * norm(&bc);
    if denominator == 0.0 {
        return 0.0;
    }
    (dot(&ac, &bc) / denominator).clamp(-1.0, 1.0)
}

/// Every pair of a run tested after AR(1) prewhitening of the residuals on `[1, covar]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PrewhitenedMatrices {
    /// The ordinary partial correlations (m × m, unit diagonal), as [`crate::pcor::partial_corr_matrix`].
    pub estimate: Mat,
    /// Correlations of the prewhitened residuals (unit diagonal).
    pub whitened_estimate: Mat,
    /// t statistics and two-sided p-values of the prewhitened test (zero diagonals).
    pub statistic: Mat,
    pub p_value: Mat,
    /// The naive (ppcor) p-values, for comparison.
    pub naive_p_value: Mat,
    /// AR(1) coefficient used to filter each column's residuals.
    pub phi: Vec<f64>,
    /// Lag-1 autocorrelation of each column's residuals, uncorrected.
    pub lag1: Vec<f64>,
    pub n: usize,
    pub k: usize,
    /// `(n − 1) − 2 − k`.
    pub df: f64,
}

/// The prewhitened partial-correlation test for every pair of columns of `scores` (n × m) given `covar`
/// (n × k). Pearson or Spearman (ranks first, then residuals and filtering on the ranks).
pub fn prewhitened_partial_corr_matrix(
    scores: &Mat,
    covar: &Mat,
    method: Method,
    bias_correction: bool,
) -> Result<PrewhitenedMatrices> {
    let n = scores.nrows();
    let m = scores.ncols();
    let k = covar.ncols();
    check_pairable("scores", m)?;
    if n < min_checkpoints(k) {
        return Err(StatsError::invalid(
            "scores",
            format!(
                "{n} checkpoints with {k} covariate(s): the prewhitened test needs at least {}",
                min_checkpoints(k)
            ),
        ));
    }
    let (residuals, _) = unit_residuals(scores, covar, method)?;
    let mut phi = Vec::with_capacity(m);
    let mut lag1 = Vec::with_capacity(m);
    let mut filtered = Vec::with_capacity(m);
    for j in 0..m {
        let column = residuals.col(j);
        let coefficient = ar1_coefficient(column, k, bias_correction)?;
        phi.push(coefficient);
        lag1.push(autocorrelation(column, 1));
        filtered.push(prewhiten(column, coefficient));
    }
    let df = (n - 1 - 2 - k) as f64;
    let pairs = pair_matrices(m, [1.0, 1.0, 0.0, 0.0, 0.0], false, |a, b| {
        let r = dot(residuals.col(a), residuals.col(b)).clamp(-1.0, 1.0);
        let rw = centred_correlation(&filtered[a], &filtered[b]);
        let (t, p, _) = effective_n_test(rw, (n - 1) as f64, k as f64);
        let (_, naive_p) = test_statistic(r, n, k, method);
        Ok([r, rw, t, p, naive_p])
    })?;
    let [estimate, whitened_estimate, statistic, p_value, naive_p_value] = pairs;
    Ok(PrewhitenedMatrices {
        estimate,
        whitened_estimate,
        statistic,
        p_value,
        naive_p_value,
        phi,
        lag1,
        n,
        k,
        df,
    })
}

/// The lagged-regression design of one column: `y_t` for t = 2 … n and the controls
/// `[y_{t−1}, covar_t, covar_{t−1}]` (n − 1 rows, 1 + 2k columns).
///
/// With AR(1) noise, `y_t = f(z_t) + e_t`, `e_t = φ e_{t−1} + ε_t` is the same as
/// `y_t = φ y_{t−1} + f(z_t) − φ f(z_{t−1}) + ε_t`: regressing `y_t` on these controls (linearly, or on a
/// smooth of each) leaves residuals that estimate the white innovations ε_t, whatever φ (the random walk
/// included), without a separate estimate of φ.
pub fn lagged_design(y: &[f64], covar: &Mat, with_lagged_covar: bool) -> Result<(Vec<f64>, Mat)> {
    let n = y.len();
    if covar.nrows() != n {
        return Err(StatsError::invalid(
            "covar",
            format!("has {} rows but scores has {n}", covar.nrows()),
        ));
    }
    if n < 3 {
        return Err(StatsError::invalid(
            "scores",
            format!("a lagged regression needs at least 3 checkpoints, got {n}"),
        ));
    }
    let now: Vec<usize> = (1..n).collect();
    let before: Vec<usize> = (0..n - 1).collect();
    let response: Vec<f64> = now.iter().map(|&t| y[t]).collect();
    let lagged: Vec<f64> = before.iter().map(|&t| y[t]).collect();
    let mut controls = Mat::from_columns(n - 1, &[&lagged])?.hstack(&covar.gather_rows(&now))?;
    if with_lagged_covar {
        controls = controls.hstack(&covar.gather_rows(&before))?;
    }
    Ok((response, controls))
}

/// Unit-length residuals of every column of `scores` (n × m) from its lagged regression on
/// `[1, y_{t−1}, covar_t, covar_{t−1}]` ((n − 1) × m), and the number of controls used per column.
///
/// When `covar_{t−1}` is collinear with `[1, covar_t]` (a covariate that is a linear trend in t, say), it
/// adds nothing and is left out. Spearman ranks every column first.
pub fn lagged_residuals(scores: &Mat, covar: &Mat, method: Method) -> Result<(Mat, usize)> {
    let (scores, covar) = crate::control::residual_inputs(scores, covar, method)?;
    let n = scores.nrows();
    let m = scores.ncols();
    let k = covar.ncols();
    let with_lags = lagged_covariates_usable(&covar)?;
    let controls = 1 + k + if with_lags { k } else { 0 };
    if n < controls + 4 {
        return Err(StatsError::invalid(
            "scores",
            format!(
                "{n} checkpoints are too few for a lagged regression on {controls} control(s); at least {} are needed",
                controls + 4
            ),
        ));
    }
    let mut out = Mat::zeros(n - 1, m);
    for j in 0..m {
        let label = crate::residualise::column_name("scores", j, m);
        check_finite(&label, scores.col(j))?;
        let (response, design) = lagged_design(scores.col(j), &covar, with_lags)?;
        let residualiser = LinearResidualiser::new(&design, &label)?;
        let response = Mat::from_columns(n - 1, &[&response])?;
        let residuals = residualiser.residualise_checked(&response, &label)?;
        let length = norm(residuals.col(0));
        for (o, v) in out.col_mut(j).iter_mut().zip(residuals.col(0)) {
            *o = v / length;
        }
    }
    Ok((out, controls))
}

/// Every pair of a run tested on the residuals of the lagged regressions ([`lagged_residuals`] or
/// [`lagged_gam_residuals`]): the t-test of their correlation on `(n − 1) − 2 − c` degrees of freedom, c the
/// control degrees of freedom of the pair (the mean of its two columns').
#[derive(Debug, Clone, PartialEq)]
pub struct LaggedMatrices {
    /// The ordinary partial correlations (m × m, unit diagonal), as [`crate::pcor::partial_corr_matrix`].
    pub estimate: Mat,
    /// Correlations of the lagged-regression residuals (the innovations' correlations).
    pub innovation_estimate: Mat,
    pub statistic: Mat,
    pub p_value: Mat,
    /// Degrees of freedom of each pair's t-test (zero diagonal).
    pub df: Mat,
    /// Lag-1 autocorrelation of each column's ordinary residuals on `[1, covar]`.
    pub lag1: Vec<f64>,
    /// Control degrees of freedom of each column's lagged regression: the number of controls (linear) or
    /// the GAM's effective degrees of freedom less the intercept.
    pub control_df: Vec<f64>,
    pub n: usize,
    pub k: usize,
}

/// The control of the lagged regressions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LaggedControl {
    /// Least squares on `[1, y_{t−1}, covar_t, covar_{t−1}]`.
    Linear,
    /// `y_t ~ s(y_{t−1}) + Σ s(covar_t) + Σ s(covar_{t−1})`, each smooth with this basis dimension (lowered
    /// to what n − 1 rows support) and the caller's criterion, basis and EDF cap.
    Gam(GamOptions),
}

/// Default basis dimension of each smooth of the lagged GAM: with three smooths (one covariate) the model
/// has at most 13 coefficients, which n = 20 checkpoints still support, and it runs in milliseconds.
pub const LAGGED_GAM_K: usize = 5;

/// Whether the lagged covariates add anything beyond `[1, covar_t]` (not when covar is a linear trend).
fn lagged_covariates_usable(covar: &Mat) -> Result<bool> {
    let n = covar.nrows();
    if covar.ncols() == 0 || n < 3 {
        return Ok(false);
    }
    let now: Vec<usize> = (1..n).collect();
    let before: Vec<usize> = (0..n - 1).collect();
    let both = covar.gather_rows(&now).hstack(&covar.gather_rows(&before))?;
    Ok(LinearResidualiser::new(&both, "covar").is_ok())
}

/// Residuals of every column of `scores` (n × m) from `y_t ~ s(y_{t−1}) + Σ s(covar_t) + Σ s(covar_{t−1})`
/// (mgcv-style penalised cubic regression splines, GCV; see [`crate::gam`]), unit length, (n − 1) × m, and
/// each column's control degrees of freedom (EDF − 1).
pub fn lagged_gam_residuals(scores: &Mat, covar: &Mat, method: Method, k: usize) -> Result<(Mat, Vec<f64>)> {
    lagged_gam_residuals_with(
        scores,
        covar,
        method,
        &GamOptions {
            k,
            ..GamOptions::default()
        },
    )
}

/// [`lagged_gam_residuals`] with the GAM's options (k lowered to what n − 1 rows support).
pub fn lagged_gam_residuals_with(
    scores: &Mat,
    covar: &Mat,
    method: Method,
    gam: &GamOptions,
) -> Result<(Mat, Vec<f64>)> {
    let (scores, covar) = match method {
        Method::Pearson => (scores.clone(), covar.clone()),
        Method::Spearman => (rank_columns(scores), rank_columns(covar)),
        Method::Kendall => {
            return Err(StatsError::invalid(
                "method",
                "\"kendall\" has no residual form; use \"pearson\" or \"spearman\" here",
            ))
        }
    };
    let n = scores.nrows();
    let m = scores.ncols();
    if covar.nrows() != n {
        return Err(StatsError::invalid(
            "covar",
            format!("has {} rows but scores has {n}", covar.nrows()),
        ));
    }
    let with_lags = lagged_covariates_usable(&covar)?;
    let smooths = 1 + covar.ncols() * if with_lags { 2 } else { 1 };
    let k_basis = gam.k.min((n.saturating_sub(1)) / (smooths + 1)).max(3);
    let options = GamOptions { k: k_basis, ..*gam };
    let mut out = Mat::zeros(n - 1, m);
    let mut control_df = Vec::with_capacity(m);
    for j in 0..m {
        let label = crate::residualise::column_name("scores", j, m);
        check_finite(&label, scores.col(j))?;
        let (response, controls) = lagged_design(scores.col(j), &covar, with_lags)?;
        let fit = GamSmoother::new(&controls, &options, &label)?.fit_column(&response)?;
        let length = norm(&fit.residuals);
        if length == 0.0 || !length.is_finite() {
            return Err(StatsError::degenerate(
                label,
                "is fitted exactly by its lagged GAM (nothing is left to correlate)",
            ));
        }
        for (o, v) in out.col_mut(j).iter_mut().zip(&fit.residuals) {
            *o = v / length;
        }
        control_df.push(fit.edf - 1.0);
    }
    Ok((out, control_df))
}

/// The lagged-regression partial-correlation test of every pair of columns of `scores` given `covar`.
pub fn lagged_partial_corr_matrix(scores: &Mat, covar: &Mat, method: Method) -> Result<LaggedMatrices> {
    lagged_partial_corr_matrix_with(scores, covar, method, LaggedControl::Linear)
}

/// [`lagged_partial_corr_matrix`] with a linear or GAM control.
pub fn lagged_partial_corr_matrix_with(
    scores: &Mat,
    covar: &Mat,
    method: Method,
    control: LaggedControl,
) -> Result<LaggedMatrices> {
    let n = scores.nrows();
    let m = scores.ncols();
    let k = covar.ncols();
    check_pairable("scores", m)?;
    let (residuals, _) = unit_residuals(scores, covar, method)?;
    let (innovations, control_df) = match control {
        LaggedControl::Linear => {
            let (innovations, controls) = lagged_residuals(scores, covar, method)?;
            (innovations, vec![controls as f64; m])
        }
        LaggedControl::Gam(gam) => lagged_gam_residuals_with(scores, covar, method, &gam)?,
    };
    let pairs = pair_matrices(m, [1.0, 1.0, 0.0, 0.0, 0.0], false, |a, b| {
        let r = dot(residuals.col(a), residuals.col(b)).clamp(-1.0, 1.0);
        let ri = centred_correlation(innovations.col(a), innovations.col(b));
        let pair_controls = 0.5 * (control_df[a] + control_df[b]);
        let (t, p, pair_df) = effective_n_test(ri, (n - 1) as f64, pair_controls);
        Ok([r, ri, t, p, pair_df])
    })?;
    let [estimate, innovation_estimate, statistic, p_value, df] = pairs;
    let lag1 = (0..m).map(|j| autocorrelation(residuals.col(j), 1)).collect();
    Ok(LaggedMatrices {
        estimate,
        innovation_estimate,
        statistic,
        p_value,
        df,
        lag1,
        control_df,
        n,
        k,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256pp;

    fn ar1(n: usize, phi: f64, seed: u64) -> Vec<f64> {
        let mut rng = Xoshiro256pp::seed_from_u64(seed);
        let mut out = Vec::with_capacity(n);
        let mut previous = rng.next_normal() / (1.0 - phi * phi).sqrt();
        out.push(previous);
        for _ in 1..n {
            previous = phi * previous + rng.next_normal();
            out.push(previous);
        }
        out
    }

    #[test]
    fn autocorrelation_matches_r_acf() {
        // R: acf(c(1, 3, 2, 5, 4, 6), lag.max = 2, plot = FALSE)$acf[2:3] = 0.1, 0.3428571
        // (by hand: centred -2.5, -0.5, -1.5, 1.5, 0.5, 2.5; Σx² = 17.5; lag 1: 1.75; lag 2: 6.0)
        let x = [1.0, 3.0, 2.0, 5.0, 4.0, 6.0];
        assert!((autocorrelation(&x, 1) - 1.75 / 17.5).abs() < 1e-15);
        assert!((autocorrelation(&x, 2) - 6.0 / 17.5).abs() < 1e-15);
        assert!(autocorrelation(&x, 6).is_nan());
        assert!(autocorrelation(&[2.0; 5], 1).is_nan());
    }

    #[test]
    fn lag1_autocorrelations_per_column_nan_below_three_rows() {
        let mut series = Mat::zeros(6, 3);
        series.col_mut(0).copy_from_slice(&[1.0, 3.0, 2.0, 5.0, 4.0, 6.0]);
        series.col_mut(1).copy_from_slice(&[2.0; 6]);
        series.col_mut(2).copy_from_slice(&[6.0, 4.0, 5.0, 2.0, 3.0, 1.0]);
        let acf = lag1_autocorrelations(&series);
        assert!((acf[0] - 0.1).abs() < 1e-15 && acf[1].is_nan() && (acf[2] - 0.1).abs() < 1e-15);
        assert!(lag1_autocorrelations(&Mat::zeros(2, 2))
            .iter()
            .all(|v| v.is_nan()));
    }

    #[test]
    fn ar1_coefficient_bias_correction_and_clamp() {
        let x = [1.0, 3.0, 2.0, 5.0, 4.0, 6.0];
        let r1 = 0.1;
        let raw = ar1_coefficient(&x, 0, false).unwrap();
        assert!((raw - r1).abs() < 1e-15);
        let corrected = ar1_coefficient(&x, 1, true).unwrap();
        assert!((corrected - (r1 + (1.0 + 3.0 * r1 + 2.0) / 6.0)).abs() < 1e-15);
        // A trend: r1 close to 1, corrected value clamped at 1.
        let trend: Vec<f64> = (0..10).map(f64::from).collect();
        assert_eq!(ar1_coefficient(&trend, 0, true).unwrap(), 1.0);
        assert!(ar1_coefficient(&[1.0, 2.0], 0, true).is_err());
        assert!(ar1_coefficient(&[1.0, f64::NAN, 2.0], 0, true).is_err());
        assert!(ar1_coefficient(&[1.0, 1.0, 1.0], 0, true).is_err());
    }

    #[test]
    fn long_ar1_series_recovers_phi() {
        for phi in [0.0, 0.5, 0.9] {
            let x = ar1(20_000, phi, 3);
            let estimate = ar1_coefficient(&x, 0, true).unwrap();
            // standard error √((1 − φ²)/n) ≤ 0.0071
            assert!((estimate - phi).abs() < 0.03, "{phi}: {estimate}");
        }
    }

    #[test]
    fn prewhitening_with_the_true_phi_returns_the_innovations() {
        let innovations = [0.5, -1.0, 2.0, 0.25, -0.75];
        let phi = 0.8;
        let mut series = vec![1.0];
        for e in innovations {
            let last = *series.last().unwrap();
            series.push(phi * last + e);
        }
        let filtered = prewhiten(&series, phi);
        for (f, e) in filtered.iter().zip(innovations) {
            assert!((f - e).abs() < 1e-14);
        }
    }

    #[test]
    fn bartlett_effective_n_closed_form() {
        // n (1 − 0.81)/(1 + 0.81) for φ_a = φ_b = 0.9, n = 50
        assert!((bartlett_effective_n(50, 0.9, 0.9) - 50.0 * 0.19 / 1.81).abs() < 1e-12);
        assert_eq!(bartlett_effective_n(50, 0.0, 0.7), 50.0);
        assert_eq!(bartlett_effective_n(50, 1.0, 1.0), 1.0);
        // negative product: more information than n, capped at n
        assert_eq!(bartlett_effective_n(50, 0.5, -0.5), 50.0);
    }

    #[test]
    fn pyper_peterman_closed_form() {
        let a = [1.0, 3.0, 2.0, 5.0, 4.0, 6.0];
        let b = [2.0, 1.0, 4.0, 3.0, 6.0, 5.0];
        let n = 6.0;
        let mut sum = 0.0;
        for j in 1..=2 {
            sum += (n - j as f64) / n * autocorrelation(&a, j) * autocorrelation(&b, j);
        }
        let expected = (1.0 / (1.0 / n + 2.0 / n * sum)).clamp(1.0, n);
        assert!((pyper_peterman_effective_n(&a, &b, 2).unwrap() - expected).abs() < 1e-12);
        assert!(pyper_peterman_effective_n(&a, &b[..5], 2).is_err());
    }

    #[test]
    fn effective_n_test_is_the_t_test_at_full_n() {
        let (t, p, df) = effective_n_test(0.3, 30.0, 1.0);
        let (t_ref, p_ref) = test_statistic(0.3, 30, 1, Method::Pearson);
        assert_eq!(df, 27.0);
        assert!((t - t_ref).abs() < 1e-12 && (p - p_ref).abs() < 1e-12);
    }

    #[test]
    fn fisher_interval_matches_pcor() {
        let (lo, hi) = fisher_interval(0.4, 40.0, 1.0, 0.95);
        let (lo_ref, hi_ref) = crate::pcor::fisher_ci(0.4, 37.0, 0.95).unwrap();
        assert!((lo - lo_ref).abs() < 1e-12 && (hi - hi_ref).abs() < 1e-12);
        assert_eq!(fisher_interval(0.4, 3.0, 1.0, 0.95), (-1.0, 1.0));
    }

    #[test]
    fn prewhitened_pair_of_white_noise_is_close_to_naive() {
        let a = ar1(400, 0.0, 1);
        let b = ar1(400, 0.0, 2);
        let result = prewhitened_pair(&a, &b, 0.0, true).unwrap();
        let naive = centred_correlation(&a, &b);
        assert!((result.r - naive).abs() < 0.02, "{} vs {naive}", result.r);
        assert_eq!(result.df, 397.0);
        assert!(prewhitened_pair(&a[..3], &b[..3], 0.0, true).is_err());
    }

    #[test]
    fn matrix_agrees_with_pair_and_pcor() {
        let n = 60;
        let covar = Mat::from_columns(
            n,
            &[&(0..n).map(|t| (t as f64 / 10.0).sqrt()).collect::<Vec<_>>()],
        )
        .unwrap();
        let columns: Vec<Vec<f64>> = (0..3)
            .map(|j| {
                let noise = ar1(n, 0.7, 10 + j);
                noise.iter().zip(covar.col(0)).map(|(e, z)| 2.0 * z + e).collect()
            })
            .collect();
        let refs: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
        let scores = Mat::from_columns(n, &refs).unwrap();
        let out = prewhitened_partial_corr_matrix(&scores, &covar, Method::Pearson, true).unwrap();
        let plain = crate::pcor::partial_corr_matrix(&scores, &covar, Method::Pearson).unwrap();
        let (residuals, _) = unit_residuals(&scores, &covar, Method::Pearson).unwrap();
        for a in 0..3 {
            for b in 0..3 {
                if a == b {
                    continue;
                }
                assert!((out.estimate.get(a, b) - plain.estimate.get(a, b)).abs() < 1e-12);
                assert!((out.naive_p_value.get(a, b) - plain.p_value.get(a, b)).abs() < 1e-12);
                let pair = prewhitened_pair(residuals.col(a), residuals.col(b), 1.0, true).unwrap();
                assert!((out.p_value.get(a, b) - pair.p_value).abs() < 1e-12);
                assert!((out.whitened_estimate.get(a, b) - pair.r).abs() < 1e-12);
            }
        }
        assert_eq!(out.df, 56.0);
        let too_short = Mat::from_columns(4, &[&[1.0, 2.0, 4.0, 3.0], &[2.0, 1.0, 3.0, 5.0]]).unwrap();
        let one = Mat::from_columns(4, &[&[1.0, 2.0, 3.0, 5.0]]).unwrap();
        assert!(prewhitened_partial_corr_matrix(&too_short, &one, Method::Pearson, true).is_err());
    }
    #[test]
    fn lagged_design_layout() {
        let y = [1.0, 2.0, 4.0, 8.0];
        let covar = Mat::from_columns(4, &[&[10.0, 20.0, 30.0, 50.0]]).unwrap();
        let (response, design) = lagged_design(&y, &covar, true).unwrap();
        assert_eq!(response, vec![2.0, 4.0, 8.0]);
        assert_eq!(design.col(0), &[1.0, 2.0, 4.0]);
        assert_eq!(design.col(1), &[20.0, 30.0, 50.0]);
        assert_eq!(design.col(2), &[10.0, 20.0, 30.0]);
        assert_eq!(lagged_design(&y, &covar, false).unwrap().1.ncols(), 2);
        assert!(lagged_design(&y[..3], &covar, true).is_err());
    }

    #[test]
    fn lagged_residuals_are_least_squares_residuals() {
        // Independent reference: nalgebra's SVD least-squares solve on the explicit design with intercept.
        let n = 40;
        let z: Vec<f64> = (0..n).map(|t| (t as f64 / 7.0).sin() + 0.01 * t as f64).collect();
        let covar = Mat::from_columns(n, &[&z]).unwrap();
        let e = ar1(n, 0.8, 4);
        let y: Vec<f64> = (0..n).map(|t| 3.0 * z[t] + e[t]).collect();
        let scores = Mat::from_columns(n, &[&y, &ar1(n, 0.3, 5)]).unwrap();
        let (residuals, controls) = lagged_residuals(&scores, &covar, Method::Pearson).unwrap();
        assert_eq!(controls, 3);
        let x = nalgebra::DMatrix::from_fn(n - 1, 4, |i, j| match j {
            0 => 1.0,
            1 => y[i],
            2 => z[i + 1],
            _ => z[i],
        });
        let target = nalgebra::DVector::from_fn(n - 1, |i, _| y[i + 1]);
        let beta = x.clone().svd(true, true).solve(&target, 1e-12).unwrap();
        let fitted_residuals = &target - &x * beta;
        let length = fitted_residuals.norm();
        for i in 0..n - 1 {
            assert!((residuals.get(i, 0) - fitted_residuals[i] / length).abs() < 1e-10);
        }
    }

    #[test]
    fn lagged_covariate_collinear_with_a_trend_is_dropped() {
        let n = 30;
        let trend: Vec<f64> = (0..n).map(f64::from).collect();
        let covar = Mat::from_columns(n as usize, &[&trend]).unwrap();
        let scores = Mat::from_columns(n as usize, &[&ar1(30, 0.5, 1), &ar1(30, 0.5, 2)]).unwrap();
        let out = lagged_partial_corr_matrix(&scores, &covar, Method::Pearson).unwrap();
        assert_eq!(out.control_df, vec![2.0, 2.0]);
        assert_eq!(out.df.get(0, 1), 25.0);
        let r = out.innovation_estimate.get(0, 1);
        let (t, p) = test_statistic(r, 29, 2, Method::Pearson);
        assert!((out.statistic.get(0, 1) - t).abs() < 1e-12 && (out.p_value.get(1, 0) - p).abs() < 1e-12);
        let short = Mat::from_columns(
            6,
            &[&[1.0, 3.0, 2.0, 5.0, 4.0, 6.0], &[2.0, 1.0, 4.0, 3.0, 6.0, 5.0]],
        )
        .unwrap();
        let z = Mat::from_columns(6, &[&[0.1, 0.5, 0.2, 0.9, 0.4, 0.3]]).unwrap();
        assert!(lagged_partial_corr_matrix(&short, &z, Method::Pearson).is_err());
    }

    #[test]
    fn lagged_gam_removes_a_nonlinear_link_and_reports_its_edf() {
        let n = 40;
        let z: Vec<f64> = (0..n).map(|t| 1.0 - (-(t as f64) / 8.0).exp()).collect();
        let covar = Mat::from_columns(n, &[&z]).unwrap();
        let columns: Vec<Vec<f64>> = (0..2)
            .map(|j| {
                let e = ar1(n, 0.5, 20 + j);
                (0..n).map(|t| (6.0 * z[t]).sin() + 0.05 * e[t]).collect()
            })
            .collect();
        let scores = Mat::from_columns(n, &[&columns[0], &columns[1]]).unwrap();
        let out = lagged_partial_corr_matrix_with(
            &scores,
            &covar,
            Method::Pearson,
            LaggedControl::Gam(GamOptions {
                k: LAGGED_GAM_K,
                ..GamOptions::default()
            }),
        )
        .unwrap();
        for &c in &out.control_df {
            // y_{t-1}, z_t, z_{t-1}: at least their linear parts, at most 3 (k − 1) coefficients
            assert!((3.0 - 1e-6..=12.0 + 1e-6).contains(&c), "{c}");
        }
        let pair_df = (n - 1) as f64 - 2.0 - 0.5 * (out.control_df[0] + out.control_df[1]);
        assert!((out.df.get(0, 1) - pair_df).abs() < 1e-12);
        let (t, p, _) = effective_n_test(
            out.innovation_estimate.get(0, 1),
            (n - 1) as f64,
            n as f64 - 3.0 - pair_df,
        );
        assert!((out.statistic.get(0, 1) - t).abs() < 1e-9 && (out.p_value.get(0, 1) - p).abs() < 1e-9);
    }
}
