//! The one error type of the numerical core.
//!
//! Every failure that bad input can cause is a [`StatsError`] value; the binding layer maps it to a Python
//! `ValueError` subclass. Nothing in the core panics on user input.

use std::fmt;

/// What went wrong, naming the argument at fault so the message can be shown to a user as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsError {
    /// An argument is malformed: wrong length, non-finite values, unknown option, too few observations…
    InvalidArgument { name: String, problem: String },
    /// The data are degenerate for the statistic asked for: a constant column, collinear covariates…
    Degenerate { name: String, problem: String },
}

impl StatsError {
    pub fn invalid(name: impl Into<String>, problem: impl Into<String>) -> Self {
        StatsError::InvalidArgument {
            name: name.into(),
            problem: problem.into(),
        }
    }

    pub fn degenerate(name: impl Into<String>, problem: impl Into<String>) -> Self {
        StatsError::Degenerate {
            name: name.into(),
            problem: problem.into(),
        }
    }

    /// The same error naming run `run` ("run 2: covar: …") when a batch has several runs.
    pub fn in_run(self, run: usize, runs: usize) -> Self {
        if runs == 1 {
            return self;
        }
        match self {
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
}

impl fmt::Display for StatsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatsError::InvalidArgument { name, problem } | StatsError::Degenerate { name, problem } => {
                write!(f, "{name}: {problem}")
            }
        }
    }
}

impl std::error::Error for StatsError {}

pub type Result<T> = std::result::Result<T, StatsError>;
