//! Partial and semi-partial correlations with ppcor's tests.
//!
//! Pearson and Spearman partial correlations are correlations of residuals (Spearman on average ranks of
//! every variable, covariates included). Kendall's partial τ is defined, as in ppcor, from the inverse of the
//! τ_b matrix: ρ_ij·rest = −P_ij / √(P_ii P_jj). The semi-partial correlation removes the covariates from one
//! variable only; ppcor's `spcor` formula is
//! sr_ij = −P_ij / (√(P_ii P_jj) · √|P_ii − P_ij² / P_jj|), the correlation of x_i with x_j freed of the rest.
//!
//! Tests (ppcor 1.1): with n observations and k covariates, Pearson and Spearman use
//! t = r √((n − 2 − k)/(1 − r²)) on n − 2 − k degrees of freedom; Kendall uses the normal approximation
//! z = r / √(2(2(n − k) + 5) / (9 (n − k)(n − 1 − k))).
//!
//! Reference: Kim, S. (2015). ppcor: an R package for a fast calculation to semi-partial correlation
//! coefficients. Communications for Statistical Applications and Methods, 22(6), 665–674.

use crate::choice::Choice;
use crate::control::{pair_df, residualise_run, Control};
use crate::dist::{normal_quantile, normal_two_sided, t_two_sided};
use crate::error::{Result, StatsError};
use crate::matrix::{check_finite, dot, norm, pair_matrices, Mat};
use crate::method::Method;
use crate::rank::{average_ranks, kendall_matrix, rank_columns};
use crate::residualise::{is_constant, orthonormal_basis, LinearResidualiser, MAX_CONDITION_NUMBER};

/// From which variable the covariates are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semi {
    /// Both (the partial correlation).
    Both,
    /// From x only.
    X,
    /// From y only (ppcor's `spcor.test(x, y, z)`).
    Y,
}

impl Choice for Semi {
    const OPTION: &'static str = "semi";
    const WHAT: &'static str = "value";
    const NAMES: &'static [(&'static str, Self)] = &[("x", Semi::X), ("y", Semi::Y)];
    const MISSING: Option<Self> = Some(Semi::Both);
}

/// One partial correlation with its test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairStats {
    pub r: f64,
    pub statistic: f64,
    pub p_value: f64,
    /// n − 2 − k (for Kendall, the degrees of freedom the estimate is based on; its test is normal).
    pub df: f64,
    pub n: usize,
    pub k: usize,
}

/// Estimate, statistic and p-value for every pair of columns (diagonals: 1, 0 and 0 as in ppcor).
#[derive(Debug, Clone, PartialEq)]
pub struct CorrMatrices {
    pub estimate: Mat,
    pub statistic: Mat,
    pub p_value: Mat,
    pub n: usize,
    pub k: usize,
    /// n − 2 − k, ppcor's degrees of freedom (linear control).
    pub df: f64,
    /// Degrees of freedom of each pair's t-test (m × m, zero diagonal): `df` everywhere under the linear
    /// control, n − 2 − max(ν_a, ν_b) under the GAM control (see `control`).
    pub pair_df: Mat,
    /// Degrees of freedom each column spent on the control: k (linear) or its smooths' EDF (GAM).
    pub control_df: Vec<f64>,
}

/// The columns of `name` can be paired: there are at least two.
pub fn check_pairable(name: &str, m: usize) -> Result<()> {
    if m < 2 {
        return Err(StatsError::invalid(
            name,
            format!("needs at least 2 columns, got {m}"),
        ));
    }
    Ok(())
}

/// A matrix filled with `value` off the diagonal and zero on it.
fn off_diagonal(m: usize, value: f64) -> Mat {
    let mut out = Mat::filled(m, m, value);
    for i in 0..m {
        out.set(i, i, 0.0);
    }
    out
}

/// Student t test of a correlation on `df` degrees of freedom: t = r √(df / (1 − r²)).
pub fn t_test(r: f64, df: f64) -> (f64, f64) {
    let denominator = 1.0 - r * r;
    let statistic = if denominator <= 0.0 {
        r.signum() * f64::INFINITY
    } else {
        r * (df / denominator).sqrt()
    };
    (statistic, t_two_sided(statistic, df))
}

/// Checks that n observations leave at least one degree of freedom with k covariates.
pub fn check_degrees_of_freedom(n: usize, k: usize) -> Result<f64> {
    if n < k + 3 {
        return Err(StatsError::invalid(
            "n",
            format!(
                "{n} observations with {k} covariate(s) leave df = n - 2 - k = {}; at least {} observations are needed",
                n as i64 - 2 - k as i64,
                k + 3
            ),
        ));
    }
    Ok((n - 2 - k) as f64)
}

/// ppcor's test of a (semi-)partial correlation `r` from n observations and k covariates.
pub fn test_statistic(r: f64, n: usize, k: usize, method: Method) -> (f64, f64) {
    match method {
        Method::Kendall => {
            let nk = (n - k) as f64;
            let statistic = r / (2.0 * (2.0 * nk + 5.0) / (9.0 * nk * (nk - 1.0))).sqrt();
            (statistic, normal_two_sided(statistic))
        }
        Method::Pearson | Method::Spearman => t_test(r, (n - 2 - k) as f64),
    }
}

/// Fisher-z confidence interval tanh(atanh(r) ± z_{1−α/2} / √(df − 1)), df the t-test's degrees of freedom
/// (so √(n − 3 − k) under the linear control); (−1, 1) when df ≤ 1.
pub fn fisher_ci(r: f64, df: f64, level: f64) -> Result<(f64, f64)> {
    if !(level > 0.0 && level < 1.0) {
        return Err(StatsError::invalid(
            "ci_level",
            format!("must lie strictly between 0 and 1, got {level}"),
        ));
    }
    if df <= 1.0 {
        return Ok((-1.0, 1.0));
    }
    let z = r.clamp(-1.0, 1.0).atanh();
    let half_width = normal_quantile(0.5 + level / 2.0) / (df - 1.0).sqrt();
    Ok(((z - half_width).tanh(), (z + half_width).tanh()))
}

/// The partial (or semi-partial) correlation of `x` and `y` given the columns of `covar`, with ppcor's test.
pub fn partial_corr(x: &[f64], y: &[f64], covar: &Mat, method: Method, semi: Semi) -> Result<PairStats> {
    partial_corr_with(x, y, covar, method, semi, &Control::Linear)
}

/// The variables of [`partial_corr_with`] once checked: x and y of n finite values, neither constant, and the
/// covariates (n × k).
#[derive(Clone, Copy)]
struct Pair<'a> {
    x: &'a [f64],
    y: &'a [f64],
    covar: &'a Mat,
    method: Method,
    semi: Semi,
}

impl Pair<'_> {
    /// The residual correlation of a pair under a GAM control and its degrees of freedom for the t-test,
    /// n − 2 − max(ν_x, ν_y) (for a semi-partial correlation, the ν of the residualised variable alone).
    fn gam_correlation(&self, control: &Control) -> Result<(f64, f64)> {
        let (n, covar, method) = (self.x.len(), self.covar, self.method);
        if method == Method::Kendall {
            return Err(gam_needs_residuals());
        }
        let centred = |values: &[f64], name: &str| -> Result<(Vec<f64>, f64)> {
            let values = if method == Method::Spearman {
                average_ranks(values)
            } else {
                values.to_vec()
            };
            let mut out = vec![0.0; n];
            crate::matrix::centre_into(&values, &mut out);
            let length = norm(&out);
            if length == 0.0 {
                return Err(StatsError::degenerate(
                    name,
                    "is constant, so its correlation is undefined",
                ));
            }
            Ok((out.iter().map(|v| v / length).collect(), 0.0))
        };
        let smoothed = |values: &[f64], name: &str| -> Result<(Vec<f64>, f64)> {
            let run = residualise_run(&Mat::from_columns(n, &[values])?, covar, method, control)
                .map_err(|error| rename_scores(error, name))?;
            Ok((run.unit_residuals.col(0).to_vec(), run.control_df[0]))
        };
        let ((ex, nu_x), (ey, nu_y)) = match self.semi {
            Semi::Both => {
                let run = residualise_run(&Mat::from_columns(n, &[self.x, self.y])?, covar, method, control)?;
                (
                    (run.unit_residuals.col(0).to_vec(), run.control_df[0]),
                    (run.unit_residuals.col(1).to_vec(), run.control_df[1]),
                )
            }
            Semi::Y => (centred(self.x, "x")?, smoothed(self.y, "y")?),
            Semi::X => (smoothed(self.x, "x")?, centred(self.y, "y")?),
        };
        let r = defined(dot(&ex, &ey).clamp(-1.0, 1.0), "covar")?;
        let df = n as f64 - 2.0 - nu_x.max(nu_y);
        if df <= 0.0 {
            return Err(StatsError::invalid(
            "n",
            format!("{n} observations leave df = {df:.2} after the GAM control; use a smaller k or more checkpoints"),
        ));
        }
        Ok((r, df))
    }

    /// The partial (or semi-partial) correlation of a pair under the linear control, ppcor's: of least-squares
    /// residuals (Pearson, Spearman on ranks), or from the inverse of the τ_b matrix (Kendall).
    fn linear_correlation(&self) -> Result<f64> {
        let (n, k, covar) = (self.x.len(), self.covar.ncols(), self.covar);
        let r = match self.method {
            Method::Kendall => {
                let mut data = Mat::from_columns(n, &[self.x, self.y])?;
                data = data.hstack(covar)?;
                for j in 0..k {
                    check_finite(&crate::residualise::column_name("covar", j, k), covar.col(j))?;
                }
                let tau = kendall_matrix(&data);
                if k == 0 {
                    tau.get(0, 1)
                } else {
                    let precision = invert_correlation(&tau, "covar")?;
                    match self.semi {
                        Semi::Both => partial_from_precision(&precision, 0, 1),
                        Semi::Y => semi_from_precision(&precision, 0, 1),
                        Semi::X => semi_from_precision(&precision, 1, 0),
                    }
                }
            }
            Method::Pearson | Method::Spearman => {
                let (x, y, covar) = if self.method == Method::Spearman {
                    for j in 0..k {
                        check_finite(&crate::residualise::column_name("covar", j, k), covar.col(j))?;
                    }
                    (average_ranks(self.x), average_ranks(self.y), rank_columns(covar))
                } else {
                    (self.x.to_vec(), self.y.to_vec(), covar.clone())
                };
                let residualiser = LinearResidualiser::new(&covar, "covar")?;
                let centring = LinearResidualiser::new(&Mat::zeros(n, 0), "covar")?;
                let x_maker = if self.semi == Semi::Y {
                    &centring
                } else {
                    &residualiser
                };
                let y_maker = if self.semi == Semi::X {
                    &centring
                } else {
                    &residualiser
                };
                let rx = x_maker.residualise_checked(&Mat::from_columns(n, &[&x])?, "x")?;
                let ry = y_maker.residualise_checked(&Mat::from_columns(n, &[&y])?, "y")?;
                correlation_of_centred(rx.col(0), ry.col(0))
            }
        };
        Ok(r)
    }
}

/// Errors about "scores" from a one-column run, renamed to the variable they concern.
fn rename_scores(error: StatsError, name: &str) -> StatsError {
    match error {
        StatsError::InvalidArgument { name: n, problem, .. } if n == "scores" => {
            StatsError::invalid(name, problem)
        }
        StatsError::Degenerate { name: n, problem, .. } if n == "scores" => {
            StatsError::degenerate(name, problem)
        }
        other => other,
    }
}

/// [`partial_corr`] under `control`.
pub fn partial_corr_with(
    x: &[f64],
    y: &[f64],
    covar: &Mat,
    method: Method,
    semi: Semi,
    control: &Control,
) -> Result<PairStats> {
    let n = x.len();
    if y.len() != n {
        return Err(StatsError::invalid(
            "y",
            format!("has {} values but x has {n}", y.len()),
        ));
    }
    if covar.nrows() != n {
        return Err(StatsError::invalid(
            "covar",
            format!("has {} rows but x has {n} values", covar.nrows()),
        ));
    }
    let k = covar.ncols();
    let df = check_degrees_of_freedom(n, k)?;
    check_finite("x", x)?;
    check_finite("y", y)?;
    for (name, values) in [("x", x), ("y", y)] {
        if is_constant(values) {
            return Err(StatsError::degenerate(
                name,
                "is constant, so its correlation is undefined",
            ));
        }
    }
    let pair = Pair {
        x,
        y,
        covar,
        method,
        semi,
    };
    let (r, df, (statistic, p_value)) = match control {
        Control::Gam(_) => {
            let (r, df) = pair.gam_correlation(control)?;
            (r, df, t_test(r, df))
        }
        Control::Linear => {
            let r = defined(pair.linear_correlation()?, "covar")?;
            (r, df, test_statistic(r, n, k, method))
        }
    };
    Ok(PairStats {
        r,
        statistic,
        p_value,
        df,
        n,
        k,
    })
}

fn gam_needs_residuals() -> StatsError {
    StatsError::invalid(
        "method",
        "\"kendall\" has no residual form, so it cannot be combined with fit=\"gam\"; use \"pearson\" or \"spearman\"",
    )
}

/// Correlation of two already centred vectors, clamped to [−1, 1] against rounding.
pub fn correlation_of_centred(a: &[f64], b: &[f64]) -> f64 {
    (dot(a, b) / (norm(a) * norm(b))).clamp(-1.0, 1.0)
}

/// Refuses an undefined estimate (NaN from a degenerate precision matrix) instead of passing it on.
fn defined(r: f64, name: &str) -> Result<f64> {
    if r.is_finite() {
        Ok(r)
    } else {
        Err(StatsError::degenerate(
            name,
            "the partial correlation is undefined: the variables are (rank-)collinear with the covariates",
        ))
    }
}

/// −P_ij / √(P_ii P_jj).
fn partial_from_precision(p: &nalgebra::DMatrix<f64>, i: usize, j: usize) -> f64 {
    (-p[(i, j)] / (p[(i, i)] * p[(j, j)]).sqrt()).clamp(-1.0, 1.0)
}

/// ppcor's semi-partial: the correlation of variable i with variable j freed of all the others.
fn semi_from_precision(p: &nalgebra::DMatrix<f64>, i: usize, j: usize) -> f64 {
    let pij = p[(i, j)];
    let denominator = (p[(i, i)] * p[(j, j)]).sqrt() * (p[(i, i)] - pij * pij / p[(j, j)]).abs().sqrt();
    (-pij / denominator).clamp(-1.0, 1.0)
}

/// Inverse of a symmetric correlation-like matrix, refusing a singular one by its condition number.
fn invert_correlation(m: &Mat, name: &str) -> Result<nalgebra::DMatrix<f64>> {
    let p = m.ncols();
    let matrix = nalgebra::DMatrix::from_column_slice(p, p, m.as_slice());
    let eigen = matrix.clone().symmetric_eigen();
    let largest = eigen.eigenvalues.max();
    let smallest = eigen.eigenvalues.min();
    // The inverse is formed directly, so its relative error grows with the condition number of the matrix
    // itself: refuse beyond MAX_CONDITION_NUMBER (a τ of ±1 between two variables makes it ~1e16).
    if smallest <= 0.0 || largest / smallest > MAX_CONDITION_NUMBER {
        return Err(StatsError::degenerate(
            name,
            "the variables are collinear: their correlation matrix is singular",
        ));
    }
    matrix.try_inverse().ok_or_else(|| {
        StatsError::degenerate(
            name,
            "the variables are collinear: their correlation matrix is singular",
        )
    })
}

/// The precision matrix of the correlation matrix of `data`'s columns (ranked first for Spearman), or of the
/// τ_b matrix for Kendall.
fn precision_matrix(data: &Mat, method: Method, name: &str) -> Result<nalgebra::DMatrix<f64>> {
    let m = data.ncols();
    for j in 0..m {
        let label = crate::residualise::column_name(name, j, m);
        check_finite(&label, data.col(j))?;
        if is_constant(data.col(j)) {
            return Err(StatsError::degenerate(
                label,
                "is constant, so its correlation is undefined",
            ));
        }
    }
    match method {
        Method::Kendall => invert_correlation(&kendall_matrix(data), name),
        Method::Pearson | Method::Spearman => {
            let ranked;
            let source = if method == Method::Spearman {
                ranked = rank_columns(data);
                &ranked
            } else {
                data
            };
            // Correlation matrix = RᵀR, so its inverse is R⁻¹R⁻ᵀ: no normal equations formed.
            let basis = orthonormal_basis(source, name)?;
            let r_inverse = basis
                .r
                .clone()
                .try_inverse()
                .ok_or_else(|| StatsError::degenerate(name, "the columns are collinear"))?;
            Ok(&r_inverse * r_inverse.transpose())
        }
    }
}

/// ppcor's `pcor(data)` (semi = false) or `spcor(data)` (semi = true): every pair given all other columns.
pub fn ppcor_matrices(data: &Mat, method: Method, semi: bool) -> Result<CorrMatrices> {
    let n = data.nrows();
    let m = data.ncols();
    check_pairable("data", m)?;
    let k = m - 2;
    let df = check_degrees_of_freedom(n, k)?;
    let precision = precision_matrix(data, method, "data")?;
    // Semi-partial correlations are not symmetric: every ordered pair.
    let [estimate, statistic, p_value] = pair_matrices(m, [1.0, 0.0, 0.0], true, |i, j| {
        let r = if semi {
            semi_from_precision(&precision, i, j)
        } else {
            partial_from_precision(&precision, i, j)
        };
        let r = defined(r, "data")?;
        let (t, p) = test_statistic(r, n, k, method);
        Ok([r, t, p])
    })?;
    Ok(CorrMatrices {
        estimate,
        statistic,
        p_value,
        n,
        k,
        df,
        pair_df: off_diagonal(m, df),
        control_df: vec![k as f64; m],
    })
}

/// Residuals of every column of `scores` given `covar`, normalised to unit length, ready for correlating
/// (ranked first for Spearman). Kendall has no residual form and is refused.
pub fn unit_residuals(scores: &Mat, covar: &Mat, method: Method) -> Result<(Mat, LinearResidualiser)> {
    let run = residualise_run(scores, covar, method, &Control::Linear)?;
    match run.linear {
        Some(residualiser) => Ok((run.unit_residuals, residualiser)),
        None => Err(StatsError::invalid(
            "fit",
            "the linear control has no linear residual-maker",
        )),
    }
}

fn check_all_finite(m: &Mat, name: &str) -> Result<()> {
    for j in 0..m.ncols() {
        check_finite(&crate::residualise::column_name(name, j, m.ncols()), m.col(j))?;
    }
    Ok(())
}

/// Partial correlation of every pair of columns of `scores` (n × m) given `covar` (n × k), with tests, under
/// the linear control.
pub fn partial_corr_matrix(scores: &Mat, covar: &Mat, method: Method) -> Result<CorrMatrices> {
    partial_corr_matrix_with(scores, covar, method, &Control::Linear)
}

/// Partial correlation of every pair of columns of `scores` given `covar` under `control`, with tests.
pub fn partial_corr_matrix_with(
    scores: &Mat,
    covar: &Mat,
    method: Method,
    control: &Control,
) -> Result<CorrMatrices> {
    let n = scores.nrows();
    let m = scores.ncols();
    let k = covar.ncols();
    check_pairable("scores", m)?;
    let df = check_degrees_of_freedom(n, k)?;
    let mut estimate = Mat::filled(m, m, 1.0);
    let mut pair_dfs = off_diagonal(m, df);
    let mut control_df = vec![k as f64; m];
    match method {
        Method::Kendall => {
            if matches!(control, Control::Gam(_)) {
                return Err(gam_needs_residuals());
            }
            if covar.nrows() != n {
                return Err(StatsError::invalid(
                    "covar",
                    format!("has {} rows but scores has {n}", covar.nrows()),
                ));
            }
            check_all_finite(scores, "scores")?;
            check_all_finite(covar, "covar")?;
            for j in 0..m {
                if is_constant(scores.col(j)) {
                    return Err(StatsError::degenerate(
                        crate::residualise::column_name("scores", j, m),
                        "is constant, so its correlation is undefined",
                    ));
                }
            }
            let tau = kendall_matrix(&scores.hstack(covar)?);
            for a in 0..m {
                for b in (a + 1)..m {
                    let r = if k == 0 {
                        tau.get(a, b)
                    } else {
                        let indices: Vec<usize> = [a, b].into_iter().chain(m..m + k).collect();
                        let mut sub = Mat::zeros(k + 2, k + 2);
                        for (si, &i) in indices.iter().enumerate() {
                            for (sj, &j) in indices.iter().enumerate() {
                                sub.set(si, sj, tau.get(i, j));
                            }
                        }
                        defined(
                            partial_from_precision(&invert_correlation(&sub, "covar")?, 0, 1),
                            "covar",
                        )?
                    };
                    estimate.set(a, b, r);
                    estimate.set(b, a, r);
                }
            }
        }
        Method::Pearson | Method::Spearman => {
            let run = residualise_run(scores, covar, method, control)?;
            control_df.clone_from(&run.control_df);
            for a in 0..m {
                for b in (a + 1)..m {
                    let r = dot(run.unit_residuals.col(a), run.unit_residuals.col(b)).clamp(-1.0, 1.0);
                    estimate.set(a, b, r);
                    estimate.set(b, a, r);
                    let pair = pair_df(n, &run.control_df, a, b);
                    if pair <= 0.0 {
                        return Err(StatsError::invalid(
                            "n",
                            format!(
                                "{n} observations leave df = {pair:.2} for the pair ({a}, {b}) after the GAM control \
                                 spent {:.2} degrees of freedom; use fewer basis functions (k) or more checkpoints",
                                run.control_df[a].max(run.control_df[b])
                            ),
                        ));
                    }
                    pair_dfs.set(a, b, pair);
                    pair_dfs.set(b, a, pair);
                }
            }
        }
    }
    let mut statistic = Mat::zeros(m, m);
    let mut p_value = Mat::zeros(m, m);
    for a in 0..m {
        for b in 0..m {
            if a != b {
                let (t, p) = match method {
                    Method::Kendall => test_statistic(estimate.get(a, b), n, k, method),
                    _ => t_test(estimate.get(a, b), pair_dfs.get(a, b)),
                };
                statistic.set(a, b, t);
                p_value.set(a, b, p);
            }
        }
    }
    Ok(CorrMatrices {
        estimate,
        statistic,
        p_value,
        n,
        k,
        df,
        pair_df: pair_dfs,
        control_df,
    })
}

#[cfg(test)]
#[path = "pcor_tests.rs"]
mod tests;
