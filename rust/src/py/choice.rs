//! The one conversion of a Python string option into the core's enum: [`Chosen<T>`] extracts any
//! [`Choice`] (`method: Chosen<Method>`), so a binding receives the value and no function body parses a
//! name. An unknown name raises `InvalidArgumentError` naming the option and the names it takes; a value that
//! is not a string raises pyo3's `TypeError` naming the argument, as a `&str` argument did.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;

use crate::choice::{self, Choice};
use crate::error::StatsError;

/// A string option converted, where it arrives, into its enum `T`.
pub struct Chosen<T>(pub T);

impl<'py, T: Choice> FromPyObject<'py> for Chosen<T> {
    fn extract_bound(value: &Bound<'py, PyAny>) -> PyResult<Self> {
        let name: PyBackedStr = value.extract()?;
        Ok(Chosen(choice::parse::<T>(&name)?))
    }
}

impl<T: Choice> Chosen<T> {
    /// The value of an option that may be left out: Python's `None` is the option's [`Choice::MISSING`].
    pub fn or_missing(value: Option<Self>) -> Result<T, StatsError> {
        match value {
            Some(Chosen(value)) => Ok(value),
            None => choice::parse_optional(None),
        }
    }
}
