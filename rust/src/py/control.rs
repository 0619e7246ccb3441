//! The one conversion of a Python control value (`gengen.stats.controls.Linear` or `Gam`) into the core's
//! [`Control`]. The Python side has checked the value's fields when it was made; the core checks them again
//! here only as far as a direct call of `gengen._core` needs (names and k), with the same option names.

use pyo3::prelude::*;

use crate::control::Control;
use crate::error::StatsError;
use crate::gam::{Basis, EdfCap, GamOptions, SmoothMethod};

/// Smallest basis dimension of a penalised regression spline (Python's `MIN_GAM_K`).
const MIN_GAM_K: usize = 3;

/// The GAM's `max_edf` as Python holds it: a number, or `"auto"` for the default of n (None: no cap).
#[derive(FromPyObject)]
pub enum EdfCapArgument {
    Value(f64),
    Name(String),
}

/// The core's cap from Python's `max_edf`.
pub fn edf_cap_from(cap: &Option<EdfCapArgument>) -> Result<EdfCap, StatsError> {
    match cap {
        None => Ok(EdfCap::Off),
        Some(EdfCapArgument::Value(value)) if *value == f64::INFINITY => Ok(EdfCap::Off),
        Some(EdfCapArgument::Value(value)) => Ok(EdfCap::At(*value)),
        Some(EdfCapArgument::Name(name)) if name == "auto" => Ok(EdfCap::Auto),
        Some(EdfCapArgument::Name(name)) => Err(StatsError::invalid(
            "max_edf",
            format!("must be a number, \"auto\" or None, got {name:?}"),
        )),
    }
}

/// A control argument of the binding: `Linear()` or `Gam(k, method, basis, max_edf)` (read by their
/// attributes, so any object with the same `name` and fields converts the same way).
pub struct ControlArgument(pub Control);

impl<'py> FromPyObject<'py> for ControlArgument {
    fn extract_bound(value: &Bound<'py, PyAny>) -> PyResult<Self> {
        let name: String = value
            .getattr("name")
            .and_then(|name| name.extract())
            .map_err(|_| {
                StatsError::invalid("fit", "must be gengen.stats.Linear() or gengen.stats.Gam(...)")
            })?;
        match name.as_str() {
            "linear" => Ok(ControlArgument(Control::Linear)),
            "gam" => {
                let k: usize = value.getattr("k")?.extract()?;
                if k < MIN_GAM_K {
                    return Err(StatsError::invalid(
                        "k",
                        format!("must be an integer >= {MIN_GAM_K}, got {k}"),
                    )
                    .into());
                }
                let method: String = value.getattr("method")?.extract()?;
                let basis: String = value.getattr("basis")?.extract()?;
                let max_edf: Option<EdfCapArgument> = value.getattr("max_edf")?.extract()?;
                Ok(ControlArgument(Control::Gam(GamOptions {
                    k,
                    method: SmoothMethod::parse(&method, "gam_method")?,
                    basis: Basis::parse(&basis, "gam_basis")?,
                    max_edf: edf_cap_from(&max_edf)?,
                })))
            }
            other => Err(StatsError::invalid("fit", format!("unknown control {other:?}")).into()),
        }
    }
}

/// The control of an optional argument: None is the linear control.
pub fn control_of(fit: Option<ControlArgument>) -> Control {
    fit.map_or(Control::Linear, |ControlArgument(control)| control)
}
