//! How in-domain performance is "regressed out": the linear control or the GAM control, behind one interface.
//!
//! Both turn a run's score columns into residuals, record the model degrees of freedom each column spent on
//! the control (k for the linear fit; the smooth terms' effective degrees of freedom, EDF − 1, for the GAM),
//! and provide the residual-maker that the permutation test reapplies to permuted residuals.
//!
//! Degrees of freedom of the t-test under GAM control: with e_a and e_b residualised on smooths of EDF
//! (intercept excluded) ν_a and ν_b, the test uses df = n − 2 − max(ν_a, ν_b), the conservative choice, which
//! is ppcor's n − 2 − k when the control is linear (a linear term has ν = k). The permutation test is the
//! recommended inference under GAM control: it does not lean on this approximation.

use crate::choice::Choice;
use crate::error::{Result, StatsError};
use crate::gam::{FixedSmoother, GamOptions, GamSmoother};
use crate::matrix::{norm, Mat};
use crate::method::Method;
use crate::rank::rank_columns;
use crate::residualise::{column_name, is_constant, LinearResidualiser, MIN_RESIDUAL_FRACTION};

/// The control of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Control {
    /// Least squares on [1, covar].
    Linear,
    /// mgcv-style additive model: intercept + one penalised regression spline per covariate, smoothing
    /// parameters chosen per column.
    Gam(GamOptions),
}

/// The control an option names: [`Control`] without its GAM options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlKind {
    Linear,
    Gam,
}

impl Choice for ControlKind {
    const OPTION: &'static str = "fit";
    const WHAT: &'static str = "control";
    const NAMES: &'static [(&'static str, Self)] =
        &[("linear", ControlKind::Linear), ("gam", ControlKind::Gam)];
}

impl Control {
    pub fn name(&self) -> &'static str {
        match self {
            Control::Linear => "linear",
            Control::Gam(_) => "gam",
        }
    }
}

/// A residual-maker applied to a permuted residual vector, possibly plus a constant offset (see
/// [`ColumnMaker`]).
pub trait ResidualMaker: Send + Sync {
    /// Replaces `v` by its residuals under this maker.
    fn apply_in_place(&self, v: &mut [f64]);
}

impl ResidualMaker for LinearResidualiser {
    fn apply_in_place(&self, v: &mut [f64]) {
        LinearResidualiser::apply_in_place(self, v)
    }
}

impl ResidualMaker for FixedSmoother {
    fn apply_in_place(&self, v: &mut [f64]) {
        let input = v.to_vec();
        self.residualise_into(&input, v);
    }
}

/// The Freedman–Lane residual-maker of one column under a fixed smoother M: a permuted copy
/// ŷ + P e is residualised to M ŷ + M P e, so `offset` holds M ŷ (zero for a projection, where M ŷ = 0).
/// Both are scaled like the unit-length residuals they apply to.
pub struct ColumnMaker {
    pub maker: Box<dyn ResidualMaker>,
    pub offset: Vec<f64>,
}

/// Residuals of a run's columns under a control.
pub struct RunResiduals {
    /// Column j is e_j / ‖e_j‖.
    pub unit_residuals: Mat,
    /// Model degrees of freedom spent on the control by each column (k, or the smooths' EDF).
    pub control_df: Vec<f64>,
    /// With the linear control, the shared projection (which allows a shortcut in the permutation test).
    pub linear: Option<LinearResidualiser>,
    /// With the GAM control, each column's fixed smoother at its chosen smoothing parameters.
    pub columns: Vec<ColumnMaker>,
}

fn check_columns(scores: &Mat, covar: &Mat) -> Result<()> {
    if covar.nrows() != scores.nrows() {
        return Err(StatsError::invalid(
            "covar",
            format!("has {} rows but scores has {}", covar.nrows(), scores.nrows()),
        ));
    }
    for (m, name) in [(scores, "scores"), (covar, "covar")] {
        for j in 0..m.ncols() {
            crate::matrix::check_finite(&column_name(name, j, m.ncols()), m.col(j))?;
        }
    }
    Ok(())
}

/// The data a residual-based method works on: the values (Pearson) or every column's average ranks
/// (Spearman). Kendall has no residual form and is refused.
pub fn residual_inputs(scores: &Mat, covar: &Mat, method: Method) -> Result<(Mat, Mat)> {
    match method {
        Method::Pearson => Ok((scores.clone(), covar.clone())),
        Method::Spearman => Ok((rank_columns(scores), rank_columns(covar))),
        Method::Kendall => Err(StatsError::invalid(
            "method",
            "\"kendall\" has no residual form; use \"pearson\" or \"spearman\" here",
        )),
    }
}

/// Residualises every column of `scores` on `covar` (both ranked first for Spearman) and scales the
/// residuals to unit length. Kendall has no residual form and is refused.
pub fn residualise_run(scores: &Mat, covar: &Mat, method: Method, control: &Control) -> Result<RunResiduals> {
    check_columns(scores, covar)?;
    let (scores, covar) = residual_inputs(scores, covar, method)?;
    match control {
        Control::Linear => {
            let residualiser = LinearResidualiser::new(&covar, "covar")?;
            let mut residuals = residualiser.residualise_checked(&scores, "scores")?;
            normalise_columns(&mut residuals);
            Ok(RunResiduals {
                unit_residuals: residuals,
                control_df: vec![covar.ncols() as f64; scores.ncols()],
                linear: Some(residualiser),
                columns: Vec::new(),
            })
        }
        Control::Gam(options) => {
            if covar.ncols() == 0 {
                return Err(StatsError::invalid(
                    "covar",
                    "fit=\"gam\" needs at least one control column",
                ));
            }
            let smoother = GamSmoother::new(&covar, options, "covar")?;
            let fits = smoother.residualise_columns(&scores, "scores")?;
            let (n, m) = (scores.nrows(), scores.ncols());
            let mut residuals = Mat::zeros(n, m);
            let mut control_df = Vec::with_capacity(m);
            let mut columns = Vec::with_capacity(m);
            for (j, fit) in fits.iter().enumerate() {
                let label = column_name("scores", j, m);
                if is_constant(scores.col(j)) {
                    return Err(StatsError::degenerate(
                        label,
                        "is constant, so its correlation is undefined",
                    ));
                }
                let length = norm(&fit.residuals);
                let centred = {
                    let mut c = vec![0.0; n];
                    crate::matrix::centre_into(scores.col(j), &mut c);
                    norm(&c)
                };
                if length <= MIN_RESIDUAL_FRACTION * centred {
                    return Err(StatsError::degenerate(
                        label,
                        "is a smooth function of covar (nothing is left after the GAM control)",
                    ));
                }
                for (r, e) in residuals.col_mut(j).iter_mut().zip(&fit.residuals) {
                    *r = e / length;
                }
                control_df.push(fit.edf - 1.0);
                let fixed = smoother.fixed(&fit.lambda)?;
                let mut offset = vec![0.0; n];
                let scaled_fitted: Vec<f64> = fit.fitted.iter().map(|f| f / length).collect();
                fixed.residualise_into(&scaled_fitted, &mut offset);
                columns.push(ColumnMaker {
                    maker: Box::new(fixed),
                    offset,
                });
            }
            Ok(RunResiduals {
                unit_residuals: residuals,
                control_df,
                linear: None,
                columns,
            })
        }
    }
}

fn normalise_columns(residuals: &mut Mat) {
    for j in 0..residuals.ncols() {
        let length = norm(residuals.col(j));
        for v in residuals.col_mut(j) {
            *v /= length;
        }
    }
}

/// Degrees of freedom of the t-test of the pair (a, b): n − 2 − max(ν_a, ν_b).
pub fn pair_df(n: usize, control_df: &[f64], a: usize, b: usize) -> f64 {
    n as f64 - 2.0 - control_df[a].max(control_df[b])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256pp;

    #[test]
    fn gam_with_huge_smoothing_matches_the_linear_control() {
        // A straight-line smooth (λ → ∞) leaves the linear residuals, and the EDF of the smooth is 1 = k.
        let n = 40;
        let mut rng = Xoshiro256pp::seed_from_u64(4);
        let z: Vec<f64> = (0..n).map(|i| i as f64 / n as f64).collect();
        let scores =
            Mat::from_col_major(n, 2, (0..2 * n).map(|i| z[i % n] + rng.next_normal()).collect()).unwrap();
        let covar = Mat::from_columns(n, &[&z]).unwrap();
        let linear = residualise_run(&scores, &covar, Method::Pearson, &Control::Linear).unwrap();
        let smoother = GamSmoother::new(&covar, &GamOptions::default(), "covar").unwrap();
        let fit = smoother.fit_column_with_lambda(scores.col(0), &[1e12]).unwrap();
        let length = norm(&fit.residuals);
        for (a, b) in fit.residuals.iter().zip(linear.unit_residuals.col(0)) {
            assert!((a / length - b).abs() < 1e-6);
        }
        assert!((fit.edf - 2.0).abs() < 1e-4);
    }

    #[test]
    fn identity_permutation_reproduces_gam_residuals() {
        // offset + M e equals e: the Freedman–Lane copy of the unpermuted data is the data.
        let n = 30;
        let mut rng = Xoshiro256pp::seed_from_u64(8);
        let z: Vec<f64> = (0..n).map(|i| (i as f64 / 6.0).tanh()).collect();
        let scores = Mat::from_col_major(
            n,
            2,
            (0..2 * n)
                .map(|i| z[i % n].powi(2) + 0.1 * rng.next_normal())
                .collect(),
        )
        .unwrap();
        let covar = Mat::from_columns(n, &[&z]).unwrap();
        let run = residualise_run(
            &scores,
            &covar,
            Method::Pearson,
            &Control::Gam(GamOptions::default()),
        )
        .unwrap();
        let column = &run.columns[1];
        let mut v = run.unit_residuals.col(1).to_vec();
        column.maker.apply_in_place(&mut v);
        for ((x, o), e) in v.iter().zip(&column.offset).zip(run.unit_residuals.col(1)) {
            assert!((x + o - e).abs() < 1e-10);
        }
        assert!(run.control_df.iter().all(|d| *d >= 1.0 - 1e-9));
    }
}
