//! The one error type of the numerical core.
//!
//! Every failure that bad input can cause is a [`StatsError`] value; the binding layer maps it to a Python
//! `ValueError` subclass carrying the same fields (`option`, `problem`, `run`). Nothing in the core panics on
//! user input.

use std::fmt;

/// What went wrong, naming the argument at fault so the message can be shown to a user as is; `run` is the
/// run of a batch call the argument belongs to, when the call has several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsError {
    /// An argument is malformed: wrong length, non-finite values, unknown option, too few observations…
    InvalidArgument {
        name: String,
        problem: String,
        run: Option<usize>,
    },
    /// The data are degenerate for the statistic asked for: a constant column, collinear covariates…
    Degenerate {
        name: String,
        problem: String,
        run: Option<usize>,
    },
}

impl StatsError {
    pub fn invalid(name: impl Into<String>, problem: impl Into<String>) -> Self {
        StatsError::InvalidArgument {
            name: name.into(),
            problem: problem.into(),
            run: None,
        }
    }

    pub fn degenerate(name: impl Into<String>, problem: impl Into<String>) -> Self {
        StatsError::Degenerate {
            name: name.into(),
            problem: problem.into(),
            run: None,
        }
    }

    /// The same error naming run `run` ("run 2: covar: …") when a batch has several runs.
    pub fn in_run(mut self, run: usize, runs: usize) -> Self {
        if runs > 1 {
            match &mut self {
                StatsError::InvalidArgument { run: at, .. } | StatsError::Degenerate { run: at, .. } => {
                    *at = Some(run)
                }
            }
        }
        self
    }

    /// The argument at fault.
    pub fn name(&self) -> &str {
        match self {
            StatsError::InvalidArgument { name, .. } | StatsError::Degenerate { name, .. } => name,
        }
    }

    /// What is wrong with it, without its name.
    pub fn problem(&self) -> &str {
        match self {
            StatsError::InvalidArgument { problem, .. } | StatsError::Degenerate { problem, .. } => problem,
        }
    }

    /// The run of a batch the argument belongs to (None: the call has one run, or the argument is the call's).
    pub fn run(&self) -> Option<usize> {
        match self {
            StatsError::InvalidArgument { run, .. } | StatsError::Degenerate { run, .. } => *run,
        }
    }
}

impl fmt::Display for StatsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(run) = self.run() {
            write!(f, "run {run}: ")?;
        }
        write!(f, "{}: {}", self.name(), self.problem())
    }
}

impl std::error::Error for StatsError {}

pub type Result<T> = std::result::Result<T, StatsError>;
