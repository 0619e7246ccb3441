//! Which correlation a statistic is built on: shared by the point estimates ([`crate::pcor`]), the control
//! ([`crate::control`]) and the resampling kernels, so that none of them has to import another for it.

use crate::error::{Result, StatsError};

/// Which correlation the statistic is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Pearson,
    Spearman,
    Kendall,
}

impl Method {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "pearson" => Ok(Method::Pearson),
            "spearman" => Ok(Method::Spearman),
            "kendall" => Ok(Method::Kendall),
            other => Err(StatsError::invalid(
                "method",
                format!("unknown method {other:?}; expected one of \"pearson\", \"spearman\", \"kendall\""),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Method::Pearson => "pearson",
            Method::Spearman => "spearman",
            Method::Kendall => "kendall",
        }
    }
}
