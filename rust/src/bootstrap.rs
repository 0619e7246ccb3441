//! Bootstrap confidence intervals for partial correlations, every pair of a run at once.
//!
//! Each replicate resamples checkpoints (rows) of the scores and the covariates together — independently,
//! in moving blocks or in circular blocks — and recomputes the partial correlations from scratch, so the
//! uncertainty of the residualisation is part of the interval. Intervals are percentile or BCa
//! (Efron, 1987; Efron & Tibshirani, 1993, ch. 14). Quantiles interpolate linearly between order statistics
//! (R's type 7, numpy's default). A replicate in which a resampled column or covariate is constant or
//! collinear has no partial correlation; it is left out and counted (`n_valid`).

use std::ops::Range;

use rayon::prelude::*;

use crate::control::{residualise_run, Control};
use crate::dist::{normal_cdf, normal_quantile};
use crate::error::{Result, StatsError};
use crate::matrix::{dot, Mat};
use crate::pcor::Method;
use crate::rng::{bootstrap_into, BootstrapScheme};

const CHUNK: u64 = 32;

/// Which interval is computed from the replicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalMethod {
    Percentile,
    Bca,
}

impl IntervalMethod {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "percentile" => Ok(IntervalMethod::Percentile),
            "bca" | "BCa" => Ok(IntervalMethod::Bca),
            other => Err(StatsError::invalid(
                "ci_method",
                format!("unknown interval {other:?}; expected \"percentile\" or \"bca\""),
            )),
        }
    }
}

/// The data of one run.
pub struct BootstrapRun {
    pub scores: Mat,
    pub covar: Mat,
    pub scheme: BootstrapScheme,
    /// The control refitted on every replicate (under GAM, smoothing parameters are chosen again).
    pub control: Control,
}

/// The partial correlations of the upper-triangle pairs (a < b, in row-major order), or `None` when the
/// data are degenerate.
pub fn pair_correlations(scores: &Mat, covar: &Mat, method: Method, control: &Control) -> Option<Vec<f64>> {
    let residuals = residualise_run(scores, covar, method, control)
        .ok()?
        .unit_residuals;
    let m = residuals.ncols();
    let mut out = Vec::with_capacity(m * (m - 1) / 2);
    for a in 0..m {
        for b in (a + 1)..m {
            out.push(dot(residuals.col(a), residuals.col(b)).clamp(-1.0, 1.0));
        }
    }
    Some(out)
}

/// Replicates `range` of one run: one row of pair correlations per replicate (NaN for a degenerate one).
pub fn replicates(run: &BootstrapRun, method: Method, seed: u64, range: Range<u64>) -> Vec<Vec<f64>> {
    let n = run.scores.nrows();
    let m = run.scores.ncols();
    let pairs = m * (m - 1) / 2;
    let mut rows = vec![0usize; n];
    range
        .map(|index| {
            bootstrap_into(n, run.scheme, seed, index, &mut rows);
            let scores = run.scores.gather_rows(&rows);
            let covar = run.covar.gather_rows(&rows);
            pair_correlations(&scores, &covar, method, &run.control).unwrap_or_else(|| vec![f64::NAN; pairs])
        })
        .collect()
}

/// Replicates `range` of every run, in parallel; the order of the result is the replicate order.
pub fn replicates_batch(
    runs: &[BootstrapRun],
    method: Method,
    seed: u64,
    range: Range<u64>,
) -> Vec<Vec<Vec<f64>>> {
    let tasks: Vec<(usize, Range<u64>)> = (0..runs.len())
        .flat_map(|run| {
            let range = range.clone();
            (range.start..range.end)
                .step_by(CHUNK as usize)
                .map(move |start| (run, start..(start + CHUNK).min(range.end)))
        })
        .collect();
    let chunks: Vec<(usize, Vec<Vec<f64>>)> = tasks
        .into_par_iter()
        .map(|(run, chunk)| (run, replicates(&runs[run], method, seed, chunk)))
        .collect();
    let mut out: Vec<Vec<Vec<f64>>> = runs.iter().map(|_| Vec::new()).collect();
    // `collect` on an indexed parallel iterator keeps task order, so replicates stay in index order.
    for (run, rows) in chunks {
        out[run].extend(rows);
    }
    out
}

/// Leave-one-out partial correlations (for the BCa acceleration): one row per deleted checkpoint.
pub fn jackknife(scores: &Mat, covar: &Mat, method: Method, control: &Control) -> Vec<Vec<f64>> {
    let n = scores.nrows();
    (0..n)
        .into_par_iter()
        .map(|left_out| {
            let rows: Vec<usize> = (0..n).filter(|&i| i != left_out).collect();
            let m = scores.ncols();
            pair_correlations(
                &scores.gather_rows(&rows),
                &covar.gather_rows(&rows),
                method,
                control,
            )
            .unwrap_or_else(|| vec![f64::NAN; m * (m - 1) / 2])
        })
        .collect()
}

/// Type-7 quantile of sorted values.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let low = h.floor() as usize;
    let high = (low + 1).min(sorted.len() - 1);
    sorted[low] + (h - low as f64) * (sorted[high] - sorted[low])
}

/// One pair's interval from its replicates.
///
/// Percentile: the α/2 and 1 − α/2 quantiles. BCa: the quantiles at Φ(z₀ + (z₀ + z_q)/(1 − â(z₀ + z_q))) for
/// z_q = Φ⁻¹(α/2), Φ⁻¹(1 − α/2), with bias correction z₀ = Φ⁻¹(#{r* < r̂}/B) and acceleration
/// â = Σ(θ̄ − θ₍ᵢ₎)³ / (6 [Σ(θ̄ − θ₍ᵢ₎)²]^{3/2}) from the jackknife values θ₍ᵢ₎. NaN bounds when the bias
/// correction is infinite (every replicate on one side of r̂) or no replicate is valid.
pub fn interval(
    replicates: &mut Vec<f64>,
    estimate: f64,
    jackknife: Option<&[f64]>,
    level: f64,
    method: IntervalMethod,
) -> (f64, f64, usize) {
    replicates.retain(|v| v.is_finite());
    let valid = replicates.len();
    let alpha = 1.0 - level;
    let (q_low, q_high) = match method {
        IntervalMethod::Percentile => (alpha / 2.0, 1.0 - alpha / 2.0),
        IntervalMethod::Bca => {
            let below = replicates.iter().filter(|&&v| v < estimate).count();
            let z0 = normal_quantile(below as f64 / valid as f64);
            let acceleration = jackknife.map_or(0.0, acceleration);
            let adjust = |q: f64| {
                let zq = normal_quantile(q);
                normal_cdf(z0 + (z0 + zq) / (1.0 - acceleration * (z0 + zq)))
            };
            (adjust(alpha / 2.0), adjust(1.0 - alpha / 2.0))
        }
    };
    if valid == 0 || !q_low.is_finite() || !q_high.is_finite() {
        return (f64::NAN, f64::NAN, valid);
    }
    (
        quantile_select(replicates, q_low),
        quantile_select(replicates, q_high),
        valid,
    )
}

/// Type-7 quantile by selection (two order statistics) instead of a full sort; reorders `values`.
pub fn quantile_select(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let h = (values.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let low = h.floor() as usize;
    let (_, pivot, upper) = values.select_nth_unstable_by(low, |a, b| a.total_cmp(b));
    let below = *pivot;
    match upper.iter().copied().min_by(|a, b| a.total_cmp(b)) {
        Some(above) => below + (h - low as f64) * (above - below),
        None => below,
    }
}

/// Intervals of every pair of one run, in parallel over pairs: (low, high, valid replicates) as m × m
/// symmetric matrices (unit diagonal for the bounds). `replicates` holds one row of pair values per replicate
/// (upper triangle, row-major), `jackknife` the leave-one-out rows for BCa.
pub fn run_intervals(
    replicates: &[Vec<f64>],
    estimate: &Mat,
    jackknife: Option<&[Vec<f64>]>,
    level: f64,
    method: IntervalMethod,
) -> (Mat, Mat, Mat) {
    let m = estimate.ncols();
    let pairs: Vec<(usize, usize)> = (0..m).flat_map(|a| ((a + 1)..m).map(move |b| (a, b))).collect();
    let bounds: Vec<(f64, f64, usize)> = pairs
        .par_iter()
        .enumerate()
        .map(|(pair, &(a, b))| {
            let mut values: Vec<f64> = replicates.iter().map(|row| row[pair]).collect();
            let jack: Option<Vec<f64>> = jackknife.map(|rows| rows.iter().map(|row| row[pair]).collect());
            interval(&mut values, estimate.get(a, b), jack.as_deref(), level, method)
        })
        .collect();
    let mut low = Mat::filled(m, m, 1.0);
    let mut high = Mat::filled(m, m, 1.0);
    let mut valid = Mat::filled(m, m, replicates.len() as f64);
    for (&(a, b), &(lo, hi, n_valid)) in pairs.iter().zip(&bounds) {
        for (x, y) in [(a, b), (b, a)] {
            low.set(x, y, lo);
            high.set(x, y, hi);
            valid.set(x, y, n_valid as f64);
        }
    }
    (low, high, valid)
}

/// Jackknife acceleration from leave-one-out values (non-finite ones skipped).
pub fn acceleration(values: &[f64]) -> f64 {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() < 3 {
        return 0.0;
    }
    let centre = finite.iter().sum::<f64>() / finite.len() as f64;
    let (mut s2, mut s3) = (0.0, 0.0);
    for v in &finite {
        let d = centre - v;
        s2 += d * d;
        s3 += d * d * d;
    }
    if s2 == 0.0 {
        0.0
    } else {
        s3 / (6.0 * s2.powf(1.5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256pp;

    #[test]
    fn type7_quantiles() {
        // numpy.quantile([1, 2, 4, 8], [0.1, 0.5, 0.9]) = [1.3, 3.0, 6.8]
        let sorted = [1.0, 2.0, 4.0, 8.0];
        assert!((quantile_sorted(&sorted, 0.1) - 1.3).abs() < 1e-12);
        assert!((quantile_sorted(&sorted, 0.5) - 3.0).abs() < 1e-12);
        assert!((quantile_sorted(&sorted, 0.9) - 6.8).abs() < 1e-12);
    }

    #[test]
    fn selection_quantiles_equal_sorted_quantiles() {
        let mut rng = Xoshiro256pp::seed_from_u64(9);
        let values: Vec<f64> = (0..257).map(|_| rng.next_normal()).collect();
        let mut sorted = values.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        for q in [0.0, 0.025, 0.3, 0.5, 0.975, 1.0] {
            let mut scratch = values.clone();
            assert_eq!(quantile_select(&mut scratch, q), quantile_sorted(&sorted, q));
        }
    }

    #[test]
    fn bca_without_bias_or_acceleration_is_percentile() {
        let mut rng = Xoshiro256pp::seed_from_u64(3);
        let mut values: Vec<f64> = (0..1001).map(|_| rng.next_normal()).collect();
        values.sort_by(|a, b| a.total_cmp(b));
        let median = values[500];
        let mut a = values.clone();
        let mut b = values.clone();
        let percentile = interval(&mut a, median, None, 0.9, IntervalMethod::Percentile);
        let bca = interval(&mut b, median, None, 0.9, IntervalMethod::Bca);
        // 500 of 1001 replicates below the median: z0 = qnorm(500/1001) ≈ −0.00125, a tiny shift
        assert!((percentile.0 - bca.0).abs() < 0.01 && (percentile.1 - bca.1).abs() < 0.01);
    }

    #[test]
    fn replicates_are_reproducible_in_batch() {
        let mut rng = Xoshiro256pp::seed_from_u64(1);
        let n = 25;
        let scores = Mat::from_col_major(n, 3, (0..3 * n).map(|_| rng.next_normal()).collect()).unwrap();
        let covar = Mat::from_col_major(n, 1, (0..n).map(|i| i as f64).collect()).unwrap();
        let run = BootstrapRun {
            scores,
            covar,
            scheme: BootstrapScheme::CircularBlock { length: 4 },
            control: Control::Linear,
        };
        let single = replicates(&run, Method::Pearson, 7, 0..100);
        let batch = replicates_batch(std::slice::from_ref(&run), Method::Pearson, 7, 0..100);
        assert_eq!(single, batch[0]);
    }
}
