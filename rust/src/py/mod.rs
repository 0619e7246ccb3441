//! The binding layer: the only code that knows Python.
//!
//! Arrays arrive as numpy arrays (any memory order) and are copied into column-major [`Mat`]s; results go back
//! as new numpy arrays. Heavy loops run with the GIL released, in slices of work between which the binding
//! checks for Ctrl-C. Every [`StatsError`] becomes a `gengen.errors` exception (a `ValueError` subclass).

use numpy::ndarray::{Array1, Array2, ArrayView2, ShapeBuilder};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArray3, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyType;

mod simulate;

use crate::adjust::{p_adjust as adjust, Adjustment};
use crate::bootstrap::{jackknife, replicates_batch, run_intervals, BootstrapRun, IntervalMethod};
use crate::bounds::{check_array, check_resamples, check_threads, try_filled, try_with_capacity};
use crate::control::Control;
use crate::error::StatsError;
use crate::gam::{Basis, GamFit, GamOptions, GamSmoother, SmoothMethod};
use crate::matrix::Mat;
use crate::pcor::{self, Method, Semi};
use crate::permutation::{count_exceedances_batch, p_values, ExceedanceCounts, PreparedRun};
use crate::residualise::LinearResidualiser;
use crate::rng::{
    bootstrap_into, default_block_length as block_rule, permutation_into, BootstrapScheme, PermutationScheme,
};

/// Permutations or replicates computed between two checks for Ctrl-C.
const SLICE: u64 = 1024;

impl From<StatsError> for PyErr {
    fn from(error: StatsError) -> PyErr {
        let class = match error {
            StatsError::InvalidArgument { .. } => "InvalidArgumentError",
            StatsError::Degenerate { .. } => "DegenerateDataError",
        };
        let message = error.to_string();
        Python::with_gil(|py| {
            let exception_type = py
                .import("gengen.errors")
                .and_then(|module| module.getattr(class))
                .and_then(|attribute| attribute.downcast_into::<PyType>().map_err(PyErr::from));
            match exception_type {
                Ok(exception_type) => PyErr::from_type(exception_type, message),
                Err(_) => PyValueError::new_err(message),
            }
        })
    }
}

type CoreResult<T> = PyResult<T>;

/// The control from the binding's `fit` argument: None for the linear fit, or (k, method, basis) for GAM.
type FitArgument = Option<(usize, String, String)>;

fn control_from(fit: &FitArgument) -> Result<Control, StatsError> {
    match fit {
        None => Ok(Control::Linear),
        Some((k, method, basis)) => {
            if *k < 3 {
                return Err(StatsError::invalid("k", format!("must be at least 3, got {k}")));
            }
            Ok(Control::Gam(GamOptions {
                k: *k,
                method: SmoothMethod::parse(method, "gam_method")?,
                basis: Basis::parse(basis, "gam_basis")?,
            }))
        }
    }
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

fn to_numpy<'py>(py: Python<'py>, m: &Mat) -> Bound<'py, PyArray2<f64>> {
    let array = Array2::from_shape_vec((m.nrows(), m.ncols()).f(), m.as_slice().to_vec())
        .unwrap_or_else(|_| Array2::zeros((m.nrows(), m.ncols())));
    array.into_pyarray(py)
}

fn with_threads<T: Send>(n_threads: Option<usize>, work: impl FnOnce() -> T + Send) -> CoreResult<T> {
    match n_threads {
        None => Ok(work()),
        Some(count) => {
            let count = check_threads(count)?;
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(count)
                .build()
                .map_err(|e| StatsError::invalid("n_threads", e.to_string()))?;
            Ok(pool.install(work))
        }
    }
}

fn runs_from(
    scores: &[PyReadonlyArray2<'_, f64>],
    covars: &[PyReadonlyArray2<'_, f64>],
) -> CoreResult<Vec<(Mat, Mat)>> {
    if scores.len() != covars.len() {
        return Err(StatsError::invalid(
            "covar",
            format!(
                "{} covariate matrices for {} runs of scores",
                covars.len(),
                scores.len()
            ),
        )
        .into());
    }
    Ok(scores
        .iter()
        .zip(covars)
        .map(|(s, c)| (to_mat(&s.as_array()), to_mat(&c.as_array())))
        .collect())
}

/// Names an error after the run it came from when there are several.
fn in_run(error: StatsError, run: usize, runs: usize) -> StatsError {
    if runs == 1 {
        return error;
    }
    match error {
        StatsError::InvalidArgument { name, problem } => StatsError::InvalidArgument {
            name: format!("run {run}: {name}"),
            problem,
        },
        StatsError::Degenerate { name, problem } => StatsError::Degenerate {
            name: format!("run {run}: {name}"),
            problem,
        },
    }
}

#[pyfunction]
#[pyo3(signature = (x, y, covar, method, semi=None, fit=None))]
fn partial_corr(
    x: PyReadonlyArray1<'_, f64>,
    y: PyReadonlyArray1<'_, f64>,
    covar: PyReadonlyArray2<'_, f64>,
    method: &str,
    semi: Option<&str>,
    fit: FitArgument,
) -> CoreResult<(f64, f64, f64, f64, usize, usize)> {
    let method = Method::parse(method)?;
    let semi = Semi::parse(semi)?;
    let control = control_from(&fit)?;
    let x = x.as_array().to_vec();
    let y = y.as_array().to_vec();
    let covar = to_mat(&covar.as_array());
    let s = pcor::partial_corr_with(&x, &y, &covar, method, semi, &control)?;
    Ok((s.r, s.statistic, s.p_value, s.df, s.n, s.k))
}

#[pyfunction]
fn fisher_ci(r: f64, df: f64, level: f64) -> CoreResult<(f64, f64)> {
    Ok(pcor::fisher_ci(r, df, level)?)
}

#[allow(clippy::type_complexity)]
#[pyfunction]
fn ppcor_matrices<'py>(
    py: Python<'py>,
    data: PyReadonlyArray2<'py, f64>,
    method: &str,
    semi: bool,
) -> CoreResult<(
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    usize,
    usize,
)> {
    let method = Method::parse(method)?;
    let data = to_mat(&data.as_array());
    let out = py.allow_threads(|| pcor::ppcor_matrices(&data, method, semi))?;
    Ok((
        to_numpy(py, &out.estimate),
        to_numpy(py, &out.statistic),
        to_numpy(py, &out.p_value),
        out.n,
        out.k,
    ))
}

#[pyfunction]
fn residualise<'py>(
    py: Python<'py>,
    y: PyReadonlyArray2<'py, f64>,
    covar: PyReadonlyArray2<'py, f64>,
) -> CoreResult<Bound<'py, PyArray2<f64>>> {
    let y = to_mat(&y.as_array());
    let covar = to_mat(&covar.as_array());
    if covar.nrows() != y.nrows() {
        return Err(StatsError::invalid(
            "covar",
            format!("has {} rows but y has {}", covar.nrows(), y.nrows()),
        )
        .into());
    }
    let residualiser = LinearResidualiser::new(&covar, "covar")?;
    let mut out = Mat::zeros(y.nrows(), y.ncols());
    for j in 0..y.ncols() {
        crate::matrix::check_finite(&crate::residualise::column_name("y", j, y.ncols()), y.col(j))?;
        residualiser.residualise_into(y.col(j), out.col_mut(j));
    }
    Ok(to_numpy(py, &out))
}

/// (r, statistic, p_value, df per pair, degrees of freedom spent on the control per column, n, k).
type MatrixResult<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
    usize,
    usize,
);

#[pyfunction]
#[pyo3(signature = (scores, covars, method, fit=None, n_threads=None))]
fn partial_corr_matrix_batch<'py>(
    py: Python<'py>,
    scores: Vec<PyReadonlyArray2<'py, f64>>,
    covars: Vec<PyReadonlyArray2<'py, f64>>,
    method: &str,
    fit: FitArgument,
    n_threads: Option<usize>,
) -> CoreResult<Vec<MatrixResult<'py>>> {
    use rayon::prelude::*;
    let method = Method::parse(method)?;
    let control = control_from(&fit)?;
    let runs = runs_from(&scores, &covars)?;
    let count = runs.len();
    let results: Vec<Result<pcor::CorrMatrices, StatsError>> = py.allow_threads(|| {
        with_threads(n_threads, || {
            runs.par_iter()
                .enumerate()
                .map(|(i, (s, c))| {
                    pcor::partial_corr_matrix_with(s, c, method, &control).map_err(|e| in_run(e, i, count))
                })
                .collect()
        })
    })?;
    let mut out = Vec::with_capacity(count);
    for result in results {
        let m = result?;
        out.push((
            to_numpy(py, &m.estimate),
            to_numpy(py, &m.statistic),
            to_numpy(py, &m.p_value),
            to_numpy(py, &m.pair_df),
            Array1::from(m.control_df.clone()).into_pyarray(py),
            m.n,
            m.k,
        ));
    }
    Ok(out)
}

type PermutationResult<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Option<usize>,
);

#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (scores, covars, method, n_perm, scheme, block_length=None, mirror=false, seed=0, fit=None, n_threads=None))]
fn permutation_test_batch<'py>(
    py: Python<'py>,
    scores: Vec<PyReadonlyArray2<'py, f64>>,
    covars: Vec<PyReadonlyArray2<'py, f64>>,
    method: &str,
    n_perm: u64,
    scheme: &str,
    block_length: Option<usize>,
    mirror: bool,
    seed: u64,
    fit: FitArgument,
    n_threads: Option<usize>,
) -> CoreResult<Vec<PermutationResult<'py>>> {
    let method = Method::parse(method)?;
    let control = control_from(&fit)?;
    let n_perm = check_resamples("n_perm", n_perm, 1)?;
    if let Some(count) = n_threads {
        check_threads(count)?;
    }
    let runs = runs_from(&scores, &covars)?;
    let count = runs.len();
    let mut prepared = Vec::with_capacity(count);
    for (i, (s, c)) in runs.iter().enumerate() {
        let n = s.nrows();
        let plan =
            PermutationScheme::parse(scheme, block_length, mirror, n).map_err(|e| in_run(e, i, count))?;
        pcor::check_degrees_of_freedom(n, c.ncols()).map_err(|e| in_run(e, i, count))?;
        prepared.push(PreparedRun::new(s, c, method, &control, plan).map_err(|e| in_run(e, i, count))?);
    }
    let fast = crate::permutation_fast::prepare_fast(&prepared);
    let mut totals: Vec<ExceedanceCounts> = Vec::new();
    let mut start = 0;
    while start < n_perm {
        let end = (start + SLICE).min(n_perm);
        let slice = py.allow_threads(|| {
            with_threads(n_threads, || match &fast {
                Some(fast) => crate::permutation_fast::count_exceedances_batch_fast(fast, seed, start..end),
                None => count_exceedances_batch(&prepared, seed, start..end),
            })
        })?;
        if totals.is_empty() {
            totals = slice;
        } else {
            for (total, part) in totals.iter_mut().zip(&slice) {
                total.merge(part);
            }
        }
        py.check_signals()?;
        start = end;
    }
    Ok(prepared
        .iter()
        .zip(&totals)
        .map(|(run, counts)| {
            let (p, p_fwer) = p_values(counts, run.m);
            (
                to_numpy(py, &run.r),
                to_numpy(py, &p),
                to_numpy(py, &p_fwer),
                run.scheme.block_length(),
            )
        })
        .collect())
}

type BootstrapResult<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Option<usize>,
);

#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (scores, covars, method, n_boot, scheme, block_length=None, ci_level=0.95, ci_method="percentile", seed=0, fit=None, n_threads=None))]
fn bootstrap_ci_batch<'py>(
    py: Python<'py>,
    scores: Vec<PyReadonlyArray2<'py, f64>>,
    covars: Vec<PyReadonlyArray2<'py, f64>>,
    method: &str,
    n_boot: u64,
    scheme: &str,
    block_length: Option<usize>,
    ci_level: f64,
    ci_method: &str,
    seed: u64,
    fit: FitArgument,
    n_threads: Option<usize>,
) -> CoreResult<Vec<BootstrapResult<'py>>> {
    let method = Method::parse(method)?;
    let control = control_from(&fit)?;
    let interval_method = IntervalMethod::parse(ci_method)?;
    let n_boot = check_resamples("n_boot", n_boot, 2)?;
    if let Some(count) = n_threads {
        check_threads(count)?;
    }
    if !(ci_level > 0.0 && ci_level < 1.0) {
        return Err(StatsError::invalid(
            "ci_level",
            format!("must lie strictly between 0 and 1, got {ci_level}"),
        )
        .into());
    }
    let runs = runs_from(&scores, &covars)?;
    // Every replicate of every pair is kept until the intervals are taken: bound that before resampling.
    let pairs: usize = runs
        .iter()
        .map(|(s, _)| s.ncols() * s.ncols().saturating_sub(1) / 2 + 3)
        .sum();
    check_array(
        "n_boot",
        &[n_boot as usize, pairs],
        8,
        "keeping the bootstrap replicates",
    )?;
    let count = runs.len();
    let mut prepared = Vec::with_capacity(count);
    let mut observed = Vec::with_capacity(count);
    for (i, (s, c)) in runs.into_iter().enumerate() {
        let n = s.nrows();
        pcor::check_degrees_of_freedom(n, c.ncols()).map_err(|e| in_run(e, i, count))?;
        let plan = BootstrapScheme::parse(scheme, block_length, n).map_err(|e| in_run(e, i, count))?;
        // The observed estimates, with the full error checking of the point estimate.
        let estimate =
            pcor::partial_corr_matrix_with(&s, &c, method, &control).map_err(|e| in_run(e, i, count))?;
        observed.push(estimate.estimate);
        prepared.push(BootstrapRun {
            scores: s,
            covar: c,
            scheme: plan,
            control,
        });
    }
    let fast_boot: Option<Vec<crate::bootstrap_fast::FastBootstrapRun>> = if method == Method::Pearson {
        prepared
            .iter()
            .map(crate::bootstrap_fast::FastBootstrapRun::new)
            .collect()
    } else {
        None
    };
    let mut collected: Vec<Vec<Vec<f64>>> = prepared.iter().map(|_| Vec::new()).collect();
    let mut start = 0;
    while start < n_boot {
        let end = (start + SLICE).min(n_boot);
        let slice = py.allow_threads(|| {
            with_threads(n_threads, || match &fast_boot {
                Some(fast) => crate::bootstrap_fast::replicates_batch_fast(&prepared, fast, seed, start..end),
                None => replicates_batch(&prepared, method, seed, start..end),
            })
        })?;
        for (all, part) in collected.iter_mut().zip(slice) {
            all.extend(part);
        }
        py.check_signals()?;
        start = end;
    }
    // BCa's leave-one-checkpoint-out fits (n refits per run, GAM ones included), one run at a time so that
    // Ctrl-C is honoured between runs.
    let mut jackknives: Vec<Option<Vec<Vec<f64>>>> = Vec::with_capacity(prepared.len());
    for run in &prepared {
        if interval_method != IntervalMethod::Bca {
            jackknives.push(None);
            continue;
        }
        let jack = py.allow_threads(|| {
            with_threads(n_threads, || {
                jackknife(&run.scores, &run.covar, method, &run.control)
            })
        })?;
        jackknives.push(Some(jack));
        py.check_signals()?;
    }
    let intervals: Vec<(Mat, Mat, Mat)> = py.allow_threads(|| {
        with_threads(n_threads, || {
            collected
                .iter()
                .zip(observed.iter().zip(&jackknives))
                .map(|(reps, (estimate, jack))| {
                    run_intervals(reps, estimate, jack.as_deref(), ci_level, interval_method)
                })
                .collect()
        })
    })?;
    let mut out = Vec::with_capacity(count);
    for ((run, estimate), (low, high, valid)) in prepared.iter().zip(&observed).zip(&intervals) {
        out.push((
            to_numpy(py, estimate),
            to_numpy(py, low),
            to_numpy(py, high),
            to_numpy(py, valid),
            run.scheme.block_length(),
        ));
    }
    Ok(out)
}

type GamResult<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
    Vec<usize>,
);

/// GAM control, mgcv's `y ~ s(z_1, k, bs = basis) + … + s(z_q, k, bs = basis)` per column of `y`, with λ
/// chosen per column by GCV or REML (or fixed at `lam`, one value per control).
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (y, covar, k=10, method="gcv", basis="cr", lam=None, n_threads=None))]
fn gam_fit<'py>(
    py: Python<'py>,
    y: PyReadonlyArray2<'py, f64>,
    covar: PyReadonlyArray2<'py, f64>,
    k: usize,
    method: &str,
    basis: &str,
    lam: Option<Vec<f64>>,
    n_threads: Option<usize>,
) -> CoreResult<GamResult<'py>> {
    use rayon::prelude::*;
    let y = to_mat(&y.as_array());
    let covar = to_mat(&covar.as_array());
    if covar.nrows() != y.nrows() {
        return Err(StatsError::invalid(
            "covar",
            format!("has {} rows but y has {}", covar.nrows(), y.nrows()),
        )
        .into());
    }
    let options = GamOptions {
        k,
        method: SmoothMethod::parse(method, "gam_method")?,
        basis: Basis::parse(basis, "gam_basis")?,
    };
    let smoother = GamSmoother::new(&covar, &options, "covar")?;
    let fits: Result<Vec<GamFit>, StatsError> = py.allow_threads(|| {
        with_threads(n_threads, || match &lam {
            None => smoother.residualise_columns(&y, "y"),
            Some(lam) => (0..y.ncols())
                .into_par_iter()
                .map(|j| {
                    crate::matrix::check_finite(
                        &crate::residualise::column_name("y", j, y.ncols()),
                        y.col(j),
                    )?;
                    smoother.fit_column_with_lambda(y.col(j), lam)
                })
                .collect(),
        })
    })?;
    let fits = fits?;
    let (n, m, q) = (y.nrows(), y.ncols(), smoother.q());
    let mut fitted = Mat::zeros(n, m);
    let mut residuals = Mat::zeros(n, m);
    let mut lambda = Mat::zeros(m, q);
    for (j, fit) in fits.iter().enumerate() {
        fitted.col_mut(j).copy_from_slice(&fit.fitted);
        residuals.col_mut(j).copy_from_slice(&fit.residuals);
        for (c, value) in fit.lambda.iter().enumerate() {
            lambda.set(j, c, *value);
        }
    }
    let edf: Vec<f64> = fits.iter().map(|f| f.edf).collect();
    let score: Vec<f64> = fits.iter().map(|f| f.score).collect();
    Ok((
        to_numpy(py, &fitted),
        to_numpy(py, &residuals),
        Array1::from(edf).into_pyarray(py),
        to_numpy(py, &lambda),
        Array1::from(score).into_pyarray(py),
        smoother.k_used().to_vec(),
    ))
}

/// A (rows, n) table of indices, row `i` filled by `fill(i, row)`; its size is checked before anything is
/// allocated, and Ctrl-C is honoured between slices of rows.
fn index_array<'py>(
    py: Python<'py>,
    name: &str,
    rows: usize,
    n: usize,
    fill: impl Fn(u64, &mut [usize]),
) -> CoreResult<Bound<'py, PyArray2<i64>>> {
    // The table plus the row buffer, so that n alone cannot overflow either.
    let total = check_array(
        name,
        &[rows.saturating_add(1), n],
        8,
        &format!("a table of {rows} x {n} indices"),
    )?;
    let mut data: Vec<i64> = try_with_capacity(name, total - n)?;
    let mut row = try_filled(name, n, 0usize)?;
    for index in 0..rows {
        fill(index as u64, &mut row);
        data.extend(row.iter().map(|&i| i as i64));
        if (index as u64 + 1) % SLICE == 0 {
            py.check_signals()?;
        }
    }
    Ok(Array2::from_shape_vec((rows, n), data)
        .unwrap_or_else(|_| Array2::zeros((rows, n)))
        .into_pyarray(py))
}

#[pyfunction]
#[pyo3(signature = (n, n_perm, scheme, block_length=None, mirror=false, seed=0))]
fn permutation_indices<'py>(
    py: Python<'py>,
    n: usize,
    n_perm: usize,
    scheme: &str,
    block_length: Option<usize>,
    mirror: bool,
    seed: u64,
) -> CoreResult<Bound<'py, PyArray2<i64>>> {
    if n == 0 {
        return Err(StatsError::invalid("n", "must be at least 1").into());
    }
    let plan = PermutationScheme::parse(scheme, block_length, mirror, n)?;
    index_array(py, "n_perm", n_perm, n, |index, row| {
        permutation_into(n, plan, seed, index, row)
    })
}

#[pyfunction]
#[pyo3(signature = (n, n_boot, scheme, block_length=None, seed=0))]
fn bootstrap_indices<'py>(
    py: Python<'py>,
    n: usize,
    n_boot: usize,
    scheme: &str,
    block_length: Option<usize>,
    seed: u64,
) -> CoreResult<Bound<'py, PyArray2<i64>>> {
    if n == 0 {
        return Err(StatsError::invalid("n", "must be at least 1").into());
    }
    let plan = BootstrapScheme::parse(scheme, block_length, n)?;
    index_array(py, "n_boot", n_boot, n, |index, row| {
        bootstrap_into(n, plan, seed, index, row)
    })
}

#[pyfunction]
fn p_adjust<'py>(
    py: Python<'py>,
    p: PyReadonlyArray1<'py, f64>,
    method: &str,
) -> CoreResult<Bound<'py, PyArray1<f64>>> {
    let method = Adjustment::parse(method)?;
    let adjusted = adjust(&p.as_array().to_vec(), method)?;
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
    simulate::register(module)?;
    module.add_function(wrap_pyfunction!(normal_two_sided, module)?)?;
    module.add_function(wrap_pyfunction!(normal_quantile, module)?)?;
    module.add_function(wrap_pyfunction!(t_two_sided, module)?)?;
    module.add_function(wrap_pyfunction!(t_quantile, module)?)?;
    module.add_function(wrap_pyfunction!(ar_generate, module)?)?;
    module.add_function(wrap_pyfunction!(chi_squared_sf, module)?)?;
    Ok(())
}
