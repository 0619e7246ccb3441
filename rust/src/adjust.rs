//! Multiple-comparison adjustment with the names and semantics of R's `p.adjust` (R 4.2).
//!
//! NaN p-values stay NaN and are not counted among the tests. Methods: Holm (1979), Hochberg (1988),
//! Hommel (1988), Bonferroni, Benjamini & Hochberg (1995) ("BH", alias "fdr"), Benjamini & Yekutieli (2001)
//! ("BY"), and "none".

use std::collections::VecDeque;

use crate::choice::Choice;
use crate::error::{Result, StatsError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adjustment {
    Holm,
    Hochberg,
    Hommel,
    Bonferroni,
    BenjaminiHochberg,
    BenjaminiYekutieli,
    None,
}

impl Choice for Adjustment {
    const OPTION: &'static str = "method";
    const WHAT: &'static str = "adjustment";
    const NAMES: &'static [(&'static str, Self)] = &[
        ("holm", Adjustment::Holm),
        ("hochberg", Adjustment::Hochberg),
        ("hommel", Adjustment::Hommel),
        ("bonferroni", Adjustment::Bonferroni),
        ("BH", Adjustment::BenjaminiHochberg),
        ("fdr", Adjustment::BenjaminiHochberg),
        ("BY", Adjustment::BenjaminiYekutieli),
        ("none", Adjustment::None),
    ];
}

/// Adjusted p-values, in the input order.
pub fn p_adjust(p: &[f64], method: Adjustment) -> Result<Vec<f64>> {
    p_adjust_with(p, method, &|| Ok::<(), StatsError>(()))
}

/// Most p-values one adjustment takes: the copies, order and work arrays of [`p_adjust_with`] (about twelve
/// numbers per p-value) stay within [`crate::bounds::check_array`]'s memory limit.
pub const WORK_PER_P_VALUE: usize = 12;

/// [`p_adjust`], calling `progress` between the passes of a long adjustment (Hommel's on millions of
/// p-values); an `Err` from it stops the adjustment and is returned. Refuses, before any work, an input whose
/// work arrays would exceed the memory limit.
pub fn p_adjust_with<E: From<StatsError>>(
    p: &[f64],
    method: Adjustment,
    progress: Progress<'_, E>,
) -> std::result::Result<Vec<f64>, E> {
    crate::bounds::check_array(
        "p",
        &[p.len(), WORK_PER_P_VALUE],
        8,
        &format!("adjusting {} p-values", p.len()),
    )?;
    if let Some(bad) = p.iter().find(|v| !v.is_nan() && !(0.0..=1.0).contains(*v)) {
        return Err(StatsError::invalid("p", format!("p-values must lie in [0, 1], got {bad}")).into());
    }
    let valid_positions: Vec<usize> = (0..p.len()).filter(|&i| !p[i].is_nan()).collect();
    let values: Vec<f64> = valid_positions.iter().map(|&i| p[i]).collect();
    let mut out = p.to_vec();
    let n = values.len();
    if n <= 1 {
        return Ok(out);
    }
    let adjusted = match method {
        Adjustment::Hommel if n > 2 => hommel(&values, progress)?,
        other => adjust_valid(&values, other),
    };
    for (position, value) in valid_positions.into_iter().zip(adjusted) {
        out[position] = value;
    }
    Ok(out)
}

/// Indices that sort `values` ascending (stable, as R's `order`). Sorted as contiguous (value, index) pairs,
/// ties broken by the index: the same order as a stable sort, several times faster than sorting indices by
/// looking their values up (10^7 p-values).
fn order_ascending(values: &[f64]) -> Vec<usize> {
    order_by(values, |a, b| a.total_cmp(&b))
}

/// Indices that sort `values` descending, ties in input order (R's `order(p, decreasing = TRUE)`).
fn order_descending(values: &[f64]) -> Vec<usize> {
    order_by(values, |a, b| b.total_cmp(&a))
}

fn order_by(values: &[f64], compare: impl Fn(f64, f64) -> std::cmp::Ordering) -> Vec<usize> {
    let mut pairs: Vec<(f64, usize)> = values.iter().copied().zip(0..).collect();
    pairs.sort_unstable_by(|a, b| compare(a.0, b.0).then(a.1.cmp(&b.1)));
    pairs.into_iter().map(|(_, index)| index).collect()
}

fn scatter(order: &[usize], sorted_values: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; order.len()];
    for (rank, &index) in order.iter().enumerate() {
        out[index] = sorted_values[rank];
    }
    out
}

fn adjust_valid(p: &[f64], method: Adjustment) -> Vec<f64> {
    let n = p.len();
    let nf = n as f64;
    match method {
        Adjustment::None => p.to_vec(),
        Adjustment::Bonferroni => p.iter().map(|v| (nf * v).min(1.0)).collect(),
        Adjustment::Holm => {
            let order = order_ascending(p);
            let mut running: f64 = 0.0;
            let sorted: Vec<f64> = order
                .iter()
                .enumerate()
                .map(|(i, &index)| {
                    running = running.max((nf - i as f64) * p[index]);
                    running.min(1.0)
                })
                .collect();
            scatter(&order, &sorted)
        }
        // Hommel's reaches here for two p-values only, where R's is Hochberg's (more: `hommel`).
        Adjustment::Hochberg
        | Adjustment::Hommel
        | Adjustment::BenjaminiHochberg
        | Adjustment::BenjaminiYekutieli => {
            let order = order_descending(p);
            let harmonic: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
            let mut running = f64::INFINITY;
            let sorted: Vec<f64> = order
                .iter()
                .enumerate()
                .map(|(position, &index)| {
                    let i = (n - position) as f64; // R: i <- lp:1
                    let factor = match method {
                        Adjustment::Hochberg | Adjustment::Hommel => nf + 1.0 - i,
                        Adjustment::BenjaminiHochberg => nf / i,
                        _ => harmonic * nf / i,
                    };
                    running = running.min(factor * p[index]);
                    running.min(1.0)
                })
                .collect();
            scatter(&order, &sorted)
        }
    }
}

/// Hommel's procedure: R's `p.adjust(p, "hommel")` in O(n log n) (the sort) plus O(n), not R's O(n²).
///
/// R's loop, over j = n − 1 … 2 with the p-values sorted (1-based), sets q_i = min(j p_i, T_j) for
/// i ≤ n − j + 1 and q_i = C_j = min(j p_{n−j+1}, T_j) above, where T_j = min_{k=2..j} j p_{n−j+k} / k, and
/// keeps pa_i = max(S, max_j q_i), S = min_i n p_i / i; the result is max(pa_i, p_i). Three facts make it
/// linear:
///
/// - T_j / j = min_{l > n−j+1} p_l / (l − n + j) is a lower envelope of functions of j whose reciprocals are
///   lines, (j + l − n) / p_l, added in order of increasing slope as j grows: a monotone convex-hull queue
///   gives every T_j in O(n) ([`simes_tails`]).
/// - T_j / j is non-increasing in j (each step adds a term and divides every term by a larger k), so for a
///   given p_i the j with j p_i ≤ T_j form a prefix: min(j p_i, T_j) is j p_i up to a split point and T_j
///   after it. The split point and the upper end n − i + 1 both move down as i grows, so the largest T_j in
///   between is a sliding-window maximum (a monotone deque).
/// - The C_j that apply to p_i (j > n − i + 1) are a suffix: one running maximum.
///
/// `progress` is called every [`PROGRESS_EVERY`] steps of each pass; its error stops the computation.
fn hommel<E: From<StatsError>>(
    p_input: &[f64],
    progress: Progress<'_, E>,
) -> std::result::Result<Vec<f64>, E> {
    let n = p_input.len();
    let order = order_ascending(p_input);
    progress()?;
    let p: Vec<f64> = order.iter().map(|&i| p_input[i]).collect();
    // 0-based: p[i] is R's p[i + 1]; t[j] and c[j] are R's T_j and C_j for j in 2 ..= n − 1.
    let t = simes_tails(&p, progress)?;
    let nf = n as f64;
    // q <- pa <- rep.int(min(n * p / i), n)
    let initial = (0..n)
        .map(|i| nf * p[i] / (i + 1) as f64)
        .fold(f64::INFINITY, f64::min);
    let mut c_suffix = vec![f64::NEG_INFINITY; n + 1];
    for j in (2..n).rev() {
        let c = (j as f64 * p[n - j]).min(t[j]);
        c_suffix[j] = c_suffix[j + 1].max(c);
    }
    let mut sorted = Vec::with_capacity(n);
    // The window of j (split ..= upper) where T_j < j p_i, as a deque of j with decreasing t from back to front.
    let mut window: VecDeque<usize> = VecDeque::new();
    let mut split = n;
    for (i, &value) in p.iter().enumerate() {
        if i % PROGRESS_EVERY == PROGRESS_EVERY - 1 {
            progress()?;
        }
        // 1-based i + 1 ≤ n − j + 1 ⇔ j ≤ n − i.
        let upper = (n - i).min(n - 1);
        while split > 2 && ((split - 1) as f64 * value) > t[split - 1] {
            split -= 1;
            while window.back().is_some_and(|&j| t[j] <= t[split]) {
                window.pop_back();
            }
            window.push_back(split);
        }
        while window.front().is_some_and(|&j| j > upper) {
            window.pop_front();
        }
        let mut adjusted = initial.max(value);
        // j p_i for the j below the split (the largest is the maximum).
        let below = upper.min(split - 1);
        if below >= 2 {
            adjusted = adjusted.max(below as f64 * value);
        }
        if let Some(&j) = window.front() {
            adjusted = adjusted.max(t[j]);
        }
        // C_j for j > n − i (1-based i + 1: j ≥ n − i + 1).
        if n - i + 1 < n {
            adjusted = adjusted.max(c_suffix[n - i + 1]);
        }
        sorted.push(adjusted);
    }
    Ok(scatter(&order, &sorted))
}

/// Steps between two calls of the progress callback in the passes of [`hommel`].
const PROGRESS_EVERY: usize = 1 << 20;

/// Called between passes of a long adjustment; an `Err` stops it and is returned as is.
pub type Progress<'a, E> = &'a dyn Fn() -> std::result::Result<(), E>;

/// T_j = min_{k=2..j} j p_{n−j+k} / k for j = 2 … n − 1 (index j of the result; R's `q1`), p sorted ascending,
/// by a monotone convex-hull queue over the lines (j + l − n) / p_l (see [`hommel`]).
fn simes_tails<E: From<StatsError>>(
    p: &[f64],
    progress: Progress<'_, E>,
) -> std::result::Result<Vec<f64>, E> {
    let n = p.len();
    let mut t = vec![f64::INFINITY; n + 1];
    // Line of sorted position l (0-based; R's l + 1): value (j + c) / p[l] with c = l + 1 − n, active for
    // j ≥ n − l + 1. Compared without dividing by p (which may be 0 or subnormal).
    let offset = |l: usize| (l + 1) as f64 - n as f64;
    // Whether line b is at least line a at j: (j + c_b) / p_b ≥ (j + c_a) / p_a.
    let beats = |b: usize, a: usize, j: f64| (j + offset(b)) * p[a] >= (j + offset(a)) * p[b];
    // j at which line b (smaller p) overtakes line a: (c_a p_b − c_b p_a) / (p_a − p_b).
    let crossing = |a: usize, b: usize| (offset(a) * p[b] - offset(b) * p[a]) / (p[a] - p[b]);
    let mut hull: VecDeque<usize> = VecDeque::new();
    let mut zero = None;
    for (j, slot) in t.iter_mut().enumerate().take(n).skip(2) {
        if j % PROGRESS_EVERY == 0 {
            progress()?;
        }
        // Line l = n − j + 1 (0-based) becomes active: R's p[n − j + 2] with k = 2.
        let l = n - j + 1;
        if zero.is_none() {
            if p[l] == 0.0 {
                zero = Some(l);
            } else if hull.back().map_or(true, |&last| p[last] > p[l]) {
                // Equal p: the line already there has the larger intercept and dominates.
                while hull.len() >= 2 {
                    let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
                    if crossing(a, l) <= crossing(a, b) {
                        hull.pop_back();
                    } else {
                        break;
                    }
                }
                hull.push_back(l);
            }
        }
        if zero.is_some() {
            *slot = 0.0;
            continue;
        }
        let x = j as f64;
        while hull.len() >= 2 && beats(hull[1], hull[0], x) {
            hull.pop_front();
        }
        let best = hull[0];
        let k = (best + 1 + j - n) as f64;
        *slot = x * p[best] / k;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256pp;

    /// R's `p.adjust(p, "hommel")` transcribed line by line (O(n²)): the reference of the fast [`hommel`].
    fn hommel_as_r(p_input: &[f64]) -> Vec<f64> {
        let n = p_input.len();
        let order = order_ascending(p_input);
        let p: Vec<f64> = order.iter().map(|&i| p_input[i]).collect();
        let initial = (0..n)
            .map(|i| n as f64 * p[i] / (i + 1) as f64)
            .fold(f64::INFINITY, f64::min);
        let mut q = vec![initial; n];
        let mut pa = vec![initial; n];
        for j in (2..n).rev() {
            let split = n - j + 1;
            let q1 = (split..n)
                .enumerate()
                .map(|(offset, index)| j as f64 * p[index] / (offset + 2) as f64)
                .fold(f64::INFINITY, f64::min);
            for index in 0..split {
                q[index] = (j as f64 * p[index]).min(q1);
            }
            let tail = q[split - 1];
            for value in q.iter_mut().skip(split) {
                *value = tail;
            }
            for (a, b) in pa.iter_mut().zip(&q) {
                *a = a.max(*b);
            }
        }
        let sorted: Vec<f64> = pa.iter().zip(&p).map(|(a, b)| a.max(*b)).collect();
        scatter(&order, &sorted)
    }

    #[test]
    fn fast_hommel_equals_rs_algorithm_on_random_ties_and_zeros() {
        let mut rng = Xoshiro256pp::seed_from_u64(26);
        for case in 0..400 {
            let n = 3 + case % 97;
            let p: Vec<f64> = (0..n)
                .map(|_| {
                    let u = rng.next_f64();
                    match case % 5 {
                        0 => u,
                        1 => u.powi(6),               // many small p-values
                        2 => (u * 8.0).floor() / 8.0, // ties, zeros and ones
                        3 => {
                            if u < 0.3 {
                                0.0
                            } else {
                                u
                            }
                        }
                        _ => 1e-300 * u, // tiny (1/p overflows)
                    }
                })
                .collect();
            let fast = p_adjust(&p, Adjustment::Hommel).unwrap();
            let slow = hommel_as_r(&p);
            for (i, (a, b)) in fast.iter().zip(&slow).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12 * b.abs().max(1e-300),
                    "case {case} n {n} p[{i}]: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn a_long_adjustment_is_stopped_by_its_progress_callback() {
        let p: Vec<f64> = (1..=3_000_000).map(|i| i as f64 / 3e6).collect();
        let stop = || Err::<(), StatsError>(StatsError::invalid("p", "interrupted"));
        assert!(p_adjust_with(&p, Adjustment::Hommel, &stop).is_err());
        let calls = std::cell::Cell::new(0);
        let count = || {
            calls.set(calls.get() + 1);
            Ok::<(), StatsError>(())
        };
        p_adjust_with(&p, Adjustment::Hommel, &count).unwrap();
        assert!(calls.get() >= 4, "{}", calls.get());
    }

    const P: [f64; 6] = [0.01, 0.04, 0.03, 0.2, 0.005, 0.5];

    fn close(a: &[f64], b: &[f64]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn matches_r() {
        // R: p <- c(0.01, 0.04, 0.03, 0.2, 0.005, 0.5); p.adjust(p, m) for each method
        let cases: [(Adjustment, [f64; 6]); 6] = [
            (Adjustment::Holm, [0.05, 0.12, 0.12, 0.4, 0.03, 0.5]),
            (Adjustment::Hochberg, [0.05, 0.12, 0.12, 0.4, 0.03, 0.5]),
            (Adjustment::Hommel, [0.05, 0.12, 0.09, 0.4, 0.03, 0.5]),
            (Adjustment::Bonferroni, [0.06, 0.24, 0.18, 1.0, 0.03, 1.0]),
            (Adjustment::BenjaminiHochberg, [0.03, 0.06, 0.06, 0.24, 0.03, 0.5]),
            (
                Adjustment::BenjaminiYekutieli,
                [0.0735, 0.147, 0.147, 0.588, 0.0735, 1.0],
            ),
        ];
        for (method, want) in cases {
            close(&p_adjust(&P, method).unwrap(), &want);
        }
    }

    #[test]
    fn nan_is_kept_and_not_counted() {
        let out = p_adjust(&[0.01, f64::NAN, 0.04], Adjustment::Bonferroni).unwrap();
        assert_eq!(out[0], 0.02);
        assert!(out[1].is_nan());
        assert_eq!(out[2], 0.08);
    }

    fn check_all(p: &[f64], expected: [(Adjustment, &[f64]); 5]) {
        for (method, want) in expected {
            let got = p_adjust(p, method).unwrap();
            assert_eq!(got.len(), want.len());
            for (i, (x, y)) in got.iter().zip(want).enumerate() {
                assert!(
                    (x - y).abs() < 1e-12,
                    "{method:?} p[{i}]: got {x}, R says {y}; {got:?}"
                );
            }
        }
    }

    // The step-down running maximum (Holm), the step-up running minimum (Hochberg, BH, BY), the clip at 1 and
    // Hommel's max over j all change the answer on the inputs below; the inputs are unsorted so the
    // scatter back to input order is checked too. In `matches_r` above none of these steps matters.

    #[test]
    fn running_max_and_min_change_the_answer_six_tests() {
        // R 4.x: p <- c(0.011, 0.04, 0.01, 0.3, 0.02, 0.9)
        //        for (m in c("holm", "hochberg", "hommel", "BH", "BY")) print(p.adjust(p, m), digits = 17)
        // Holm without the running max would give 0.055 for p = 0.011 (5 × 0.011 < 6 × 0.01).
        check_all(
            &[0.011, 0.04, 0.01, 0.3, 0.02, 0.9],
            [
                (Adjustment::Holm, &[0.06, 0.12, 0.06, 0.6, 0.08, 0.9]),
                (Adjustment::Hochberg, &[0.055, 0.12, 0.055, 0.6, 0.08, 0.9]),
                (Adjustment::Hommel, &[0.05, 0.12, 0.05, 0.6, 0.08, 0.9]),
                (
                    Adjustment::BenjaminiHochberg,
                    &[0.033, 0.06, 0.033, 0.36, 0.04, 0.9],
                ),
                (
                    Adjustment::BenjaminiYekutieli,
                    &[0.08085, 0.147, 0.08085, 0.882, 0.098, 1.0],
                ),
            ],
        );
    }

    #[test]
    fn running_max_and_min_change_the_answer_eight_tests() {
        // R 4.x: p <- c(0.045, 0.04, 0.01, 0.03, 0.9, 0.041, 0.5, 0.002)
        //        for (m in c("holm", "hochberg", "hommel", "BH", "BY")) print(p.adjust(p, m), digits = 17)
        // Hochberg without the running min would give 0.16 for p = 0.04 (4 × 0.04 > 3 × 0.045); Holm's
        // clip at 1 applies to 0.5 and 0.9.
        check_all(
            &[0.045, 0.04, 0.01, 0.03, 0.9, 0.041, 0.5, 0.002],
            [
                (Adjustment::Holm, &[0.2, 0.2, 0.07, 0.18, 1.0, 0.2, 1.0, 0.016]),
                (
                    Adjustment::Hochberg,
                    &[0.135, 0.135, 0.07, 0.135, 0.9, 0.135, 0.9, 0.016],
                ),
                (
                    Adjustment::Hommel,
                    &[0.135, 0.12, 0.063, 0.09, 0.9, 0.123, 0.9, 0.016],
                ),
                (
                    Adjustment::BenjaminiHochberg,
                    &[0.06, 0.06, 0.04, 0.06, 0.9, 0.06, 0.5714285714285714, 0.016],
                ),
                (
                    Adjustment::BenjaminiYekutieli,
                    &[
                        0.16307142857142856,
                        0.16307142857142856,
                        0.10871428571428572,
                        0.16307142857142856,
                        1.0,
                        0.16307142857142856,
                        1.0,
                        0.04348571428571429,
                    ],
                ),
            ],
        );
    }

    #[test]
    fn running_max_and_min_change_the_answer_ten_tests() {
        // R 4.x: p <- c(0.01, 0.0101, 0.3, 0.031, 0.04, 0.2, 0.012, 0.5, 0.013, 0.9)
        //        for (m in c("holm", "hochberg", "hommel", "BH", "BY")) print(p.adjust(p, m), digits = 17)
        // Holm without the running max: 0.0909 for p = 0.0101 and 0.9 (not 1) for p = 0.9.
        check_all(
            &[0.01, 0.0101, 0.3, 0.031, 0.04, 0.2, 0.012, 0.5, 0.013, 0.9],
            [
                (
                    Adjustment::Holm,
                    &[0.1, 0.1, 0.9, 0.186, 0.2, 0.8, 0.1, 1.0, 0.1, 1.0],
                ),
                (
                    Adjustment::Hochberg,
                    &[0.0909, 0.0909, 0.9, 0.186, 0.2, 0.8, 0.091, 0.9, 0.091, 0.9],
                ),
                (
                    Adjustment::Hommel,
                    &[0.07, 0.0707, 0.75, 0.155, 0.2, 0.6, 0.084, 0.9, 0.091, 0.9],
                ),
                (
                    Adjustment::BenjaminiHochberg,
                    &[
                        0.0325,
                        0.0325,
                        0.375,
                        0.062,
                        0.06666666666666667,
                        0.28571428571428575,
                        0.0325,
                        0.5555555555555556,
                        0.0325,
                        0.9,
                    ],
                ),
                (
                    Adjustment::BenjaminiYekutieli,
                    &[
                        0.09519146825396824,
                        0.09519146825396824,
                        1.0,
                        0.18159603174603173,
                        0.19526455026455025,
                        0.8368480725623583,
                        0.09519146825396824,
                        1.0,
                        0.09519146825396824,
                        1.0,
                    ],
                ),
            ],
        );
    }

    #[test]
    fn holm_and_bonferroni_clip_at_one() {
        // R 4.x: p <- c(0.6, 0.02, 0.7, 0.01)
        //   p.adjust(p, "holm") = 1 0.06 1 0.04 (2 × 0.6 = 1.2 is clipped; 0.7 inherits the clipped 1)
        //   p.adjust(p, "bonferroni") = 1 0.08 1 0.04
        let p = [0.6, 0.02, 0.7, 0.01];
        for (method, want) in [
            (Adjustment::Holm, [1.0, 0.06, 1.0, 0.04]),
            (Adjustment::Bonferroni, [1.0, 0.08, 1.0, 0.04]),
        ] {
            let got = p_adjust(&p, method).unwrap();
            for (x, y) in got.iter().zip(want) {
                assert!((x - y).abs() < 1e-12, "{method:?}: {got:?}");
            }
        }
    }

    #[test]
    fn nan_is_not_counted_where_the_running_max_matters() {
        // R 4.x: p.adjust(c(0.02, NA, 0.019, 0.5), "holm") = 0.057 NA 0.057 0.5 (m = 3, not 4)
        //        p.adjust(c(0.02, NA, 0.019, 0.5), "BH")   = 0.03  NA 0.03  0.5
        let p = [0.02, f64::NAN, 0.019, 0.5];
        for (method, want) in [
            (Adjustment::Holm, [0.057, 0.057, 0.5]),
            (Adjustment::BenjaminiHochberg, [0.03, 0.03, 0.5]),
        ] {
            let got = p_adjust(&p, method).unwrap();
            assert!(got[1].is_nan());
            for (x, y) in [got[0], got[2], got[3]].iter().zip(want) {
                assert!((x - y).abs() < 1e-12, "{method:?}: {got:?}");
            }
        }
    }
}
