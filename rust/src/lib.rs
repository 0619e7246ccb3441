//! gengen's numerical core.
//!
//! Pure numerics on plain slices and column-major matrices: residualisation, partial correlations with
//! ppcor's tests, Freedman–Lane permutation tests, bootstrap intervals, p-value adjustment. Nothing here knows
//! Python except the `py` module, compiled only with the `python` feature, which is the binding layer
//! (`gengen._core`): it converts arrays, calls the core with the GIL released and maps [`error::StatsError`]
//! to a Python exception. What a batch call does — kernel choice, thread pool, slices between which Ctrl-C
//! is checked — is [`batch`]'s, so cargo tests and benches reach it too.
//!
//! The modules form a directed acyclic graph (tested by `layering`): shared types such as
//! [`method::Method`] sit below their users, [`batch`] above the kernels it chooses between.

pub mod adjust;
pub mod autocorr;
pub mod batch;
pub mod bootstrap;
pub mod bootstrap_fast;
pub mod bounds;
pub mod choice;
pub mod control;
pub mod dist;
pub mod error;
pub mod fast_kernel;
pub mod gam;
pub mod matrix;
pub mod method;
pub mod pcor;
pub mod permutation;
pub mod permutation_fast;
pub mod rank;
pub mod residualise;
pub mod rng;
pub mod sieve;
pub mod sieve_bias;
pub mod simulate;

#[cfg(test)]
mod layering;

#[cfg(test)]
mod string_options;

#[cfg(feature = "python")]
mod py;

/// The `gengen._core` extension module: its one export list is `py::register`.
#[cfg(feature = "python")]
#[pyo3::pymodule]
fn _core(module: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    use pyo3::types::PyModuleMethods;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    py::register(module)
}
