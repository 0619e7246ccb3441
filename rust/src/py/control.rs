//! The one conversion of a Python control value (`gengen.stats.controls.Linear` or `Gam`) into the core's
//! [`Control`]. The Python side has checked the value's fields when it was made; the core checks them again
//! here only as far as a direct call of `gengen._core` needs (names and k), with the same option names.

use pyo3::prelude::*;
use pyo3::types::PyString;

use super::choice::Chosen;
use crate::choice;
use crate::control::{Control, ControlKind};
use crate::error::StatsError;
use crate::gam::{Basis, EdfCap, GamOptions, SmoothMethod};

/// Smallest basis dimension of a penalised regression spline (Python's `MIN_GAM_K`).
const MIN_GAM_K: usize = 3;

/// The GAM's `max_edf` as Python holds it: a number (infinity: no cap), `"auto"` for the default of n, or
/// None for no cap.
pub struct EdfCapArgument(pub EdfCap);

impl<'py> FromPyObject<'py> for EdfCapArgument {
    fn extract_bound(value: &Bound<'py, PyAny>) -> PyResult<Self> {
        if value.is_none() {
            return Ok(EdfCapArgument(EdfCap::Off));
        }
        if value.is_instance_of::<PyString>() {
            let Chosen(cap) = value.extract::<Chosen<EdfCap>>()?;
            return Ok(EdfCapArgument(cap));
        }
        let cap: f64 = value.extract()?;
        Ok(EdfCapArgument(if cap == f64::INFINITY {
            EdfCap::Off
        } else {
            EdfCap::At(cap)
        }))
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
        match choice::parse::<ControlKind>(&name)? {
            ControlKind::Linear => Ok(ControlArgument(Control::Linear)),
            ControlKind::Gam => {
                let k: usize = value.getattr("k")?.extract()?;
                if k < MIN_GAM_K {
                    return Err(StatsError::invalid(
                        "k",
                        format!("must be an integer >= {MIN_GAM_K}, got {k}"),
                    )
                    .into());
                }
                let Chosen(method) = value.getattr("method")?.extract::<Chosen<SmoothMethod>>()?;
                let Chosen(basis) = value.getattr("basis")?.extract::<Chosen<Basis>>()?;
                let EdfCapArgument(max_edf) = value.getattr("max_edf")?.extract()?;
                Ok(ControlArgument(Control::Gam(GamOptions {
                    k,
                    method,
                    basis,
                    max_edf,
                })))
            }
        }
    }
}

/// The control of an optional argument: None is the linear control.
pub fn control_of(fit: Option<ControlArgument>) -> Control {
    fit.map_or(Control::Linear, |ControlArgument(control)| control)
}
