//! Bindings of the simulation study ([`crate::simulate`]) and of the autocorrelation-aware tests
//! ([`crate::autocorr`]).

use numpy::ndarray::Array1;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::autocorr::{
    lagged_partial_corr_matrix_with, prewhitened_partial_corr_matrix, LaggedControl, LAGGED_GAM_K,
};
use crate::bounds::{check_array, check_resamples};
use crate::error::StatsError;
use crate::pcor::Method;
use crate::simulate::{simulate, start_cell, tally_replicates, Noise, Shape, StudyOptions, TrajectorySpec};

use super::{to_mat, to_numpy};

/// Replicates of a calibration cell simulated between two checks for Ctrl-C.
const CELL_SLICE: u64 = 256;

#[allow(clippy::too_many_arguments)]
fn spec_from(
    n: usize,
    m: usize,
    noise: &str,
    phi: f64,
    shape: &str,
    shared: f64,
    noise_sd: f64,
    id_noise_sd: f64,
) -> PyResult<TrajectorySpec> {
    // The simulated scores (and their working copies) are n x (m + 1) floats: bound them before simulating.
    check_array(
        "n",
        &[n, m.saturating_add(1), 4],
        8,
        &format!("simulating {n} x {m} scores"),
    )?;
    let spec = TrajectorySpec {
        n,
        m,
        noise: Noise::parse(noise, phi)?,
        shape: Shape::parse(shape)?,
        shared,
        noise_sd,
        id_noise_sd,
    };
    spec.validate()?;
    Ok(spec)
}

/// (id (n,), ood (n, m)).
type RunArrays<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>);

/// One simulated run: (id (n,), ood (n, m)).
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (n, m, noise, phi, shape, shared, noise_sd, id_noise_sd, seed, index))]
fn simulate_run<'py>(
    py: Python<'py>,
    n: usize,
    m: usize,
    noise: &str,
    phi: f64,
    shape: &str,
    shared: f64,
    noise_sd: f64,
    id_noise_sd: f64,
    seed: u64,
    index: u64,
) -> PyResult<RunArrays<'py>> {
    let spec = spec_from(n, m, noise, phi, shape, shared, noise_sd, id_noise_sd)?;
    let run = simulate(&spec, seed, index)?;
    Ok((Array1::from_vec(run.id).into_pyarray(py), to_numpy(py, &run.ood)))
}

/// One tallied method: (method, control, evaluated, reject_05, reject_01, ci_evaluated, covered,
/// ci_width_sum).
type TallyRow = (String, String, u64, u64, u64, u64, u64, f64);

/// Runs one cell of the calibration study with the GIL released.
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (n, noise, phi, shape, shared, replicates, seed, cell, n_perm, n_boot, gam, gam_lagged_k,
                    noise_sd, id_noise_sd))]
fn calibration_cell(
    py: Python<'_>,
    n: usize,
    noise: &str,
    phi: f64,
    shape: &str,
    shared: f64,
    replicates: u64,
    seed: u64,
    cell: u32,
    n_perm: u64,
    n_boot: u64,
    gam: bool,
    gam_lagged_k: usize,
    noise_sd: f64,
    id_noise_sd: f64,
) -> PyResult<Vec<TallyRow>> {
    let spec = spec_from(n, 2, noise, phi, shape, shared, noise_sd, id_noise_sd)?;
    check_resamples("replicates", replicates, 0)?;
    // 0 permutations or replicates leaves those methods out of the cell.
    check_resamples("n_perm", n_perm, 0)?;
    check_resamples("n_boot", n_boot, 0)?;
    let options = StudyOptions {
        n_perm,
        n_boot,
        gam,
        gam_lagged_k,
    };
    // In slices of replicates, checking for Ctrl-C between them: a cell can run for minutes.
    let mut tallies = start_cell(&spec, &options, replicates)?;
    let mut start = 0;
    while start < replicates {
        let end = (start + CELL_SLICE).min(replicates);
        py.allow_threads(|| tally_replicates(&spec, &options, start..end, seed, cell, &mut tallies));
        py.check_signals()?;
        start = end;
    }
    Ok(tallies
        .into_iter()
        .map(|t| {
            (
                t.method.name().to_string(),
                t.method.control().to_string(),
                t.evaluated,
                t.reject_05,
                t.reject_01,
                t.ci_evaluated,
                t.covered,
                t.ci_width_sum,
            )
        })
        .collect())
}

/// (estimate, innovation_estimate, statistic, p_value, df, lag1, control_df, n, k).
type LaggedResult<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    usize,
    usize,
);

/// The lagged-regression test of every pair of columns
/// ([`crate::autocorr::lagged_partial_corr_matrix_with`]); `fit` is "linear" or "gam" (basis dimension `k`
/// per smooth).
#[pyfunction]
#[pyo3(signature = (scores, covar, method, fit="linear", k=LAGGED_GAM_K))]
fn lagged_partial_corr<'py>(
    py: Python<'py>,
    scores: PyReadonlyArray2<'_, f64>,
    covar: PyReadonlyArray2<'_, f64>,
    method: &str,
    fit: &str,
    k: usize,
) -> PyResult<LaggedResult<'py>> {
    let method = Method::parse(method)?;
    let control = match fit {
        "linear" => LaggedControl::Linear,
        "gam" => {
            if k < 3 {
                return Err(StatsError::invalid("k", format!("must be at least 3, got {k}")).into());
            }
            LaggedControl::Gam { k }
        }
        other => {
            return Err(StatsError::invalid(
                "fit",
                format!("unknown control {other:?}; expected \"linear\" or \"gam\""),
            )
            .into())
        }
    };
    let scores = to_mat(&scores.as_array());
    let covar = to_mat(&covar.as_array());
    let out = py.allow_threads(|| lagged_partial_corr_matrix_with(&scores, &covar, method, control))?;
    Ok((
        to_numpy(py, &out.estimate),
        to_numpy(py, &out.innovation_estimate),
        to_numpy(py, &out.statistic),
        to_numpy(py, &out.p_value),
        to_numpy(py, &out.df),
        Array1::from_vec(out.lag1).into_pyarray(py),
        Array1::from_vec(out.control_df).into_pyarray(py),
        out.n,
        out.k,
    ))
}

/// (estimate, whitened_estimate, statistic, p_value, naive_p_value, phi, lag1, n, k, df).
type PrewhitenedResult<'py> = (
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray2<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    usize,
    usize,
    f64,
);

/// The AR(1)-prewhitened test of every pair of columns
/// ([`crate::autocorr::prewhitened_partial_corr_matrix`]).
#[pyfunction]
#[pyo3(signature = (scores, covar, method, bias_correction=true))]
fn prewhitened_partial_corr<'py>(
    py: Python<'py>,
    scores: PyReadonlyArray2<'_, f64>,
    covar: PyReadonlyArray2<'_, f64>,
    method: &str,
    bias_correction: bool,
) -> PyResult<PrewhitenedResult<'py>> {
    let method = Method::parse(method)?;
    let scores = to_mat(&scores.as_array());
    let covar = to_mat(&covar.as_array());
    let out =
        py.allow_threads(|| prewhitened_partial_corr_matrix(&scores, &covar, method, bias_correction))?;
    Ok((
        to_numpy(py, &out.estimate),
        to_numpy(py, &out.whitened_estimate),
        to_numpy(py, &out.statistic),
        to_numpy(py, &out.p_value),
        to_numpy(py, &out.naive_p_value),
        Array1::from_vec(out.phi).into_pyarray(py),
        Array1::from_vec(out.lag1).into_pyarray(py),
        out.n,
        out.k,
        out.df,
    ))
}

/// Adds the simulation and autocorrelation functions to `gengen._core`.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(simulate_run, module)?)?;
    module.add_function(wrap_pyfunction!(calibration_cell, module)?)?;
    module.add_function(wrap_pyfunction!(lagged_partial_corr, module)?)?;
    module.add_function(wrap_pyfunction!(prewhitened_partial_corr, module)?)?;
    Ok(())
}
