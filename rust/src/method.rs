//! Which correlation a statistic is built on: shared by the point estimates ([`crate::pcor`]), the control
//! ([`crate::control`]) and the resampling kernels, so that none of them has to import another for it.

use crate::choice::{self, Choice};

/// Which correlation the statistic is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Pearson,
    Spearman,
    Kendall,
}

impl Choice for Method {
    const OPTION: &'static str = "method";
    const WHAT: &'static str = "method";
    const NAMES: &'static [(&'static str, Self)] = &[
        ("pearson", Method::Pearson),
        ("spearman", Method::Spearman),
        ("kendall", Method::Kendall),
    ];
}

impl Method {
    pub fn name(self) -> &'static str {
        choice::name(self)
    }
}
