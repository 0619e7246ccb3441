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

use crate::choice::Choice;
use crate::control::{residualise_run, Control};
use crate::dist::{normal_cdf, normal_quantile};
use crate::fast_kernel::run_chunks;
use crate::matrix::{dot, Mat};
use crate::method::Method;
use crate::rng::{bootstrap_into, BootstrapScheme};

const CHUNK: u64 = 32;

/// Which interval is computed from the replicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalMethod {
    Percentile,
    Bca,
}

impl Choice for IntervalMethod {
    const OPTION: &'static str = "ci_method";
    const WHAT: &'static str = "interval";
    const NAMES: &'static [(&'static str, Self)] = &[
        ("percentile", IntervalMethod::Percentile),
        ("bca", IntervalMethod::Bca),
    ];
    const ALIASES: &'static [(&'static str, Self)] = &[("BCa", IntervalMethod::Bca)];
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
    let tasks = run_chunks(runs.len(), range, CHUNK);
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
///
/// The two neighbouring order statistics come from one selection and a scan of the smaller side of it: in
/// the lower half the upper one is selected and the lower one is the largest value before it, in the upper
/// half the other way round (for a 2.5% quantile of 2,000 values, a scan of 50 values instead of 1,950).
pub fn quantile_select(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let h = (values.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let low = h.floor() as usize;
    let order = |a: &f64, b: &f64| a.total_cmp(b);
    if low + 1 < values.len() / 2 {
        let (lower, pivot, _) = values.select_nth_unstable_by(low + 1, order);
        let above = *pivot;
        let below = lower.iter().copied().max_by(order).unwrap_or(above);
        return below + (h - low as f64) * (above - below);
    }
    let (_, pivot, upper) = values.select_nth_unstable_by(low, order);
    let below = *pivot;
    match upper.iter().copied().min_by(order) {
        Some(above) => below + (h - low as f64) * (above - below),
        None => below,
    }
}

/// Intervals of every pair of one run, in parallel over pairs: (low, high, valid replicates) as m × m
/// symmetric matrices (unit diagonal for the bounds). `replicates` holds `count` rows of pair values, one
/// per replicate (upper triangle, row-major), in pieces of one or more consecutive rows; `jackknife` the
/// leave-one-out rows for BCa.
pub fn run_intervals(
    replicates: &[Vec<f64>],
    count: usize,
    estimate: &Mat,
    jackknife: Option<&[Vec<f64>]>,
    level: f64,
    method: IntervalMethod,
) -> (Mat, Mat, Mat) {
    let m = estimate.ncols();
    let pairs: Vec<(usize, usize)> = (0..m).flat_map(|a| ((a + 1)..m).map(move |b| (a, b))).collect();
    let stride = pairs.len();
    let bounds: Vec<(f64, f64, usize)> = pairs
        .par_iter()
        .enumerate()
        .map(|(pair, &(a, b))| {
            let mut values = Vec::with_capacity(count);
            for piece in replicates {
                values.extend(piece.iter().skip(pair).step_by(stride));
            }
            let jack: Option<Vec<f64>> = jackknife.map(|rows| rows.iter().map(|row| row[pair]).collect());
            interval(&mut values, estimate.get(a, b), jack.as_deref(), level, method)
        })
        .collect();
    let mut low = Mat::filled(m, m, 1.0);
    let mut high = Mat::filled(m, m, 1.0);
    let mut valid = Mat::filled(m, m, count as f64);
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
        for len in [1, 2, 3, 4, 5, 257, 2000] {
            let values: Vec<f64> = (0..len).map(|_| rng.next_normal()).collect();
            let mut sorted = values.clone();
            sorted.sort_by(|a, b| a.total_cmp(b));
            for q in [0.0, 0.025, 0.3, 0.45, 0.5, 0.55, 0.975, 1.0] {
                let mut scratch = values.clone();
                let got = quantile_select(&mut scratch, q);
                assert_eq!(
                    got.to_bits(),
                    quantile_sorted(&sorted, q).to_bits(),
                    "{len} values, q = {q}"
                );
            }
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

    /// 1999 skewed replicates u³, u = (i + ½)/1999, plus three non-finite ones that must be dropped.
    fn skewed_replicates() -> Vec<f64> {
        let mut values: Vec<f64> = (0..1999)
            .map(|i| {
                let u = (i as f64 + 0.5) / 1999.0;
                u * u * u
            })
            .collect();
        values.extend([f64::NAN, f64::NAN, f64::INFINITY]);
        values
    }

    /// Jackknife values with one low outlier: a large positive acceleration (â ≈ 0.144; typical â is 0.01–0.05).
    const JACK_LOW: [f64; 15] = [
        0.21, 0.22, 0.2, 0.19, 0.23, 0.2, 0.21, 0.18, 0.22, 0.2, 0.19, 0.21, 0.2, 0.22, -0.15,
    ];

    fn assert_close(got: f64, want: f64, what: &str) {
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1e-3),
            "{what}: got {got}, boot::bca.ci says {want}"
        );
    }

    // Expected values from R's boot package (1.3-28), with boot's normal-scale interpolation between order
    // statistics replaced by type-7 quantiles (gengen's rule), so z0, â and the adjusted levels are boot's own:
    //   library(boot)
    //   assignInNamespace("norm.inter", function(t, alpha)
    //     cbind(alpha, quantile(t[is.finite(t)], alpha, type = 7, names = FALSE)), "boot")
    //   u <- ((0:1998) + 0.5) / 1999; t <- c(u * u * u, NaN, NA, Inf)
    //   jack_low <- c(0.21, 0.22, 0.2, 0.19, 0.23, 0.2, 0.21, 0.18, 0.22, 0.2, 0.19, 0.21, 0.2, 0.22, -0.15)
    //   for (jack in list(jack_low, 0.4 - jack_low)) for (conf in c(0.9, 0.95))
    //     print(boot:::bca.ci(NULL, conf = conf, t0 = 0.2, t = t, L = mean(jack) - jack), digits = 17)
    // (L = θ̄ − θ₍ᵢ₎ is the jackknife influence up to the factor n − 1, which cancels in â.) The same numbers
    // come from numpy/scipy: a = Σd³/(6(Σd²)^1.5), z0 = norm.ppf(mean(t < 0.2)), np.quantile(t, adjusted).
    // z0 = qnorm(1169/1999) = 0.2142; â = ±0.1441. With â = 0 the 90% interval would be [0.001408, 0.943159].

    #[test]
    fn bca_with_large_acceleration_matches_boot() {
        assert_close(acceleration(&JACK_LOW), 0.14410120883871488, "acceleration");
        let jack_high: Vec<f64> = JACK_LOW.iter().map(|v| 0.4 - v).collect();
        assert_close(acceleration(&jack_high), -0.1441012088387149, "acceleration");
        let cases: [(&[f64], f64, f64, f64); 4] = [
            (&JACK_LOW, 0.9, 0.004549449821835262, 0.9904385230512545),
            (&JACK_LOW, 0.95, 0.0016872607818319116, 0.9981649712253662),
            (&jack_high, 0.9, 0.0001790030328833505, 0.8664333215055868),
            (&jack_high, 0.95, 5.1882093155153515e-06, 0.9098503954810209),
        ];
        for (jack, level, low, high) in cases {
            let mut values = skewed_replicates();
            let (got_low, got_high, valid) =
                interval(&mut values, 0.2, Some(jack), level, IntervalMethod::Bca);
            assert_eq!(valid, 1999);
            assert_close(got_low, low, &format!("BCa low at {level}"));
            assert_close(got_high, high, &format!("BCa high at {level}"));
        }
    }

    #[test]
    fn bca_bias_correction_without_acceleration_matches_boot() {
        // R, set up as above, with â = 0 (L = c(0.5, -0.5, 0)):
        //   for (t0 in c(0.2, t[1169])) for (conf in c(0.9, 0.95))
        //     print(boot:::bca.ci(NULL, conf = conf, t0 = t0, t = t, L = c(0.5, -0.5, 0)), digits = 17)
        // Only z0 moves these away from the percentile interval (90%: [0.000127, 0.8568]). The second estimate
        // equals a replicate (i = 1168), so counting #{r* ≤ r̂} instead of boot's #{r* < r̂} would give 1169
        // instead of 1168 and the first case's interval.
        let tied = {
            let u = 1168.5 / 1999.0;
            u * u * u
        };
        for (estimate, level, low, high) in [
            (0.2, 0.9, 0.001408280278230653, 0.9431590019118281),
            (0.2, 0.95, 0.0002503697683072882, 0.9740996424954966),
            (tied, 0.9, 0.0013899896937060953, 0.9428140666114319),
            (tied, 0.95, 0.00024661715362332763, 0.9739249694187243),
        ] {
            let mut values = skewed_replicates();
            let (got_low, got_high, _) = interval(&mut values, estimate, None, level, IntervalMethod::Bca);
            assert_close(got_low, low, &format!("BCa low at {level}, estimate {estimate}"));
            assert_close(
                got_high,
                high,
                &format!("BCa high at {level}, estimate {estimate}"),
            );
        }
    }
}
