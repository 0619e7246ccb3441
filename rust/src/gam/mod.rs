//! Penalised regression spline (GAM) control: residuals of columns on smooth functions of the controls.
//!
//! The model for one column `y` given controls `z_1 … z_q` is mgcv's Gaussian additive model
//! `y ~ s(z_1, k, bs = "cr") + … + s(z_q, k, bs = "cr")` (or `bs = "tp"`): an intercept plus one penalised
//! regression spline per control (see `gam/basis.rs` for the constructions, identical to mgcv's),
//! coefficients minimising `‖y − Xβ‖² + Σ_j λ_j βᵀ S_j β`, smoothing parameters chosen per column by
//!
//! - GCV (mgcv `method = "GCV.Cp"`, scale unknown, γ = 1): `V_g(λ) = n ‖y − A_λ y‖² / (n − tr A_λ)²`, or
//! - REML (mgcv `method = "REML"`): the negative restricted log likelihood with the scale profiled out,
//!   `V_r(λ) = ½[(n − M_p)(1 + log(2π D_p/(n − M_p))) + log|XᵀX + S_λ| − log|S_λ|₊]`, where
//!   `D_p = ‖y − Xβ̂‖² + β̂ᵀ S_λ β̂`, `S_λ = Σ λ_j S_j` and `M_p = 1 + q` is the dimension of the
//!   unpenalised space (intercept and one straight line per control). The value is mgcv's `gcv.ubre`.
//!
//! The effective degrees of freedom are `tr A_λ` (intercept included, as mgcv's `sum(edf)`), between
//! `1 + q` (every smooth a straight line, λ → ∞) and the number of coefficients (λ → 0); the residual
//! degrees of freedom are `n − tr A_λ` (mgcv's `df.residual`).
//!
//! **Shared factorisation.** The smoother depends only on the controls, so [`GamSmoother::new`] does all
//! the matrix work once. With `X = Q_X R` (thin QR), `B = RᵀR + Σ_j S_j = E diag(b) Eᵀ`, `T = E diag(b)^{-½}`
//! and the SVD `R T = W Σ Vᵀ`, the columns of `U = Q_X W` are an orthonormal basis of the model space in
//! which the penalty is `P_j = Gᵀ S_j G`, `G = T V Σ⁻¹`. For one control `P = diag(σ_i⁻² − 1)`
//! (Demmler–Reinsch form, computed without inverting `R`, so it stays accurate when `X` is ill-conditioned),
//! and a column costs `O(n r)` to project (`e = Uᵀy`) plus `O(r)` per trial `λ`:
//! `fitted = U diag(1/(1 + λ s_i)) e`, `tr A = Σ 1/(1 + λ s_i)`, `‖y − fitted‖² = ‖y − U e‖² +
//! Σ e_i² (λ s_i/(1 + λ s_i))²`. With several controls a trial factors the r × r matrix `I + Σ λ_j P_j`;
//! its inverse, trace and determinant on a grid of `log λ` vectors are computed once in
//! [`GamSmoother::new`], so that scoring a column on the whole grid costs one r × r product per point.
//! See `gam/search.rs` for the optimisation over `log λ`.
//!
//! **Global search.** GCV (and, less often, REML) can have several local minima in `log λ`, typically on
//! short trajectories with tied control values. mgcv's Newton iterations stop at the first they reach;
//! this module searches globally, so its optimum is never worse than mgcv's by mgcv's own criterion and, on
//! such data, sometimes better (with a different fit). At mgcv's λ the fits agree to rounding.
//!
//! **Fixed smoother.** For inference by permutation the smoother chosen on the observed data can be reused:
//! [`GamSmoother::fixed`] returns the linear map `y ↦ A_λ y` (and the residual maker `I − A_λ`) at given λ,
//! `O(n r)` per application. Refitting λ on every permuted column costs about the same again plus the
//! search (`O(r)` per trial λ with one control), so both are cheap; refitting reproduces the selection
//! step, reuse keeps the residual-maker fixed as in the linear Freedman–Lane scheme.
//!
//! **Capped EDF.** On short trajectories the criterion can spend nearly every degree of freedom (GCV at
//! n = 11 takes up to 9), leaving a partial correlation nothing to be tested on. [`GamOptions::max_edf`]
//! caps `tr A_λ` (default [`default_max_edf`]): when the optimum spends more, all `log λ_j` are raised
//! together, by bisection, until the EDF equals the cap (the EDF falls monotonically along that ray). The
//! capped fit is mgcv's `gam(…, sp = λ)` at the λ returned.
//!
//! **Bad input.** Non-finite values, a constant control, a control with fewer than 3 distinct values,
//! collinear controls and too few rows are errors. When a control has fewer distinct values than `k` (or,
//! with one control, `k >= n`), `k` is lowered to what the data support, as the caller can see from
//! [`GamSmoother::k_used`]; mgcv would stop with an error there instead.
//!
//! References: Wood, S. N. (2017) *Generalized Additive Models: An Introduction with R*, 2nd ed., CRC
//! (§4.2, §5.3.1, §6.2); Wood, S. N. (2011) Fast stable restricted maximum likelihood and marginal likelihood
//! estimation of semiparametric generalized linear models, *JRSS B* 73(1), 3–36.
//!
//! Size: one module of ~1,090 lines because the smoother ([`GamSmoother`], [`FixedSmoother`]) and the
//! Demmler–Reinsch reparametrisation and model matrix it is built on share private types (`Reparametrisation`,
//! `GridPoint`, `Evaluation`); the bases (`basis.rs`), the smoothing-parameter search (`search.rs`) and the tests
//! (`tests.rs`) are their own files.

mod basis;
mod search;

use nalgebra::{DMatrix, DVector, SymmetricEigen, SVD};
use rayon::prelude::*;

use crate::choice::{self, Choice};
use crate::error::{Result, StatsError};
use crate::matrix::{check_finite, dot, Mat};
use crate::residualise::column_name;

/// mgcv's default basis dimension for `s(z, bs = "cr")`.
pub const DEFAULT_K: usize = 10;

/// Singular values of `R T` (all in `(0, 1]`) below this are directions the data cannot see; they are
/// dropped (their coefficients would be shrunk to zero by any positive λ anyway).
const MIN_SINGULAR_VALUE: f64 = 1e-7;

/// `log λ` search range: from `λ s_max = 1e-4` (interpolation: every weight `1/(1 + λ s_i)` above 0.9999)
/// to `λ s_min = 1e8` (a straight line: EDF within `1e-8 (k − 2)` of the null-space dimension), where `s`
/// are the nonzero penalty eigenvalues in the orthonormal model coordinates.
const SEARCH_BELOW: f64 = 1e-4;
const SEARCH_ABOVE: f64 = 1e8;

/// Several controls: the most points of the shared `log λ` grid (fewer when the r × r inverses stored per
/// point would pass [`MAX_GRID_VALUES`] values), and its coarsest allowed step.
const MAX_GRID_POINTS: usize = 1600;
const MAX_GRID_VALUES: usize = 4_000_000;
const MIN_GRID_STEP: f64 = 0.5;

/// How the smoothing parameter is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SmoothMethod {
    /// Generalised cross-validation, mgcv's `method = "GCV.Cp"` with unknown scale.
    #[default]
    Gcv,
    /// Restricted maximum likelihood, mgcv's `method = "REML"`.
    Reml,
}

impl Choice for SmoothMethod {
    const OPTION: &'static str = "gam_method";
    const WHAT: &'static str = "smoothing-parameter method";
    const NAMES: &'static [(&'static str, Self)] =
        &[("gcv", SmoothMethod::Gcv), ("reml", SmoothMethod::Reml)];
}

impl SmoothMethod {
    pub fn name(self) -> &'static str {
        choice::name(self)
    }
}

/// The spline basis of each smooth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Basis {
    /// mgcv's cubic regression spline, `bs = "cr"`.
    #[default]
    CubicRegression,
    /// mgcv's thin plate regression spline, `bs = "tp"` (mgcv's default basis), for at most 2000 distinct
    /// control values.
    ThinPlate,
}

/// mgcv's names: `"cr"` and `"tp"`.
impl Choice for Basis {
    const OPTION: &'static str = "gam_basis";
    const WHAT: &'static str = "spline basis";
    const NAMES: &'static [(&'static str, Self)] =
        &[("cr", Basis::CubicRegression), ("tp", Basis::ThinPlate)];
}

impl Basis {
    pub fn name(self) -> &'static str {
        choice::name(self)
    }
}

/// The default cap on a GAM fit's effective degrees of freedom (intercept included) with `n` rows and `q`
/// controls: `1 + q · max(1, n / 4)`, i.e. each smooth may spend at most one degree of freedom per four rows
/// (and always at least a straight line's one). At n = 11 and one control that is 3.75 (the criterion alone
/// can spend 9 of 11), so a partial correlation keeps `n − 2 − (EDF − 1) ≥ 6.25` degrees of freedom; from
/// n = 36 on the cap is above what a basis of k = 10 can spend. Chosen by measurement (sieve test of a null
/// pair at n = 11, saturating ID effect, AR(1) φ = 0.9, 400 runs): the cap n/5 (3.2) left enough of the curve
/// in the residuals to reject 0.21 of true nulls, n/4 rejects 0.05, n/6 0.60; with a linear ID effect all
/// three reject ≤ 0.04.
pub fn default_max_edf(n: usize, q: usize) -> f64 {
    1.0 + q as f64 * (n as f64 / DEFAULT_ROWS_PER_EDF).max(1.0)
}

/// Rows per effective degree of freedom of [`default_max_edf`].
pub const DEFAULT_ROWS_PER_EDF: f64 = 4.0;

/// A cap on the effective degrees of freedom `tr A_λ` (intercept included) of a fit.
///
/// When the criterion's optimum spends more, every `log λ_j` is raised by the same amount (bisection: the EDF
/// falls monotonically as all smoothing parameters grow together) until the EDF equals the cap.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum EdfCap {
    /// The criterion's optimum, whatever it spends.
    Off,
    /// [`default_max_edf`] of the number of rows and controls.
    #[default]
    Auto,
    /// At most this many, at least `1 + q` (every smooth a straight line).
    At(f64),
}

/// The caps `max_edf` names rather than gives as a number: `"auto"`.
impl Choice for EdfCap {
    const OPTION: &'static str = "max_edf";
    const WHAT: &'static str = "cap";
    const NAMES: &'static [(&'static str, Self)] = &[("auto", EdfCap::Auto)];

    fn unknown(name: &str) -> StatsError {
        StatsError::invalid(
            Self::OPTION,
            format!("must be a number, \"auto\" or None, got {name:?}"),
        )
    }
}

impl EdfCap {
    /// The cap for `n` rows and `q` controls (infinite when off).
    pub fn resolve(self, n: usize, q: usize) -> f64 {
        match self {
            EdfCap::Off => f64::INFINITY,
            EdfCap::Auto => default_max_edf(n, q),
            EdfCap::At(value) => value,
        }
    }
}

/// Options of the smoother.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GamOptions {
    /// Basis dimension per control (number of knots), at least 3; mgcv's default is 10.
    pub k: usize,
    pub method: SmoothMethod,
    pub basis: Basis,
    /// Cap on the fit's effective degrees of freedom (default [`EdfCap::Auto`]).
    pub max_edf: EdfCap,
}

impl Default for GamOptions {
    fn default() -> Self {
        GamOptions {
            k: DEFAULT_K,
            method: SmoothMethod::Gcv,
            basis: Basis::CubicRegression,
            max_edf: EdfCap::Auto,
        }
    }
}

/// The fit of one column.
#[derive(Debug, Clone, PartialEq)]
pub struct GamFit {
    pub fitted: Vec<f64>,
    /// `y − fitted`.
    pub residuals: Vec<f64>,
    /// Effective degrees of freedom `tr A_λ`, intercept included (mgcv's `sum(edf)`), in `[1 + q, p]`.
    pub edf: f64,
    /// `n − edf`, mgcv's residual degrees of freedom.
    pub residual_df: f64,
    /// Chosen smoothing parameter per control, on mgcv's `sp` scale.
    pub lambda: Vec<f64>,
    /// Criterion at the optimum: GCV score, or REML's negative log restricted likelihood (mgcv's `gcv.ubre`).
    pub score: f64,
    /// Residual sum of squares.
    pub rss: f64,
    /// Whether the EDF cap raised λ above the criterion's optimum.
    pub capped: bool,
}

/// The penalty in the orthonormal model coordinates.
#[derive(Debug, Clone)]
enum Penalty {
    /// One control: `P = diag(s)`.
    Diagonal(Vec<f64>),
    /// Several controls: one r × r matrix per control.
    Dense(Vec<DMatrix<f64>>),
}

/// A GAM smoother for one set of controls, factorised once and applied to any number of columns.
#[derive(Debug, Clone)]
pub struct GamSmoother {
    n: usize,
    options: GamOptions,
    /// The resolved EDF cap (infinite when off).
    max_edf: f64,
    k_used: Vec<usize>,
    knots: Vec<Vec<f64>>,
    /// n × r orthonormal basis `U` of the model space.
    basis: DMatrix<f64>,
    penalty: Penalty,
    /// Rank of each control's penalty.
    penalty_ranks: Vec<usize>,
    /// `log|S_j|₊` of each control's penalty.
    penalty_log_dets: Vec<f64>,
    /// `log|XᵀX + S_λ| − log|I + P_λ|`, which does not depend on λ.
    log_det_offset: f64,
    /// Dimension `M_p` of the unpenalised space.
    null_dim: usize,
    /// `log λ` search bounds per control.
    bounds: Vec<(f64, f64)>,
    /// Several controls: the shared grid of trial `log λ` vectors, precomputed once for all columns.
    grid: Vec<GridPoint>,
    /// Grid step per control (the coordinate-descent window).
    grid_step: Vec<f64>,
}

/// One point of the shared grid: `(I + Σ λ_j P_j)⁻¹`, its trace and `log|I + Σ λ_j P_j|`.
#[derive(Debug, Clone)]
struct GridPoint {
    rho: Vec<f64>,
    inverse: DMatrix<f64>,
    edf: f64,
    log_det: f64,
}

/// What one trial λ gives for one column.
struct Evaluation {
    rss: f64,
    edf: f64,
    /// Penalised residual sum of squares `D_p`.
    penalised_rss: f64,
    /// `log|I + P_λ|`.
    log_det: f64,
}

impl GamSmoother {
    /// Builds the smoother of the `n × q` control matrix `control` (one column per control), in four steps:
    /// the spline basis of each control (`smooth_terms`), the additive model matrix and its embedded
    /// penalties (`model_matrix`), the Demmler–Reinsch reparametrisation that makes every λ a diagonal or
    /// small dense problem (`demmler_reinsch`, `reparametrised_penalties`), and the `log λ` search space
    /// shared by all columns (`search_space`).
    ///
    /// `name` is the argument name used in error messages.
    pub fn new(control: &Mat, options: &GamOptions, name: &str) -> Result<Self> {
        let (n, q) = (control.nrows(), control.ncols());
        let terms = smooth_terms(control, options, name)?;
        let (x, penalties) = model_matrix(&terms, n, name)?;
        let reparametrised = demmler_reinsch(&x, &penalties, name)?;
        let p = x.ncols();
        let rank = reparametrised.sigma.len();
        let mut penalty_ranks: Vec<usize> = terms.iter().map(|t| t.penalty_rank()).collect();
        if q == 1 {
            // Directions dropped for lack of data carried penalty only.
            penalty_ranks[0] -= (p - rank).min(penalty_ranks[0]);
        }
        let penalty_log_dets = terms
            .iter()
            .zip(&penalty_ranks)
            .map(|(term, &rank)| penalty_log_det(term, rank))
            .collect();
        let (penalty, eigenvalues) =
            reparametrised_penalties(&reparametrised, &penalties, &penalty_ranks, name)?;
        let (bounds, grid, grid_step) = search_space(&penalty, &eigenvalues, &penalty_ranks, rank);
        Ok(GamSmoother {
            n,
            options: *options,
            max_edf: checked_cap(options.max_edf, n, q)?,
            k_used: terms.iter().map(|t| t.k).collect(),
            knots: terms.into_iter().map(|t| t.knots).collect(),
            basis: reparametrised.basis,
            penalty,
            penalty_ranks,
            penalty_log_dets,
            log_det_offset: reparametrised.log_det_offset,
            null_dim: 1 + q,
            bounds,
            grid,
            grid_step,
        })
    }

    /// Number of rows.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of controls.
    pub fn q(&self) -> usize {
        self.k_used.len()
    }

    pub fn options(&self) -> &GamOptions {
        &self.options
    }

    /// Basis dimension actually used per control; below `options().k` where the data support fewer knots.
    pub fn k_used(&self) -> &[usize] {
        &self.k_used
    }

    /// Whether `k` had to be lowered for any control.
    pub fn k_reduced(&self) -> bool {
        self.k_used.iter().any(|&k| k < self.options.k)
    }

    /// Knot locations per control.
    pub fn knots(&self) -> &[Vec<f64>] {
        &self.knots
    }

    /// Number of model coefficients (intercept included) the data can identify.
    pub fn n_coefficients(&self) -> usize {
        self.basis.ncols()
    }

    /// Fits one column, choosing λ by the smoother's method. `y` must have `n` finite values.
    pub fn fit_column(&self, y: &[f64]) -> Result<GamFit> {
        self.check_column(y, "y")?;
        let (e, rss0) = self.project(y);
        let rho = match &self.penalty {
            Penalty::Diagonal(_) => {
                let (lo, hi) = self.bounds[0];
                let (rho, _) =
                    search::minimise_1d(|r| self.score(&self.evaluate(&[r], &e, rss0), &[r]), lo, hi);
                vec![rho]
            }
            Penalty::Dense(_) => {
                let mut rho = self.best_grid_point(&e, rss0);
                search::coordinate_descent(
                    |r| self.score(&self.evaluate(r, &e, rss0), r),
                    &mut rho,
                    &self.bounds,
                    &self.grid_step,
                );
                rho
            }
        };
        let (rho, capped) = self.capped(rho, &e, rss0);
        let mut fit = self.fit_at(y, &e, rss0, &rho)?;
        fit.capped = capped;
        Ok(fit)
    }

    /// The resolved cap on the effective degrees of freedom (infinite when off).
    pub fn max_edf(&self) -> f64 {
        self.max_edf
    }

    /// `rho` itself when its EDF is within the cap; otherwise `rho + t` (every `log λ_j` raised by the same
    /// `t`) with `t` found by bisection so that the EDF equals the cap, and `true`. The EDF does not depend on
    /// the column (`e` only completes the evaluation).
    fn capped(&self, rho: Vec<f64>, e: &[f64], rss0: f64) -> (Vec<f64>, bool) {
        let edf_at = |t: f64| {
            let shifted: Vec<f64> = rho.iter().map(|r| r + t).collect();
            self.evaluate(&shifted, e, rss0).edf
        };
        let cap = self.max_edf;
        let optimum = edf_at(0.0);
        if optimum.is_nan() || optimum <= cap + CAP_TOLERANCE {
            return (rho, false);
        }
        // Raise t until the EDF is within the cap (the cap is at least the null-space dimension, reached only
        // as λ → ∞: stop where every weight is below 1e-8 · its value at λ = 1).
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        while edf_at(hi) > cap && hi < MAX_CAP_SHIFT {
            lo = hi;
            hi *= 2.0;
        }
        for _ in 0..100 {
            if hi - lo < 1e-10 {
                break;
            }
            let mid = 0.5 * (lo + hi);
            if edf_at(mid) > cap {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (rho.iter().map(|r| r + hi).collect(), true)
    }

    /// Fits one column at given smoothing parameters (one per control, finite and positive).
    pub fn fit_column_with_lambda(&self, y: &[f64], lambda: &[f64]) -> Result<GamFit> {
        self.check_column(y, "y")?;
        let rho = self.log_lambda(lambda)?;
        let (e, rss0) = self.project(y);
        self.fit_at(y, &e, rss0, &rho)
    }

    /// Fits every column of `ys` (n × m) in parallel; results are in column order and do not depend on
    /// the number of threads. `name` names `ys` in errors.
    pub fn residualise_columns(&self, ys: &Mat, name: &str) -> Result<Vec<GamFit>> {
        if ys.nrows() != self.n {
            return Err(StatsError::invalid(
                name,
                format!("has {} rows but the control has {}", ys.nrows(), self.n),
            ));
        }
        let m = ys.ncols();
        (0..m)
            .into_par_iter()
            .map(|j| {
                let column = ys.col(j);
                check_finite(&column_name(name, j, m), column)?;
                self.fit_column(column)
            })
            .collect()
    }

    /// The linear smoother `y ↦ A_λ y` at fixed smoothing parameters (one per control), e.g. those a
    /// [`GamFit`] chose, for reuse on permuted or resampled data.
    pub fn fixed(&self, lambda: &[f64]) -> Result<FixedSmoother> {
        let rho = self.log_lambda(lambda)?;
        let (basis, weights): (DMatrix<f64>, Vec<f64>) = match &self.penalty {
            Penalty::Diagonal(s) => {
                let weights = s.iter().map(|s| 1.0 / (1.0 + lambda[0] * s)).collect();
                (self.basis.clone(), weights)
            }
            Penalty::Dense(_) => {
                let inverse = self
                    .system(&rho)
                    .cholesky()
                    .ok_or_else(|| {
                        StatsError::degenerate(
                            "lambda",
                            "gives a penalised system that is not positive definite",
                        )
                    })?
                    .inverse();
                let inverse = (&inverse + inverse.transpose()) * 0.5;
                let eig = SymmetricEigen::try_new(inverse, f64::EPSILON, 10_000).ok_or_else(|| {
                    StatsError::degenerate("lambda", "eigen-decomposition of the smoother did not converge")
                })?;
                (
                    &self.basis * eig.eigenvectors,
                    eig.eigenvalues.iter().copied().collect(),
                )
            }
        };
        let edf = weights.iter().sum();
        Ok(FixedSmoother {
            n: self.n,
            basis,
            weights,
            edf,
            lambda: lambda.to_vec(),
        })
    }

    fn check_column(&self, y: &[f64], name: &str) -> Result<()> {
        if y.len() != self.n {
            return Err(StatsError::invalid(
                name,
                format!("has {} values but the control has {} rows", y.len(), self.n),
            ));
        }
        check_finite(name, y)
    }

    fn log_lambda(&self, lambda: &[f64]) -> Result<Vec<f64>> {
        if lambda.len() != self.q() {
            return Err(StatsError::invalid(
                "lambda",
                format!(
                    "has {} values, expected one per control ({})",
                    lambda.len(),
                    self.q()
                ),
            ));
        }
        if let Some(bad) = lambda.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
            return Err(StatsError::invalid(
                "lambda",
                format!("must be finite and positive, got {bad}"),
            ));
        }
        Ok(lambda.iter().map(|l| l.ln()).collect())
    }

    /// `e = Uᵀ y` and the residual sum of squares of the unpenalised fit, `‖y − U e‖²`.
    fn project(&self, y: &[f64]) -> (Vec<f64>, f64) {
        let e: Vec<f64> = self.basis.column_iter().map(|u| dot(u.as_slice(), y)).collect();
        let mut residual = y.to_vec();
        for (u, ei) in self.basis.column_iter().zip(&e) {
            for (r, ui) in residual.iter_mut().zip(u.iter()) {
                *r -= ei * ui;
            }
        }
        (e, dot(&residual, &residual))
    }

    /// `I + Σ λ_j P_j` for several controls.
    fn system(&self, rho: &[f64]) -> DMatrix<f64> {
        match &self.penalty {
            Penalty::Dense(matrices) => penalised_system(matrices, rho, self.basis.ncols()),
            Penalty::Diagonal(_) => DMatrix::identity(self.basis.ncols(), self.basis.ncols()),
        }
    }

    /// The `log λ` vector of the shared grid with the lowest criterion for this column.
    fn best_grid_point(&self, e: &[f64], rss0: f64) -> Vec<f64> {
        let ee: f64 = dot(e, e);
        let mut best = (f64::INFINITY, 0usize);
        for (index, point) in self.grid.iter().enumerate() {
            let (mut e_gamma, mut distance) = (0.0, 0.0);
            for (i, ei) in e.iter().enumerate() {
                let gamma_i = dot(point.inverse.column(i).as_slice(), e);
                e_gamma += ei * gamma_i;
                distance += (ei - gamma_i) * (ei - gamma_i);
            }
            let ev = Evaluation {
                rss: rss0 + distance,
                edf: point.edf,
                penalised_rss: rss0 + ee - e_gamma,
                log_det: point.log_det,
            };
            let score = self.score(&ev, &point.rho);
            if score < best.0 {
                best = (score, index);
            }
        }
        match self.grid.get(best.1) {
            Some(point) => point.rho.clone(),
            None => self.bounds.iter().map(|(lo, hi)| 0.5 * (lo + hi)).collect(),
        }
    }

    fn evaluate(&self, rho: &[f64], e: &[f64], rss0: f64) -> Evaluation {
        match &self.penalty {
            Penalty::Diagonal(s) => {
                let lambda = rho[0].exp();
                let (mut rss, mut edf, mut penalised, mut log_det) = (rss0, 0.0, rss0, 0.0);
                for (si, ei) in s.iter().zip(e) {
                    let a = lambda * si;
                    let shrink = a / (1.0 + a);
                    rss += ei * ei * shrink * shrink;
                    penalised += ei * ei * shrink;
                    edf += 1.0 / (1.0 + a);
                    log_det += a.ln_1p();
                }
                Evaluation {
                    rss,
                    edf,
                    penalised_rss: penalised,
                    log_det,
                }
            }
            Penalty::Dense(_) => {
                let Some(chol) = self.system(rho).cholesky() else {
                    return Evaluation {
                        rss: f64::NAN,
                        edf: f64::NAN,
                        penalised_rss: f64::NAN,
                        log_det: f64::NAN,
                    };
                };
                let e = DVector::from_column_slice(e);
                let gamma = chol.solve(&e);
                let log_det = 2.0 * chol.l_dirty().diagonal().iter().map(|v| v.ln()).sum::<f64>();
                let edf = chol.inverse().trace();
                let rss = rss0 + (&e - &gamma).norm_squared();
                let penalised = rss0 + e.dot(&e) - e.dot(&gamma);
                Evaluation {
                    rss,
                    edf,
                    penalised_rss: penalised,
                    log_det,
                }
            }
        }
    }

    fn score(&self, ev: &Evaluation, rho: &[f64]) -> f64 {
        let n = self.n as f64;
        match self.options.method {
            SmoothMethod::Gcv => {
                let denominator = n - ev.edf;
                if denominator > 0.0 {
                    n * ev.rss / (denominator * denominator)
                } else {
                    f64::INFINITY
                }
            }
            SmoothMethod::Reml => {
                let residual_dim = n - self.null_dim as f64;
                let log_det_penalty: f64 = rho
                    .iter()
                    .zip(&self.penalty_ranks)
                    .zip(&self.penalty_log_dets)
                    .map(|((r, &rank), log_det)| rank as f64 * r + log_det)
                    .sum();
                let dp = ev.penalised_rss.max(f64::MIN_POSITIVE);
                0.5 * (residual_dim * (1.0 + (2.0 * std::f64::consts::PI * dp / residual_dim).ln())
                    + self.log_det_offset
                    + ev.log_det
                    - log_det_penalty)
            }
        }
    }

    fn fit_at(&self, y: &[f64], e: &[f64], rss0: f64, rho: &[f64]) -> Result<GamFit> {
        let coefficients: Vec<f64> = match &self.penalty {
            Penalty::Diagonal(s) => {
                let lambda = rho[0].exp();
                s.iter().zip(e).map(|(si, ei)| ei / (1.0 + lambda * si)).collect()
            }
            Penalty::Dense(_) => {
                let chol = self.system(rho).cholesky().ok_or_else(|| {
                    StatsError::degenerate("lambda", "gives a penalised system that is not positive definite")
                })?;
                chol.solve(&DVector::from_column_slice(e))
                    .iter()
                    .copied()
                    .collect()
            }
        };
        let mut fitted = vec![0.0; self.n];
        for (u, c) in self.basis.column_iter().zip(&coefficients) {
            for (f, ui) in fitted.iter_mut().zip(u.iter()) {
                *f += c * ui;
            }
        }
        let residuals: Vec<f64> = y.iter().zip(&fitted).map(|(yi, fi)| yi - fi).collect();
        let ev = self.evaluate(rho, e, rss0);
        Ok(GamFit {
            rss: dot(&residuals, &residuals),
            score: self.score(&ev, rho),
            edf: ev.edf,
            residual_df: self.n as f64 - ev.edf,
            lambda: rho.iter().map(|r| r.exp()).collect(),
            fitted,
            residuals,
            capped: false,
        })
    }
}

/// `y ↦ A_λ y = Σ_i w_i u_i u_iᵀ y` with orthonormal `u_i` and weights `w_i ∈ [0, 1]`.
#[derive(Debug, Clone)]
pub struct FixedSmoother {
    n: usize,
    basis: DMatrix<f64>,
    weights: Vec<f64>,
    edf: f64,
    lambda: Vec<f64>,
}

impl FixedSmoother {
    pub fn n(&self) -> usize {
        self.n
    }

    /// `tr A_λ`.
    pub fn edf(&self) -> f64 {
        self.edf
    }

    pub fn lambda(&self) -> &[f64] {
        &self.lambda
    }

    /// Writes `A_λ y` into `out` (both of length n).
    pub fn fitted_into(&self, y: &[f64], out: &mut [f64]) {
        debug_assert_eq!(y.len(), self.n);
        out.iter_mut().for_each(|o| *o = 0.0);
        for (u, w) in self.basis.column_iter().zip(&self.weights) {
            let c = w * dot(u.as_slice(), y);
            for (o, ui) in out.iter_mut().zip(u.iter()) {
                *o += c * ui;
            }
        }
    }

    /// Writes the residuals `(I − A_λ) y` into `out` (both of length n).
    pub fn residualise_into(&self, y: &[f64], out: &mut [f64]) {
        self.fitted_into(y, out);
        for (o, yi) in out.iter_mut().zip(y) {
            *o = yi - *o;
        }
    }

    /// The residuals `(I − A_λ) y`, checking `y`.
    pub fn residualise(&self, y: &[f64]) -> Result<Vec<f64>> {
        if y.len() != self.n {
            return Err(StatsError::invalid(
                "y",
                format!("has {} values, expected {}", y.len(), self.n),
            ));
        }
        check_finite("y", y)?;
        let mut out = vec![0.0; self.n];
        self.residualise_into(y, &mut out);
        Ok(out)
    }

    /// The influence (hat) matrix `A_λ`, n × n, symmetric.
    pub fn hat_matrix(&self) -> Mat {
        let mut scaled = self.basis.clone();
        for (mut column, w) in scaled.column_iter_mut().zip(&self.weights) {
            column *= *w;
        }
        let hat = scaled * self.basis.transpose();
        let mut out = Mat::zeros(self.n, self.n);
        for j in 0..self.n {
            out.col_mut(j).copy_from_slice(hat.column(j).as_slice());
        }
        out
    }
}

/// EDF above the cap by less than this counts as within it.
const CAP_TOLERANCE: f64 = 1e-9;
/// The largest common shift of `log λ` the cap's bisection tries (λ multiplied by e^128).
const MAX_CAP_SHIFT: f64 = 128.0;

/// The resolved cap of `cap` for `n` rows and `q` controls, refusing one below a straight line per control.
fn checked_cap(cap: EdfCap, n: usize, q: usize) -> Result<f64> {
    let value = cap.resolve(n, q);
    let floor = (1 + q) as f64;
    if value.is_nan() || value < floor {
        return Err(StatsError::invalid(
            "max_edf",
            format!("must be at least {floor} (an intercept and a straight line per control), got {value}"),
        ));
    }
    Ok(value)
}

/// Step 1: checks the controls and builds each one's spline term (basis and penalty), its basis dimension
/// lowered to the number of distinct values (and, with one control, to n − 1).
fn smooth_terms(control: &Mat, options: &GamOptions, name: &str) -> Result<Vec<basis::SmoothTerm>> {
    let (n, q) = (control.nrows(), control.ncols());
    if q == 0 {
        return Err(StatsError::invalid(
            name,
            "needs at least one control column for fit=\"gam\"",
        ));
    }
    if options.k < 3 {
        return Err(StatsError::invalid(
            "k",
            format!("must be at least 3 for a cubic spline, got {}", options.k),
        ));
    }
    if n < 4 {
        return Err(StatsError::invalid(
            name,
            format!("has {n} rows; a GAM fit needs at least 4"),
        ));
    }
    let mut terms = Vec::with_capacity(q);
    for j in 0..q {
        let label = column_name(name, j, q);
        let column = control.col(j);
        check_finite(&label, column)?;
        let distinct = basis::distinct_sorted(column);
        if distinct.len() == 1 {
            return Err(StatsError::degenerate(
                label,
                "is constant, so a smooth of it is not identifiable",
            ));
        }
        if distinct.len() < 3 {
            return Err(StatsError::degenerate(
                label,
                format!(
                    "has {} distinct values; a cubic regression spline needs at least 3",
                    distinct.len()
                ),
            ));
        }
        let mut k = options.k.min(distinct.len());
        if q == 1 {
            // Keep at least one residual degree of freedom.
            k = k.min(n - 1);
        }
        terms.push(match options.basis {
            Basis::CubicRegression => basis::cr_term(column, &distinct, k)?,
            Basis::ThinPlate => basis::tp_term(column, &distinct, k)?,
        });
    }
    Ok(terms)
}

/// Step 2: the model matrix [1, X_1, …, X_q] (n × p) and each term's penalty embedded in p × p.
fn model_matrix(
    terms: &[basis::SmoothTerm],
    n: usize,
    name: &str,
) -> Result<(DMatrix<f64>, Vec<DMatrix<f64>>)> {
    let p = 1 + terms.iter().map(|t| t.k - 1).sum::<usize>();
    if p >= n {
        return Err(StatsError::invalid(
            name,
            format!("has {n} rows, too few for the {p} coefficients of the additive model; lower k"),
        ));
    }
    let mut x = DMatrix::<f64>::zeros(n, p);
    x.column_mut(0).fill(1.0);
    let mut penalties = Vec::with_capacity(terms.len());
    let mut offset = 1;
    for term in terms {
        let width = term.k - 1;
        x.view_mut((0, offset), (n, width)).copy_from(&term.x);
        let mut s = DMatrix::<f64>::zeros(p, p);
        s.view_mut((offset, offset), (width, width)).copy_from(&term.s);
        penalties.push(s);
        offset += width;
    }
    Ok((x, penalties))
}

/// The Demmler–Reinsch reparametrisation of a model matrix X = Q R with penalties S_j: with
/// B = RᵀR + Σ S_j = T⁻ᵀ T⁻¹ (eigen-decomposition) and R T = W Σ Vᵀ (SVD), the fit at any λ lives in the
/// orthonormal basis U = Q W, where the unit-λ penalty is diagonal.
struct Reparametrisation {
    /// n × r orthonormal basis U of the model space (directions with singular value above
    /// [`MIN_SINGULAR_VALUE`]).
    basis: DMatrix<f64>,
    /// The kept singular values, capped at 1.
    sigma: Vec<f64>,
    /// Indices of the kept singular values.
    keep: Vec<usize>,
    /// T (p × p).
    t: DMatrix<f64>,
    /// Vᵀ of the SVD.
    v_t: DMatrix<f64>,
    /// `log|B| + 2 Σ log σ`, the λ-free part of the REML log-determinant.
    log_det_offset: f64,
}

/// Step 3: the Demmler–Reinsch reparametrisation of `x` and `penalties`; collinear controls (B singular)
/// are an error.
fn demmler_reinsch(x: &DMatrix<f64>, penalties: &[DMatrix<f64>], name: &str) -> Result<Reparametrisation> {
    let p = x.ncols();
    let qr = x.clone().qr();
    let q_x = qr.q();
    let r = qr.r();
    let mut b = r.transpose() * &r;
    for s in penalties {
        b += s;
    }
    let b = (&b + b.transpose()) * 0.5;
    let eig = SymmetricEigen::try_new(b, f64::EPSILON, 10_000).ok_or_else(|| {
        StatsError::degenerate(name, "eigen-decomposition of the GAM system did not converge")
    })?;
    let b_max = eig.eigenvalues.max();
    if eig.eigenvalues.iter().any(|&v| v <= b_max * 1e-12 || v.is_nan()) {
        return Err(StatsError::degenerate(
            name,
            "controls are collinear, so their smooths are not jointly identifiable",
        ));
    }
    let log_det_b: f64 = eig.eigenvalues.iter().map(|v| v.ln()).sum();
    let mut t = eig.eigenvectors;
    for (mut column, value) in t.column_iter_mut().zip(eig.eigenvalues.iter()) {
        column /= value.sqrt();
    }
    let svd = SVD::try_new(&r * &t, true, true, f64::EPSILON, 10_000)
        .ok_or_else(|| StatsError::degenerate(name, "SVD of the GAM system did not converge"))?;
    let (Some(w), Some(v_t)) = (svd.u, svd.v_t) else {
        return Err(StatsError::degenerate(
            name,
            "SVD of the GAM system returned no vectors",
        ));
    };
    let keep: Vec<usize> = (0..p)
        .filter(|&i| svd.singular_values[i] > MIN_SINGULAR_VALUE)
        .collect();
    let sigma: Vec<f64> = keep.iter().map(|&i| svd.singular_values[i].min(1.0)).collect();
    let basis = &q_x * w.select_columns(&keep);
    let log_det_offset = log_det_b + 2.0 * sigma.iter().map(|s| s.ln()).sum::<f64>();
    Ok(Reparametrisation {
        basis,
        sigma,
        keep,
        t,
        v_t,
        log_det_offset,
    })
}

/// `log|S|₊` of a term's penalty: the sum of the logs of its `rank` largest eigenvalues.
fn penalty_log_det(term: &basis::SmoothTerm, rank: usize) -> f64 {
    let mut values: Vec<f64> = term.s.symmetric_eigenvalues().iter().copied().collect();
    values.sort_by(|a, b| b.total_cmp(a));
    values
        .iter()
        .take(rank)
        .map(|v| v.max(f64::MIN_POSITIVE).ln())
        .sum()
}

/// The penalties in the reparametrised basis, with each one's eigenvalues: diagonal with one control, dense
/// r × r with several. Penalty eigenvalues of the unpenalised directions are zero up to rounding; they are
/// set to exactly zero so that a huge λ leaves those directions alone.
fn reparametrised_penalties(
    dr: &Reparametrisation,
    penalties: &[DMatrix<f64>],
    penalty_ranks: &[usize],
    name: &str,
) -> Result<(Penalty, Vec<Vec<f64>>)> {
    let rank = dr.sigma.len();
    if penalties.len() == 1 {
        let mut s: Vec<f64> = dr.sigma.iter().map(|s| (1.0 / (s * s) - 1.0).max(0.0)).collect();
        let mut order: Vec<usize> = (0..rank).collect();
        order.sort_by(|&a, &b| s[a].total_cmp(&s[b]));
        for &i in order.iter().take(rank.saturating_sub(penalty_ranks[0])) {
            s[i] = 0.0;
        }
        return Ok((Penalty::Diagonal(s.clone()), vec![s]));
    }
    let v = dr.v_t.transpose().select_columns(&dr.keep);
    let mut g = &dr.t * v;
    for (mut column, s) in g.column_iter_mut().zip(&dr.sigma) {
        column /= *s;
    }
    let mut dense = Vec::with_capacity(penalties.len());
    let mut values = Vec::with_capacity(penalties.len());
    for (s, &rank_j) in penalties.iter().zip(penalty_ranks) {
        let m = g.transpose() * s * &g;
        let eig =
            SymmetricEigen::try_new((&m + m.transpose()) * 0.5, f64::EPSILON, 10_000).ok_or_else(|| {
                StatsError::degenerate(name, "eigen-decomposition of a penalty did not converge")
            })?;
        let mut order: Vec<usize> = (0..rank).collect();
        order.sort_by(|&a, &b| eig.eigenvalues[a].total_cmp(&eig.eigenvalues[b]));
        let mut ev: Vec<f64> = eig.eigenvalues.iter().map(|v| v.max(0.0)).collect();
        for &i in order.iter().take(rank.saturating_sub(rank_j)) {
            ev[i] = 0.0;
        }
        let mut scaled = eig.eigenvectors.clone();
        for (mut column, v) in scaled.column_iter_mut().zip(&ev) {
            column *= *v;
        }
        let m = scaled * eig.eigenvectors.transpose();
        dense.push((&m + m.transpose()) * 0.5);
        values.push(ev);
    }
    Ok((Penalty::Dense(dense), values))
}

/// The `log λ` search space, shared by every column: bounds per control from its penalty's eigenvalues
/// and, with several controls, the precomputed grid of trial λ vectors and its step per control.
#[allow(clippy::type_complexity)]
fn search_space(
    penalty: &Penalty,
    eigenvalues: &[Vec<f64>],
    penalty_ranks: &[usize],
    rank: usize,
) -> (Vec<(f64, f64)>, Vec<GridPoint>, Vec<f64>) {
    let bounds: Vec<(f64, f64)> = eigenvalues
        .iter()
        .zip(penalty_ranks)
        .map(|(values, &rank)| search_bounds(values, rank))
        .collect();
    let (grid, grid_step) = match penalty {
        Penalty::Diagonal(_) => (Vec::new(), Vec::new()),
        Penalty::Dense(matrices) => shared_grid(matrices, &bounds, rank),
    };
    (bounds, grid, grid_step)
}

/// `I + Σ_j exp(ρ_j) P_j` (r × r).
fn penalised_system(matrices: &[DMatrix<f64>], rho: &[f64], r: usize) -> DMatrix<f64> {
    let mut a = DMatrix::<f64>::identity(r, r);
    for (p, rho_j) in matrices.iter().zip(rho) {
        a += p * rho_j.exp();
    }
    a
}

/// The shared grid over the box `bounds` (equal steps per control, at least [`MIN_GRID_STEP`], at most
/// [`MAX_GRID_POINTS`] points) with each point's inverse system, EDF and log determinant. Returns the points
/// and the step per control.
fn shared_grid(matrices: &[DMatrix<f64>], bounds: &[(f64, f64)], r: usize) -> (Vec<GridPoint>, Vec<f64>) {
    let q = bounds.len();
    let budget = MAX_GRID_POINTS
        .min(MAX_GRID_VALUES / (r * r).max(1))
        .max(2usize.pow(q as u32));
    let volume: f64 = bounds
        .iter()
        .map(|(lo, hi)| (hi - lo).max(MIN_GRID_STEP))
        .product();
    let step = (volume / budget as f64).powf(1.0 / q as f64).max(MIN_GRID_STEP);
    let axes: Vec<Vec<f64>> = bounds
        .iter()
        .map(|&(lo, hi)| {
            let count = ((hi - lo) / step).ceil().max(1.0) as usize;
            let spacing = (hi - lo) / count as f64;
            (0..=count).map(|i| lo + spacing * i as f64).collect()
        })
        .collect();
    let steps = axes
        .iter()
        .map(|axis| if axis.len() > 1 { axis[1] - axis[0] } else { step })
        .collect();
    let total: usize = axes.iter().map(Vec::len).product();
    let points = (0..total)
        .into_par_iter()
        .filter_map(|flat| {
            let mut rest = flat;
            let rho: Vec<f64> = axes
                .iter()
                .map(|axis| {
                    let value = axis[rest % axis.len()];
                    rest /= axis.len();
                    value
                })
                .collect();
            let chol = penalised_system(matrices, &rho, r).cholesky()?;
            let log_det = 2.0 * chol.l_dirty().diagonal().iter().map(|v| v.ln()).sum::<f64>();
            let inverse = chol.inverse();
            let edf = inverse.trace();
            Some(GridPoint {
                rho,
                inverse,
                edf,
                log_det,
            })
        })
        .collect();
    (points, steps)
}

/// `log λ` bounds from the nonzero penalty eigenvalues (the `rank` largest of `values`).
fn search_bounds(values: &[f64], rank: usize) -> (f64, f64) {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let largest = sorted.first().copied().unwrap_or(1.0);
    let smallest = sorted
        .get(rank.max(1) - 1)
        .copied()
        .unwrap_or(largest)
        .max(largest * 1e-300);
    (
        SEARCH_BELOW.ln() - largest.ln(),
        SEARCH_ABOVE.ln() - smallest.ln(),
    )
}

#[cfg(test)]
mod tests;
