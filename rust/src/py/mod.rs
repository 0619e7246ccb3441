//! The binding layer: the only code that knows Python. It converts arguments, calls the core and maps
//! errors; the orchestration (kernel choice, thread pool, slices) lives in [`crate::batch`].
//!
//! Arrays arrive as numpy arrays (any memory order) and are copied into column-major [`Mat`]s; results go
//! back as frozen result objects holding new numpy arrays. Heavy calls run with the GIL released; the core
//! calls back between slices of work, and the callback takes the GIL to check for Ctrl-C. Every
//! [`StatsError`] becomes a `gengen.errors` exception (`InvalidArgumentError` or `DegenerateDataError`, both
//! `ValueError` subclasses).

use numpy::ndarray::{Array1, Array2, ArrayView2, ShapeBuilder};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArray3, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
};
use pyo3::prelude::*;

mod control;
mod sieve;
mod simulate;

use control::{control_of, ControlArgument};

use crate::adjust::{p_adjust_with as adjust, Adjustment};
use crate::batch::{self, BootstrapRequest, PermutationRequest};
use crate::bootstrap::IntervalMethod;
use crate::control::Control;
use crate::error::StatsError;
use crate::gam::{default_max_edf as max_edf_rule, GamOptions};
use crate::matrix::Mat;
use crate::method::Method;
use crate::pcor::{self, Semi};
use crate::rng::default_block_length as block_rule;

pyo3::import_exception_bound!(gengen.errors, InvalidArgumentError);
pyo3::import_exception_bound!(gengen.errors, DegenerateDataError);

impl From<StatsError> for PyErr {
    fn from(error: StatsError) -> PyErr {
        let message = error.to_string();
        match error {
            StatsError::InvalidArgument { .. } => InvalidArgumentError::new_err(message),
            StatsError::Degenerate { .. } => DegenerateDataError::new_err(message),
        }
    }
}

type CoreResult<T> = PyResult<T>;

/// The callback the core calls between slices of work (on this thread, with the GIL released): it takes the
/// GIL and runs Python's signal handlers, so that Ctrl-C raises `KeyboardInterrupt` out of the call.
fn check_signals() -> PyResult<()> {
    Python::with_gil(|py| py.check_signals())
}

fn to_mat(array: &ArrayView2<'_, f64>) -> Mat {
    let (nrows, ncols) = array.dim();
    let mut data = Vec::with_capacity(nrows * ncols);
    for j in 0..ncols {
        data.extend(array.column(j).iter().copied());
    }
    // The length always matches nrows * ncols, so this cannot fail.
    Mat::from_col_major(nrows, ncols, data).unwrap_or_else(|_| Mat::zeros(nrows, ncols))
}

fn to_numpy(py: Python<'_>, m: &Mat) -> Py<PyArray2<f64>> {
    let array = Array2::from_shape_vec((m.nrows(), m.ncols()).f(), m.as_slice().to_vec())
        .unwrap_or_else(|_| Array2::zeros((m.nrows(), m.ncols())));
    array.into_pyarray(py).unbind()
}

fn vector(py: Python<'_>, values: Vec<f64>) -> Py<PyArray1<f64>> {
    Array1::from(values).into_pyarray(py).unbind()
}

fn mats(arrays: &[PyReadonlyArray2<'_, f64>]) -> Vec<Mat> {
    arrays.iter().map(|a| to_mat(&a.as_array())).collect()
}

/// ppcor's `pcor.test` / `spcor.test` of one pair.
#[pyclass(frozen, get_all, module = "gengen._core")]
pub struct PartialCorrResult {
    r: f64,
    statistic: f64,
    p_value: f64,
    df: f64,
    n: usize,
    k: usize,
}

#[pyfunction]
#[pyo3(signature = (x, y, covar, method, semi=None, fit=None))]
fn partial_corr(
    x: PyReadonlyArray1<'_, f64>,
    y: PyReadonlyArray1<'_, f64>,
    covar: PyReadonlyArray2<'_, f64>,
    method: &str,
    semi: Option<&str>,
    fit: Option<ControlArgument>,
) -> CoreResult<PartialCorrResult> {
    let method = Method::parse(method)?;
    let semi = Semi::parse(semi)?;
    let control = control_of(fit);
    let x = x.as_array().to_vec();
    let y = y.as_array().to_vec();
    let covar = to_mat(&covar.as_array());
    let s = pcor::partial_corr_with(&x, &y, &covar, method, semi, &control)?;
    Ok(PartialCorrResult {
        r: s.r,
        statistic: s.statistic,
        p_value: s.p_value,
        df: s.df,
        n: s.n,
        k: s.k,
    })
}

#[pyfunction]
fn fisher_ci(r: f64, df: f64, level: f64) -> CoreResult<(f64, f64)> {
    Ok(pcor::fisher_ci(r, df, level)?)
}

/// ppcor's `pcor` (or `spcor`) of every pair of columns.
#[pyclass(frozen, get_all, module = "gengen._core")]
pub struct PpcorResult {
    estimate: Py<PyArray2<f64>>,
    statistic: Py<PyArray2<f64>>,
    p_value: Py<PyArray2<f64>>,
    n: usize,
    k: usize,
}

#[pyfunction]
fn ppcor_matrices(
    py: Python<'_>,
    data: PyReadonlyArray2<'_, f64>,
    method: &str,
    semi: bool,
) -> CoreResult<PpcorResult> {
    let method = Method::parse(method)?;
    let data = to_mat(&data.as_array());
    let out = py.allow_threads(|| pcor::ppcor_matrices(&data, method, semi))?;
    Ok(PpcorResult {
        estimate: to_numpy(py, &out.estimate),
        statistic: to_numpy(py, &out.statistic),
        p_value: to_numpy(py, &out.p_value),
        n: out.n,
        k: out.k,
    })
}

#[pyfunction]
fn residualise<'py>(
    py: Python<'py>,
    y: PyReadonlyArray2<'py, f64>,
    covar: PyReadonlyArray2<'py, f64>,
) -> CoreResult<Py<PyArray2<f64>>> {
    let y = to_mat(&y.as_array());
    let covar = to_mat(&covar.as_array());
    Ok(to_numpy(
        py,
        &crate::residualise::residualise_columns(&y, &covar)?,
    ))
}

/// One run's partial correlation matrices.
#[pyclass(frozen, get_all, module = "gengen._core")]
pub struct CorrMatrixResult {
    r: Py<PyArray2<f64>>,
    statistic: Py<PyArray2<f64>>,
    p_value: Py<PyArray2<f64>>,
    /// Degrees of freedom of each pair's test.
    pair_df: Py<PyArray2<f64>>,
    /// Degrees of freedom each column spent on the control.
    control_df: Py<PyArray1<f64>>,
    n: usize,
    k: usize,
}

#[pyfunction]
#[pyo3(signature = (scores, covars, method, fit=None, n_threads=None))]
fn partial_corr_matrix_batch(
    py: Python<'_>,
    scores: Vec<PyReadonlyArray2<'_, f64>>,
    covars: Vec<PyReadonlyArray2<'_, f64>>,
    method: &str,
    fit: Option<ControlArgument>,
    n_threads: Option<usize>,
) -> CoreResult<Vec<CorrMatrixResult>> {
    let method = Method::parse(method)?;
    let control = control_of(fit);
    let (scores, covars) = (mats(&scores), mats(&covars));
    let results =
        py.allow_threads(|| batch::partial_corr_matrix_batch(scores, covars, method, &control, n_threads))?;
    Ok(results
        .into_iter()
        .map(|m| CorrMatrixResult {
            r: to_numpy(py, &m.estimate),
            statistic: to_numpy(py, &m.statistic),
            p_value: to_numpy(py, &m.p_value),
            pair_df: to_numpy(py, &m.pair_df),
            control_df: vector(py, m.control_df),
            n: m.n,
            k: m.k,
        })
        .collect())
}

/// One run's permutation test.
#[pyclass(frozen, get_all, module = "gengen._core")]
pub struct PermutationResult {
    r: Py<PyArray2<f64>>,
    p_value: Py<PyArray2<f64>>,
    p_fwer: Py<PyArray2<f64>>,
    block_length: Option<usize>,
}

#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (scores, covars, method, n_perm, scheme, block_length=None, mirror=false, seed=0, fit=None, n_threads=None))]
fn permutation_test_batch(
    py: Python<'_>,
    scores: Vec<PyReadonlyArray2<'_, f64>>,
    covars: Vec<PyReadonlyArray2<'_, f64>>,
    method: &str,
    n_perm: u64,
    scheme: &str,
    block_length: Option<usize>,
    mirror: bool,
    seed: u64,
    fit: Option<ControlArgument>,
    n_threads: Option<usize>,
) -> CoreResult<Vec<PermutationResult>> {
    let request = PermutationRequest {
        method: Method::parse(method)?,
        control: control_of(fit),
        n_perm,
        scheme: scheme.to_string(),
        block_length,
        mirror,
        seed,
        n_threads,
    };
    let (scores, covars) = (mats(&scores), mats(&covars));
    let results =
        py.allow_threads(|| batch::permutation_test_batch(scores, covars, &request, &check_signals))?;
    Ok(results
        .into_iter()
        .map(|run| PermutationResult {
            r: to_numpy(py, &run.r),
            p_value: to_numpy(py, &run.p_value),
            p_fwer: to_numpy(py, &run.p_fwer),
            block_length: run.block_length,
        })
        .collect())
}

/// One run's bootstrap intervals.
#[pyclass(frozen, get_all, module = "gengen._core")]
pub struct BootstrapResult {
    r: Py<PyArray2<f64>>,
    ci_low: Py<PyArray2<f64>>,
    ci_high: Py<PyArray2<f64>>,
    /// Valid (non-degenerate) replicates per pair, as floats.
    n_valid: Py<PyArray2<f64>>,
    block_length: Option<usize>,
}

#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (scores, covars, method, n_boot, scheme, block_length=None, ci_level=0.95, ci_method="percentile", seed=0, fit=None, n_threads=None))]
fn bootstrap_ci_batch(
    py: Python<'_>,
    scores: Vec<PyReadonlyArray2<'_, f64>>,
    covars: Vec<PyReadonlyArray2<'_, f64>>,
    method: &str,
    n_boot: u64,
    scheme: &str,
    block_length: Option<usize>,
    ci_level: f64,
    ci_method: &str,
    seed: u64,
    fit: Option<ControlArgument>,
    n_threads: Option<usize>,
) -> CoreResult<Vec<BootstrapResult>> {
    let request = BootstrapRequest {
        method: Method::parse(method)?,
        control: control_of(fit),
        ci_method: IntervalMethod::parse(ci_method)?,
        n_boot,
        scheme: scheme.to_string(),
        block_length,
        ci_level,
        seed,
        n_threads,
    };
    let (scores, covars) = (mats(&scores), mats(&covars));
    let results = py.allow_threads(|| batch::bootstrap_ci_batch(scores, covars, &request, &check_signals))?;
    Ok(results
        .into_iter()
        .map(|run| BootstrapResult {
            r: to_numpy(py, &run.r),
            ci_low: to_numpy(py, &run.ci_low),
            ci_high: to_numpy(py, &run.ci_high),
            n_valid: to_numpy(py, &run.n_valid),
            block_length: run.block_length,
        })
        .collect())
}

/// GAM fits of every column of y.
#[pyclass(frozen, get_all, module = "gengen._core")]
pub struct GamFitResult {
    fitted: Py<PyArray2<f64>>,
    residuals: Py<PyArray2<f64>>,
    edf: Py<PyArray1<f64>>,
    lam: Py<PyArray2<f64>>,
    score: Py<PyArray1<f64>>,
    k_used: Vec<usize>,
    capped: Vec<bool>,
    max_edf: f64,
}

/// GAM control, mgcv's `y ~ s(z_1, k, bs = basis) + … + s(z_q, k, bs = basis)` per column of `y`, with λ
/// chosen per column by GCV or REML (or fixed at `lam`, one value per control); `control` is a `Gam` value
/// (None: its defaults).
#[pyfunction]
#[pyo3(signature = (y, covar, control=None, lam=None, n_threads=None))]
fn gam_fit<'py>(
    py: Python<'py>,
    y: PyReadonlyArray2<'py, f64>,
    covar: PyReadonlyArray2<'py, f64>,
    control: Option<ControlArgument>,
    lam: Option<Vec<f64>>,
    n_threads: Option<usize>,
) -> CoreResult<GamFitResult> {
    let options = match control {
        None => GamOptions::default(),
        Some(ControlArgument(Control::Gam(options))) => options,
        Some(ControlArgument(Control::Linear)) => {
            return Err(StatsError::invalid("control", "must be a Gam(...) control, got Linear()").into())
        }
    };
    let y = to_mat(&y.as_array());
    let covar = to_mat(&covar.as_array());
    let fits = py.allow_threads(|| batch::gam_fit(&y, &covar, &options, lam.as_deref(), n_threads))?;
    Ok(GamFitResult {
        fitted: to_numpy(py, &fits.fitted),
        residuals: to_numpy(py, &fits.residuals),
        edf: vector(py, fits.edf),
        lam: to_numpy(py, &fits.lambda),
        score: vector(py, fits.score),
        k_used: fits.k_used,
        capped: fits.capped,
        max_edf: fits.max_edf,
    })
}

/// The default cap on a GAM fit's EDF with n rows and q controls: `1 + q · max(1, n / 4)`.
#[pyfunction]
#[pyo3(signature = (n, q=1))]
fn default_max_edf(n: usize, q: usize) -> f64 {
    max_edf_rule(n, q)
}

/// A (rows, n) numpy array of a row-major table of indices.
fn index_array(py: Python<'_>, data: Vec<i64>, rows: usize, n: usize) -> Py<PyArray2<i64>> {
    Array2::from_shape_vec((rows, n), data)
        .unwrap_or_else(|_| Array2::zeros((rows, n)))
        .into_pyarray(py)
        .unbind()
}

#[pyfunction]
#[pyo3(signature = (n, n_perm, scheme, block_length=None, mirror=false, seed=0))]
fn permutation_indices(
    py: Python<'_>,
    n: usize,
    n_perm: usize,
    scheme: &str,
    block_length: Option<usize>,
    mirror: bool,
    seed: u64,
) -> CoreResult<Py<PyArray2<i64>>> {
    let data = py.allow_threads(|| {
        batch::permutation_indices(n, n_perm, scheme, block_length, mirror, seed, &check_signals)
    })?;
    Ok(index_array(py, data, n_perm, n))
}

#[pyfunction]
#[pyo3(signature = (n, n_boot, scheme, block_length=None, seed=0))]
fn bootstrap_indices(
    py: Python<'_>,
    n: usize,
    n_boot: usize,
    scheme: &str,
    block_length: Option<usize>,
    seed: u64,
) -> CoreResult<Py<PyArray2<i64>>> {
    let data =
        py.allow_threads(|| batch::bootstrap_indices(n, n_boot, scheme, block_length, seed, &check_signals))?;
    Ok(index_array(py, data, n_boot, n))
}

#[pyfunction]
fn p_adjust<'py>(
    py: Python<'py>,
    p: PyReadonlyArray1<'py, f64>,
    method: &str,
) -> CoreResult<Bound<'py, PyArray1<f64>>> {
    let method = Adjustment::parse(method)?;
    let values = p.as_array().to_vec();
    let adjusted = py.allow_threads(|| adjust(&values, method, &check_signals))?;
    Ok(Array1::from(adjusted).into_pyarray(py))
}

/// 2·P(Z > |z|) for a standard normal Z.
#[pyfunction]
fn normal_two_sided(z: f64) -> f64 {
    crate::dist::normal_two_sided(z)
}

/// Standard normal quantile.
#[pyfunction]
fn normal_quantile(p: f64) -> f64 {
    crate::dist::normal_quantile(p)
}

/// 2·P(T > |t|) for a Student t with `df` degrees of freedom.
#[pyfunction]
fn t_two_sided(t: f64, df: f64) -> f64 {
    crate::dist::t_two_sided(t, df)
}

/// Student t quantile.
#[pyfunction]
fn t_quantile(p: f64, df: f64) -> f64 {
    crate::dist::t_quantile(p, df)
}

/// AR recursions of the AR-sieve bootstrap: shocks (b, m, t), coefficients (m, p), start (b, m, p) or
/// (0, 0, 0) for zeros; returns the last `keep` steps, (b, m, keep).
#[pyfunction]
fn ar_generate<'py>(
    py: Python<'py>,
    coef: PyReadonlyArray2<'py, f64>,
    shocks: PyReadonlyArray3<'py, f64>,
    start: PyReadonlyArray3<'py, f64>,
    keep: usize,
) -> CoreResult<Bound<'py, PyArray3<f64>>> {
    let coef = coef.as_array();
    let (m, p) = coef.dim();
    let shocks = shocks.as_array();
    let (b, m_shocks, t) = shocks.dim();
    if m_shocks != m {
        return Err(StatsError::invalid("shocks", format!("has {m_shocks} series but coef has {m}")).into());
    }
    let coef: Vec<f64> = coef.iter().copied().collect();
    let shocks: Vec<f64> = shocks.iter().copied().collect();
    let start: Vec<f64> = start.as_array().iter().copied().collect();
    let out = py.allow_threads(|| crate::sieve::ar_generate(&coef, m, p, &shocks, b, t, &start, keep))?;
    let array = numpy::ndarray::Array3::from_shape_vec((b, m, keep), out)
        .map_err(|error| StatsError::invalid("keep", error.to_string()))?;
    Ok(array.into_pyarray(py))
}

/// Upper tail of a chi-squared distribution.
#[pyfunction]
fn chi_squared_sf(x: f64, df: f64) -> f64 {
    crate::dist::chi_squared_sf(x, df)
}

#[pyfunction]
fn default_block_length(n: usize) -> usize {
    block_rule(n)
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PartialCorrResult>()?;
    module.add_class::<PpcorResult>()?;
    module.add_class::<CorrMatrixResult>()?;
    module.add_class::<PermutationResult>()?;
    module.add_class::<BootstrapResult>()?;
    module.add_class::<GamFitResult>()?;
    module.add_function(wrap_pyfunction!(partial_corr, module)?)?;
    module.add_function(wrap_pyfunction!(fisher_ci, module)?)?;
    module.add_function(wrap_pyfunction!(ppcor_matrices, module)?)?;
    module.add_function(wrap_pyfunction!(residualise, module)?)?;
    module.add_function(wrap_pyfunction!(partial_corr_matrix_batch, module)?)?;
    module.add_function(wrap_pyfunction!(permutation_test_batch, module)?)?;
    module.add_function(wrap_pyfunction!(bootstrap_ci_batch, module)?)?;
    module.add_function(wrap_pyfunction!(permutation_indices, module)?)?;
    module.add_function(wrap_pyfunction!(bootstrap_indices, module)?)?;
    module.add_function(wrap_pyfunction!(p_adjust, module)?)?;
    module.add_function(wrap_pyfunction!(default_block_length, module)?)?;
    module.add_function(wrap_pyfunction!(gam_fit, module)?)?;
    module.add_function(wrap_pyfunction!(default_max_edf, module)?)?;
    simulate::register(module)?;
    sieve::register(module)?;
    module.add_function(wrap_pyfunction!(normal_two_sided, module)?)?;
    module.add_function(wrap_pyfunction!(normal_quantile, module)?)?;
    module.add_function(wrap_pyfunction!(t_two_sided, module)?)?;
    module.add_function(wrap_pyfunction!(t_quantile, module)?)?;
    module.add_function(wrap_pyfunction!(ar_generate, module)?)?;
    module.add_function(wrap_pyfunction!(chi_squared_sf, module)?)?;
    Ok(())
}
