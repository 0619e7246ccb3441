//! The binding layer: the only code that knows Python. It converts arguments, calls the core and maps
//! errors; the orchestration (kernel choice, thread pool, slices) lives in [`crate::batch`].
//!
//! Arrays arrive as numpy arrays (any memory order) and are copied into column-major [`Mat`]s; string
//! options arrive as their enums ([`choice::Chosen`], converted once, in the argument's extraction); results
//! go back as frozen result objects holding new numpy arrays. Heavy calls run with the GIL released; the core
//! calls back between slices of work, and the callback takes the GIL to check for Ctrl-C. Every
//! [`StatsError`] becomes a `gengen.errors` exception (`InvalidArgumentError` or `DegenerateDataError`, both
//! `ValueError` subclasses) with its fields: `option` the argument at fault, `problem`, and `run` in a batch.
//! [`register`] holds the module's one export list.

use numpy::ndarray::{Array1, Array2, ArrayView2, ShapeBuilder};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArray3, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
};
use pyo3::prelude::*;
use pyo3::types::IntoPyDict;

/// Declares a frozen result class of `gengen._core` and `Class::new(py, out)`, which fills it from the core
/// result `out`: its `matrix` fields become 2-D numpy arrays, its `vector` fields 1-D ones, and its `value`
/// fields are moved over as they are. A field reads the core field of its name (`field = core_field`: of
/// another name).
macro_rules! result_class {
    (
        $(#[$meta:meta])*
        $name:ident from $source:ty {
            $(matrix: $($matrix:ident $(= $matrix_from:ident)?),+;)?
            $(vector: $($vector:ident),+;)?
            $(value: $($value:ident: $ty:ty),+;)?
        }
    ) => {
        $(#[$meta])*
        #[pyclass(frozen, get_all, module = "gengen._core")]
        pub struct $name {
            $($($matrix: Py<PyArray2<f64>>,)+)?
            $($($vector: Py<PyArray1<f64>>,)+)?
            $($($value: $ty,)+)?
        }

        impl $name {
            // `py` goes unused in a class of plain values.
            #[allow(unused_variables)]
            fn new(py: Python<'_>, out: $source) -> Self {
                $name {
                    $($($matrix: to_numpy(py, &result_class!(@field out, $matrix $(, $matrix_from)?)),)+)?
                    $($($vector: vector(py, out.$vector),)+)?
                    $($($value: out.$value,)+)?
                }
            }
        }
    };
    (@field $out:ident, $field:ident) => { $out.$field };
    (@field $out:ident, $field:ident, $from:ident) => { $out.$from };
}

/// Adds result classes and functions to a module: `add_to_module!(module; Class, …; function, …)`.
macro_rules! add_to_module {
    ($module:ident; $($class:ty),* $(,)?; $($function:path),* $(,)?) => {
        $($module.add_class::<$class>()?;)*
        $($module.add_function(wrap_pyfunction!($function, $module)?)?;)*
    };
}

mod choice;
mod control;
mod sieve;
mod simulate;

use choice::Chosen;
use control::{control_of, ControlArgument};

use crate::adjust::{p_adjust_with as adjust, Adjustment};
use crate::batch::{self, BootstrapRequest, PermutationRequest, ResamplingRequest};
use crate::bootstrap::IntervalMethod;
use crate::control::Control;
use crate::error::StatsError;
use crate::gam::{default_max_edf as max_edf_rule, GamOptions};
use crate::matrix::Mat;
use crate::method::Method;
use crate::pcor::{self, Semi};
use crate::rng::{default_block_length as block_rule, BootstrapKind, PermutationKind};

pyo3::import_exception_bound!(gengen.errors, InvalidArgumentError);
pyo3::import_exception_bound!(gengen.errors, DegenerateDataError);

impl From<StatsError> for PyErr {
    /// The `gengen.errors` exception of `error`, built with its fields:
    /// `InvalidArgumentError(option=name, problem=problem, run=run, separator=": ")`, whose message is the core's
    /// (`"run 2: covar: …"`).
    fn from(error: StatsError) -> PyErr {
        Python::with_gil(|py| {
            let class = match error {
                StatsError::InvalidArgument { .. } => py.get_type::<InvalidArgumentError>(),
                StatsError::Degenerate { .. } => py.get_type::<DegenerateDataError>(),
            };
            let fields = [
                ("option", error.name().into_pyobject(py)?.into_any()),
                ("problem", error.problem().into_pyobject(py)?.into_any()),
                ("run", error.run().into_pyobject(py)?.into_any()),
                ("separator", ": ".into_pyobject(py)?.into_any()),
            ]
            .into_py_dict(py)?;
            class.call((), Some(&fields)).map(PyErr::from_value)
        })
        .unwrap_or_else(|failed| failed)
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

/// Runs a batch kernel of [`crate::batch`] over every run's scores and covariates with the GIL released, and
/// wraps each run's outcome in its result class.
fn over_runs<T: Send, E: Send, R>(
    py: Python<'_>,
    scores: &[PyReadonlyArray2<'_, f64>],
    covars: &[PyReadonlyArray2<'_, f64>],
    kernel: impl Send + FnOnce(Vec<Mat>, Vec<Mat>) -> Result<Vec<T>, E>,
    wrap: fn(Python<'_>, T) -> R,
) -> CoreResult<Vec<R>>
where
    PyErr: From<E>,
{
    let (scores, covars) = (mats(scores), mats(covars));
    let results = py.allow_threads(|| kernel(scores, covars))?;
    Ok(results.into_iter().map(|run| wrap(py, run)).collect())
}

result_class! {
    /// ppcor's `pcor.test` / `spcor.test` of one pair.
    PartialCorrResult from pcor::PairStats {
        value: r: f64, statistic: f64, p_value: f64, df: f64, n: usize, k: usize;
    }
}

#[pyfunction]
#[pyo3(signature = (x, y, covar, method, semi=None, fit=None))]
fn partial_corr(
    py: Python<'_>,
    x: PyReadonlyArray1<'_, f64>,
    y: PyReadonlyArray1<'_, f64>,
    covar: PyReadonlyArray2<'_, f64>,
    method: Chosen<Method>,
    semi: Option<Chosen<Semi>>,
    fit: Option<ControlArgument>,
) -> CoreResult<PartialCorrResult> {
    let Chosen(method) = method;
    let semi = Chosen::or_missing(semi)?;
    let control = control_of(fit);
    let x = x.as_array().to_vec();
    let y = y.as_array().to_vec();
    let covar = to_mat(&covar.as_array());
    let stats = pcor::partial_corr_with(&x, &y, &covar, method, semi, &control)?;
    Ok(PartialCorrResult::new(py, stats))
}

#[pyfunction]
fn fisher_ci(r: f64, df: f64, level: f64) -> CoreResult<(f64, f64)> {
    Ok(pcor::fisher_ci(r, df, level)?)
}

result_class! {
    /// ppcor's `pcor` (or `spcor`) of every pair of columns.
    PpcorResult from pcor::CorrMatrices {
        matrix: estimate, statistic, p_value;
        value: n: usize, k: usize;
    }
}

#[pyfunction]
fn ppcor_matrices(
    py: Python<'_>,
    data: PyReadonlyArray2<'_, f64>,
    method: Chosen<Method>,
    semi: bool,
) -> CoreResult<PpcorResult> {
    let Chosen(method) = method;
    let data = to_mat(&data.as_array());
    let out = py.allow_threads(|| pcor::ppcor_matrices(&data, method, semi))?;
    Ok(PpcorResult::new(py, out))
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

result_class! {
    /// One run's partial correlation matrices: `pair_df` the degrees of freedom of each pair's test,
    /// `control_df` those each column spent on the control.
    CorrMatrixResult from pcor::CorrMatrices {
        matrix: r = estimate, statistic, p_value, pair_df;
        vector: control_df;
        value: n: usize, k: usize;
    }
}

#[pyfunction]
#[pyo3(signature = (scores, covars, method, fit=None, n_threads=None))]
fn partial_corr_matrix_batch(
    py: Python<'_>,
    scores: Vec<PyReadonlyArray2<'_, f64>>,
    covars: Vec<PyReadonlyArray2<'_, f64>>,
    method: Chosen<Method>,
    fit: Option<ControlArgument>,
    n_threads: Option<usize>,
) -> CoreResult<Vec<CorrMatrixResult>> {
    let Chosen(method) = method;
    let control = control_of(fit);
    let kernel =
        |scores, covars| batch::partial_corr_matrix_batch(scores, covars, method, &control, n_threads);
    over_runs(py, &scores, &covars, kernel, CorrMatrixResult::new)
}

/// Declares the binding of a batch resampling kernel, `batch::name(scores, covars, &request, progress)`:
/// `name(scores, covars, method, <count>, scheme, block_length=None, <own arguments>, seed=0, fit=None,
/// n_threads=None)` in Python, `scheme` converted to the kernel's scheme kind. The shared arguments make the
/// request's [`ResamplingRequest`]; the request's other fields are the scheme, the count and those listed,
/// each the argument of its name or the value given. Attributes before the name go to the function (a
/// `text_signature` where a default is not a literal).
macro_rules! resampling_binding {
    (
        $(#[$meta:meta])*
        $name:ident($count:ident, scheme: $scheme:ty $(, $arg:ident: $ty:ty = $default:tt)*) -> $result:ident,
        $request:ident { $($field:ident $(: $value:expr)?),* $(,)? }
    ) => {
        #[allow(clippy::too_many_arguments)]
        #[pyfunction]
        $(#[$meta])*
        #[pyo3(signature = (
            scores, covars, method, $count, scheme, block_length=None, $($arg=$default,)* seed=0, fit=None,
            n_threads=None
        ))]
        fn $name(
            py: Python<'_>,
            scores: Vec<PyReadonlyArray2<'_, f64>>,
            covars: Vec<PyReadonlyArray2<'_, f64>>,
            method: Chosen<Method>,
            $count: u64,
            scheme: Chosen<$scheme>,
            block_length: Option<usize>,
            $($arg: $ty,)*
            seed: u64,
            fit: Option<ControlArgument>,
            n_threads: Option<usize>,
        ) -> CoreResult<Vec<$result>> {
            let resampling = ResamplingRequest {
                method: method.0,
                control: control_of(fit),
                block_length,
                seed,
                n_threads,
            };
            let request = $request { resampling, scheme: scheme.0, $count, $($field $(: $value)?),* };
            let kernel = |scores, covars| batch::$name(scores, covars, &request, &check_signals);
            over_runs(py, &scores, &covars, kernel, $result::new)
        }
    };
}

result_class! {
    /// One run's permutation test.
    PermutationResult from batch::PermutationOutcome {
        matrix: r, p_value, p_fwer;
        value: block_length: Option<usize>;
    }
}

resampling_binding! {
    permutation_test_batch(n_perm, scheme: PermutationKind, mirror: bool = false) -> PermutationResult,
    PermutationRequest { mirror }
}

result_class! {
    /// One run's bootstrap intervals; `n_valid`: the valid (non-degenerate) replicates per pair, as floats.
    BootstrapResult from batch::BootstrapOutcome {
        matrix: r, ci_low, ci_high, n_valid;
        value: block_length: Option<usize>;
    }
}

resampling_binding! {
    #[pyo3(text_signature = "(scores, covars, method, n_boot, scheme, block_length=None, ci_level=0.95, \
                             ci_method='percentile', seed=0, fit=None, n_threads=None)")]
    bootstrap_ci_batch(
        n_boot,
        scheme: BootstrapKind,
        ci_level: f64 = 0.95,
        ci_method: Chosen<IntervalMethod> = { Chosen(IntervalMethod::Percentile) }
    ) -> BootstrapResult,
    BootstrapRequest { ci_level, ci_method: ci_method.0 }
}

result_class! {
    /// GAM fits of every column of y.
    GamFitResult from batch::GamColumns {
        matrix: fitted, residuals, lam = lambda;
        vector: edf, score;
        value: k_used: Vec<usize>, capped: Vec<bool>, max_edf: f64;
    }
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
    Ok(GamFitResult::new(py, fits))
}

/// The default cap on a GAM fit's EDF with n rows and q controls: `1 + q · max(1, n / 4)`.
#[pyfunction]
#[pyo3(signature = (n, q=1))]
fn default_max_edf(n: usize, q: usize) -> f64 {
    max_edf_rule(n, q)
}

/// The (rows, n) table of indices of `plan`, drawn from `seed` with the GIL released.
fn index_array(
    py: Python<'_>,
    n: usize,
    rows: usize,
    plan: batch::IndexPlan,
    seed: u64,
) -> CoreResult<Py<PyArray2<i64>>> {
    let data = py.allow_threads(|| batch::indices(n, rows, plan, seed, &check_signals))?;
    Ok(Array2::from_shape_vec((rows, n), data)
        .unwrap_or_else(|_| Array2::zeros((rows, n)))
        .into_pyarray(py)
        .unbind())
}

#[pyfunction]
#[pyo3(signature = (n, n_perm, scheme, block_length=None, mirror=false, seed=0))]
fn permutation_indices(
    py: Python<'_>,
    n: usize,
    n_perm: usize,
    scheme: Chosen<PermutationKind>,
    block_length: Option<usize>,
    mirror: bool,
    seed: u64,
) -> CoreResult<Py<PyArray2<i64>>> {
    let plan = batch::permutation_plan(n, scheme.0, block_length, mirror)?;
    index_array(py, n, n_perm, plan, seed)
}

#[pyfunction]
#[pyo3(signature = (n, n_boot, scheme, block_length=None, seed=0))]
fn bootstrap_indices(
    py: Python<'_>,
    n: usize,
    n_boot: usize,
    scheme: Chosen<BootstrapKind>,
    block_length: Option<usize>,
    seed: u64,
) -> CoreResult<Py<PyArray2<i64>>> {
    let plan = batch::bootstrap_plan(n, scheme.0, block_length)?;
    index_array(py, n, n_boot, plan, seed)
}

#[pyfunction]
fn p_adjust<'py>(
    py: Python<'py>,
    p: PyReadonlyArray1<'py, f64>,
    method: Chosen<Adjustment>,
) -> CoreResult<Bound<'py, PyArray1<f64>>> {
    let Chosen(method) = method;
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

/// The export list of `gengen._core`: every result class and function of the binding layer (python/gengen/
/// _core.pyi lists the same names; stubtest holds the two together).
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    add_to_module!(module;
        PartialCorrResult, PpcorResult, CorrMatrixResult, PermutationResult, BootstrapResult, GamFitResult,
        simulate::CalibrationTally, simulate::LaggedResult, simulate::PrewhitenedResult;
        partial_corr, fisher_ci, ppcor_matrices, residualise, partial_corr_matrix_batch, permutation_test_batch,
        bootstrap_ci_batch, permutation_indices, bootstrap_indices, p_adjust, default_block_length, gam_fit,
        default_max_edf, normal_two_sided, normal_quantile, t_two_sided, t_quantile, ar_generate, chi_squared_sf,
        simulate::simulate_run, simulate::calibration_cell, simulate::lagged_partial_corr,
        simulate::prewhitened_partial_corr, simulate::lag1_autocorrelation,
        sieve::sieve_moments, sieve::sieve_bias_refit, sieve::t_two_sided_array, sieve::t_quantile_array,
    );
    Ok(())
}
