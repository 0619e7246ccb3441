//! Binding of the AR-sieve's replicate kernel ([`crate::sieve::sieve_moments`]).

use numpy::ndarray::Array3;
use numpy::{IntoPyArray, PyArray3, PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;

use crate::error::StatsError;
use crate::sieve::{sieve_moments as moments, SieveModel};

/// Σ z and Σ z² of a chunk of sieve replicates and of their white twins, shape (4, m, m): coefficients
/// (m, p), pool (m, P), picks (b, steps) into the pool's columns, spread (m, steps), start (b, m, p) or
/// (0, 0, 0) for zeros, keep n, basis (n, r), mix (m, r, r).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn sieve_moments<'py>(
    py: Python<'py>,
    coef: PyReadonlyArray2<'py, f64>,
    pool: PyReadonlyArray2<'py, f64>,
    picks: PyReadonlyArray2<'py, i64>,
    spread: PyReadonlyArray2<'py, f64>,
    start: PyReadonlyArray3<'py, f64>,
    keep: usize,
    basis: PyReadonlyArray2<'py, f64>,
    mix: PyReadonlyArray3<'py, f64>,
) -> PyResult<Bound<'py, PyArray3<f64>>> {
    let (m, p) = coef.as_array().dim();
    let (pool_m, pool_len) = pool.as_array().dim();
    let (replicates, steps) = picks.as_array().dim();
    let (spread_m, spread_steps) = spread.as_array().dim();
    let (basis_n, r) = basis.as_array().dim();
    if pool_m != m || spread_m != m || spread_steps != steps || basis_n != keep {
        return Err(StatsError::invalid(
            "pool, spread, basis",
            format!("shapes disagree: {m} series and {steps} steps kept as {keep}"),
        )
        .into());
    }
    let flat = |values: numpy::ndarray::ArrayViewD<'_, f64>| values.iter().copied().collect::<Vec<f64>>();
    let coef = flat(coef.as_array().into_dyn());
    let pool = flat(pool.as_array().into_dyn());
    let spread = flat(spread.as_array().into_dyn());
    let basis = flat(basis.as_array().into_dyn());
    let mix = flat(mix.as_array().into_dyn());
    let start = flat(start.as_array().into_dyn());
    let picks: Vec<i64> = picks.as_array().iter().copied().collect();
    let model = SieveModel {
        m,
        n: keep,
        p,
        steps,
        coef: &coef,
        pool: &pool,
        pool_len,
        spread: &spread,
        basis: &basis,
        r,
        mix: &mix,
    };
    let out = py.allow_threads(|| moments(&model, &picks, &start, replicates))?;
    let array = Array3::from_shape_vec((4, m, m), out)
        .map_err(|error| StatsError::invalid("m", error.to_string()))?;
    Ok(array.into_pyarray(py))
}

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(sieve_moments, module)?)?;
    Ok(())
}
