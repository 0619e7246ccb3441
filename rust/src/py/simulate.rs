//! Bindings of the simulation study ([`crate::simulate`]) and of the autocorrelation-aware tests
//! ([`crate::autocorr`]).

use numpy::{PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::autocorr::{
    lag1_autocorrelations, lagged_partial_corr_matrix_with, prewhitened_partial_corr_matrix, LaggedControl,
    LaggedMatrices, PrewhitenedMatrices,
};
use crate::bounds::{check_array, check_resamples};
use crate::choice;
use crate::control::Control;
use crate::method::Method;
use crate::simulate::{simulate, Noise, NoiseKind, Shape, StudyOptions, TrajectorySpec};

use super::choice::Chosen;
use super::control::{control_of, ControlArgument};
use super::{check_signals, to_mat, to_numpy, vector};

/// The simulated design with the noise scales σ and σ_ID, once its scores are known to fit in memory and its
/// values are valid.
fn checked(design: TrajectorySpec, noise_sd: f64, id_noise_sd: f64) -> PyResult<TrajectorySpec> {
    let (n, m) = (design.n, design.m);
    // The simulated scores (and their working copies) are n x (m + 1) floats: bound them before simulating.
    check_array(
        "n",
        &[n, m.saturating_add(1), 4],
        8,
        &format!("simulating {n} x {m} scores"),
    )?;
    let spec = TrajectorySpec {
        noise_sd,
        id_noise_sd,
        ..design
    };
    spec.validate()?;
    Ok(spec)
}

/// (id (n,), ood (n, m)).
type RunArrays = (Py<PyArray1<f64>>, Py<PyArray2<f64>>);

/// One simulated run: (id (n,), ood (n, m)).
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (n, m, noise, phi, shape, shared, noise_sd, id_noise_sd, seed, index))]
pub(super) fn simulate_run(
    py: Python<'_>,
    n: usize,
    m: usize,
    noise: Chosen<NoiseKind>,
    phi: f64,
    shape: Chosen<Shape>,
    shared: f64,
    noise_sd: f64,
    id_noise_sd: f64,
    seed: u64,
    index: u64,
) -> PyResult<RunArrays> {
    let design = TrajectorySpec::new(n, m, Noise::new(noise.0, phi)?, shape.0, shared);
    let spec = checked(design, noise_sd, id_noise_sd)?;
    let run = simulate(&spec, seed, index)?;
    Ok((vector(py, run.id), to_numpy(py, &run.ood)))
}

/// One method's tallies over a calibration cell.
#[pyclass(frozen, get_all, module = "gengen._core")]
pub struct CalibrationTally {
    method: String,
    control: String,
    evaluated: u64,
    reject_05: u64,
    reject_01: u64,
    ci_evaluated: u64,
    covered: u64,
    ci_width_sum: f64,
}

/// Runs one cell of the calibration study with the GIL released.
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (n, noise, phi, shape, shared, replicates, seed, cell, n_perm, n_boot, gam, gam_lagged_k,
                    noise_sd, id_noise_sd))]
pub(super) fn calibration_cell(
    py: Python<'_>,
    n: usize,
    noise: Chosen<NoiseKind>,
    phi: f64,
    shape: Chosen<Shape>,
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
) -> PyResult<Vec<CalibrationTally>> {
    let design = TrajectorySpec::new(n, 2, Noise::new(noise.0, phi)?, shape.0, shared);
    let spec = checked(design, noise_sd, id_noise_sd)?;
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
    let tallies = py.allow_threads(|| {
        crate::simulate::calibration_cell(&spec, &options, replicates, seed, cell, &check_signals)
    })?;
    Ok(tallies
        .into_iter()
        .map(|t| CalibrationTally {
            method: t.method.name().to_string(),
            control: choice::name(t.method.control()).to_string(),
            evaluated: t.evaluated,
            reject_05: t.reject_05,
            reject_01: t.reject_01,
            ci_evaluated: t.ci_evaluated,
            covered: t.covered,
            ci_width_sum: t.ci_width_sum,
        })
        .collect())
}

/// Declares the binding of a test of every pair of columns of `scores` given `covar`,
/// `name(scores, covar, method, <option>=<default>)`: it converts the arrays and runs
/// `test(&scores, &covar, method, option)` with the GIL released.
macro_rules! pair_test_binding {
    (
        $(#[$meta:meta])*
        $name:ident($option:ident: $ty:ty = $default:tt) -> $result:ident = $test:expr
    ) => {
        $(#[$meta])*
        #[pyfunction]
        #[pyo3(signature = (scores, covar, method, $option=$default))]
        pub(super) fn $name(
            py: Python<'_>,
            scores: PyReadonlyArray2<'_, f64>,
            covar: PyReadonlyArray2<'_, f64>,
            method: Chosen<Method>,
            $option: $ty,
        ) -> PyResult<$result> {
            let Chosen(method) = method;
            let scores = to_mat(&scores.as_array());
            let covar = to_mat(&covar.as_array());
            let test = $test;
            let out = py.allow_threads(|| test(&scores, &covar, method, $option))?;
            Ok($result::new(py, out))
        }
    };
}

result_class! {
    /// The lagged-regression test of every pair of columns.
    LaggedResult from LaggedMatrices {
        matrix: estimate, innovation_estimate, statistic, p_value, df;
        vector: lag1, control_df;
        value: n: usize, k: usize;
    }
}

/// The lagged regressions' control of a `Linear()` or `Gam(...)` control argument (None: linear).
fn lagged_control(fit: Option<ControlArgument>) -> LaggedControl {
    match control_of(fit) {
        Control::Linear => LaggedControl::Linear,
        Control::Gam(options) => LaggedControl::Gam(options),
    }
}

pair_test_binding! {
    /// The lagged-regression test of every pair of columns
    /// ([`crate::autocorr::lagged_partial_corr_matrix_with`]) under `fit`, a `Linear()` or `Gam(...)` control
    /// (None: linear); a GAM's k is lowered to what n − 1 rows support.
    lagged_partial_corr(fit: Option<ControlArgument> = None) -> LaggedResult =
        |scores, covar, method, fit| lagged_partial_corr_matrix_with(scores, covar, method, lagged_control(fit))
}

result_class! {
    /// The AR(1)-prewhitened test of every pair of columns.
    PrewhitenedResult from PrewhitenedMatrices {
        matrix: estimate, whitened_estimate, statistic, p_value, naive_p_value;
        vector: phi, lag1;
        value: n: usize, k: usize, df: f64;
    }
}

pair_test_binding! {
    /// The AR(1)-prewhitened test of every pair of columns
    /// ([`crate::autocorr::prewhitened_partial_corr_matrix`]).
    prewhitened_partial_corr(bias_correction: bool = true) -> PrewhitenedResult = prewhitened_partial_corr_matrix
}

/// Lag-1 autocorrelation of every column of `series`, (n, m) with rows in step order
/// ([`crate::autocorr::lag1_autocorrelations`]).
#[pyfunction]
pub(super) fn lag1_autocorrelation(
    py: Python<'_>,
    series: PyReadonlyArray2<'_, f64>,
) -> PyResult<Py<PyArray1<f64>>> {
    let series = to_mat(&series.as_array());
    Ok(vector(py, lag1_autocorrelations(&series)))
}
