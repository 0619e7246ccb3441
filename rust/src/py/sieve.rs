//! Bindings of the AR-sieve's kernels ([`crate::sieve::sieve_moments`], [`crate::sieve_bias::bias_refit_sums`])
//! and of the t tails over arrays that its tests use.

use numpy::ndarray::{Array2, Array3, Dimension};
use numpy::{Element, IntoPyArray, PyArray1, PyArray2, PyArray3, PyReadonlyArray, PyReadonlyArray1};
use numpy::{PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;

use crate::error::StatsError;
use crate::sieve::{sieve_moments as moments, ArControl, Chunk, SieveModel};
use crate::sieve_bias::{bias_refit_sums, BiasModel};

/// The array's values in row-major order, without a copy (the Python side passes C-contiguous arrays).
fn values<'a, T: Element, D: Dimension>(
    array: &'a PyReadonlyArray<'_, T, D>,
    name: &str,
) -> Result<&'a [T], StatsError> {
    array
        .as_slice()
        .map_err(|_| StatsError::invalid(name, "must be a C-contiguous array"))
}

/// Non-negative integers (orders, ranks) as `usize`.
fn counts(array: &PyReadonlyArray1<'_, i64>, name: &str) -> Result<Vec<usize>, StatsError> {
    array
        .as_array()
        .iter()
        .map(|&value| usize::try_from(value).map_err(|_| StatsError::invalid(name, "must be non-negative")))
        .collect()
}

/// The AR models and the control's operators both sieve bindings take: coefficients (m, p), `keep` of
/// `steps` generated steps, basis (keep, r) and mix (m, r, r), without a copy.
fn ar_control<'a>(
    coef: &'a PyReadonlyArray2<'_, f64>,
    keep: usize,
    steps: usize,
    basis: &'a PyReadonlyArray2<'_, f64>,
    mix: &'a PyReadonlyArray3<'_, f64>,
) -> Result<ArControl<'a>, StatsError> {
    let (m, p) = coef.as_array().dim();
    Ok(ArControl {
        m,
        n: keep,
        p,
        steps,
        coef: values(coef, "coef")?,
        basis: values(basis, "basis")?,
        r: basis.as_array().dim().1,
        mix: values(mix, "mix")?,
    })
}

/// Declares the binding of a sieve kernel, `name(coef, <own arrays>, start, keep, basis, mix, <own arrays>)`
/// in Python: the AR models and the control's operators that both kernels take ([`ar_control`]) have their
/// types and places here. A binding names the interpreter, `coef` and `[start, keep, basis, mix]` where they
/// stand, declares its own arguments and gives its body.
macro_rules! sieve_binding {
    (
        $(#[$meta:meta])*
        fn $name:ident<$py:lifetime>(
            $python:ident, $coef:ident, $($own:ident: $own_ty:ty,)*
            [$start:ident, $keep:ident, $basis:ident, $mix:ident] $(, $after:ident: $after_ty:ty)* $(,)?
        ) -> $out:ty $body:block
    ) => {
        $(#[$meta])*
        #[pyfunction]
        #[allow(clippy::too_many_arguments)]
        pub(super) fn $name<$py>(
            $python: Python<$py>,
            $coef: PyReadonlyArray2<$py, f64>,
            $($own: $own_ty,)*
            $start: PyReadonlyArray3<$py, f64>,
            $keep: usize,
            $basis: PyReadonlyArray2<$py, f64>,
            $mix: PyReadonlyArray3<$py, f64>,
            $($after: $after_ty,)*
        ) -> PyResult<Bound<$py, $out>> $body
    };
}

sieve_binding! {
    /// Σ z and Σ z² of a chunk of sieve replicates and of their white twins, shape (4, m, m): coefficients
    /// (m, p), pool (m, P), picks (b, steps) into the pool's columns, spread (m, steps), start (b, m, p) or
    /// (0, 0, 0) for zeros, keep n, basis (n, r), mix (m, r, r).
    fn sieve_moments<'py>(
        py, coef,
        pool: PyReadonlyArray2<'py, f64>,
        picks: PyReadonlyArray2<'py, i64>,
        spread: PyReadonlyArray2<'py, f64>,
        [start, keep, basis, mix]
    ) -> PyArray3<f64> {
        let m = coef.as_array().dim().0;
        let (pool_m, pool_len) = pool.as_array().dim();
        let (replicates, steps) = picks.as_array().dim();
        let (spread_m, spread_steps) = spread.as_array().dim();
        let basis_n = basis.as_array().dim().0;
        if pool_m != m || spread_m != m || spread_steps != steps || basis_n != keep {
            return Err(StatsError::invalid(
                "pool, spread, basis",
                format!("shapes disagree: {m} series and {steps} steps kept as {keep}"),
            )
            .into());
        }
        let model = SieveModel {
            ar: ar_control(&coef, keep, steps, &basis, &mix)?,
            pool: values(&pool, "pool")?,
            pool_len,
            spread: values(&spread, "spread")?,
        };
        let chunk = Chunk::new(values(&picks, "picks")?, values(&start, "start")?, replicates);
        let out = py.allow_threads(|| moments(&model, chunk))?;
        let array = Array3::from_shape_vec((4, m, m), out)
            .map_err(|error| StatsError::invalid("m", error.to_string()))?;
        Ok(array.into_pyarray(py))
    }
}

sieve_binding! {
    /// Sums over replicates of the refitted AR coefficients, shape (m, p): coefficients (m, p) that generate,
    /// each series' refit order (m,), shocks (b, m, steps), start (b, m, p) or (0, 0, 0) for zeros, keep n,
    /// basis (n, r), mix (m, r, r), exogenous bases (p, n − p, q) and their ranks (p,).
    fn sieve_bias_refit<'py>(
        py, coef,
        order: PyReadonlyArray1<'py, i64>,
        shocks: PyReadonlyArray3<'py, f64>,
        [start, keep, basis, mix],
        exogenous: PyReadonlyArray3<'py, f64>,
        exogenous_rank: PyReadonlyArray1<'py, i64>,
    ) -> PyArray2<f64> {
        let (m, p) = coef.as_array().dim();
        let (replicates, shocks_m, steps) = shocks.as_array().dim();
        let (_, _, q) = exogenous.as_array().dim();
        if shocks_m != m {
            return Err(StatsError::invalid("shocks", format!("has {shocks_m} series but coef has {m}")).into());
        }
        let (order, exogenous_rank) = (
            counts(&order, "order")?,
            counts(&exogenous_rank, "exogenous_rank")?,
        );
        let model = BiasModel {
            ar: ar_control(&coef, keep, steps, &basis, &mix)?,
            order: &order,
            exogenous: values(&exogenous, "exogenous")?,
            q,
            exogenous_rank: &exogenous_rank,
        };
        let chunk = Chunk::new(values(&shocks, "shocks")?, values(&start, "start")?, replicates);
        let out = py.allow_threads(|| bias_refit_sums(&model, chunk))?;
        let array = Array2::from_shape_vec((m, p), out)
            .map_err(|error| StatsError::invalid("coef", error.to_string()))?;
        Ok(array.into_pyarray(py))
    }
}

/// 2·P(T > |t|) for Student's t, entry by entry of `t` and `df` (equal lengths): `t_two_sided` over arrays.
#[pyfunction]
pub(super) fn t_two_sided_array<'py>(
    py: Python<'py>,
    t: PyReadonlyArray1<'py, f64>,
    df: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (t, df) = (t.as_array(), df.as_array());
    if t.len() != df.len() {
        return Err(
            StatsError::invalid("t, df", format!("lengths differ: {} and {}", t.len(), df.len())).into(),
        );
    }
    let out: Vec<f64> = t
        .iter()
        .zip(df.iter())
        .map(|(&t, &df)| crate::dist::t_two_sided(t, df))
        .collect();
    Ok(out.into_pyarray(py))
}

/// The `p` quantile of Student's t on each of `df`: `t_quantile` over an array.
#[pyfunction]
pub(super) fn t_quantile_array<'py>(
    py: Python<'py>,
    p: f64,
    df: PyReadonlyArray1<'py, f64>,
) -> Bound<'py, PyArray1<f64>> {
    let out: Vec<f64> = df
        .as_array()
        .iter()
        .map(|&df| crate::dist::t_quantile(p, df))
        .collect();
    out.into_pyarray(py)
}
