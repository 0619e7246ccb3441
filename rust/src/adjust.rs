//! Multiple-comparison adjustment with the names and semantics of R's `p.adjust` (R 4.2).
//!
//! NaN p-values stay NaN and are not counted among the tests. Methods: Holm (1979), Hochberg (1988),
//! Hommel (1988), Bonferroni, Benjamini & Hochberg (1995) ("BH", alias "fdr"), Benjamini & Yekutieli (2001)
//! ("BY"), and "none".

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

impl Adjustment {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "holm" => Ok(Adjustment::Holm),
            "hochberg" => Ok(Adjustment::Hochberg),
            "hommel" => Ok(Adjustment::Hommel),
            "bonferroni" => Ok(Adjustment::Bonferroni),
            "BH" | "fdr" => Ok(Adjustment::BenjaminiHochberg),
            "BY" => Ok(Adjustment::BenjaminiYekutieli),
            "none" => Ok(Adjustment::None),
            other => Err(StatsError::invalid(
                "method",
                format!(
                    "unknown adjustment {other:?}; expected one of holm, hochberg, hommel, bonferroni, BH, fdr, BY, none"
                ),
            )),
        }
    }
}

/// Adjusted p-values, in the input order.
pub fn p_adjust(p: &[f64], method: Adjustment) -> Result<Vec<f64>> {
    if let Some(bad) = p.iter().find(|v| !v.is_nan() && !(0.0..=1.0).contains(*v)) {
        return Err(StatsError::invalid(
            "p",
            format!("p-values must lie in [0, 1], got {bad}"),
        ));
    }
    let valid_positions: Vec<usize> = (0..p.len()).filter(|&i| !p[i].is_nan()).collect();
    let values: Vec<f64> = valid_positions.iter().map(|&i| p[i]).collect();
    let mut out = p.to_vec();
    let n = values.len();
    if n <= 1 {
        return Ok(out);
    }
    let adjusted = adjust_valid(
        &values,
        if n == 2 && method == Adjustment::Hommel {
            Adjustment::Hochberg
        } else {
            method
        },
    );
    for (position, value) in valid_positions.into_iter().zip(adjusted) {
        out[position] = value;
    }
    Ok(out)
}

/// Indices that sort `values` ascending (stable, as R's `order`).
fn order_ascending(values: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    order
}

fn order_descending(values: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    order
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
        Adjustment::Hochberg | Adjustment::BenjaminiHochberg | Adjustment::BenjaminiYekutieli => {
            let order = order_descending(p);
            let harmonic: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
            let mut running = f64::INFINITY;
            let sorted: Vec<f64> = order
                .iter()
                .enumerate()
                .map(|(position, &index)| {
                    let i = (n - position) as f64; // R: i <- lp:1
                    let factor = match method {
                        Adjustment::Hochberg => nf + 1.0 - i,
                        Adjustment::BenjaminiHochberg => nf / i,
                        _ => harmonic * nf / i,
                    };
                    running = running.min(factor * p[index]);
                    running.min(1.0)
                })
                .collect();
            scatter(&order, &sorted)
        }
        Adjustment::Hommel => hommel(p),
    }
}

/// Hommel's procedure, following R's `p.adjust` line by line (1-based indices in the comments).
fn hommel(p_input: &[f64]) -> Vec<f64> {
    let n = p_input.len();
    let order = order_ascending(p_input);
    let p: Vec<f64> = order.iter().map(|&i| p_input[i]).collect();
    // q <- pa <- rep.int(min(n * p / i), n)
    let initial = (0..n)
        .map(|i| n as f64 * p[i] / (i + 1) as f64)
        .fold(f64::INFINITY, f64::min);
    let mut q = vec![initial; n];
    let mut pa = vec![initial; n];
    // for (j in (n - 1):2)
    for j in (2..n).rev() {
        // ij <- 1:(n - j + 1); i2 <- (n - j + 2):n
        let split = n - j + 1;
        // q1 <- min(j * p[i2] / (2:j))
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

#[cfg(test)]
mod tests {
    use super::*;

    const P: [f64; 6] = [0.01, 0.04, 0.03, 0.2, 0.005, 0.5];

    fn close(a: &[f64], b: &[f64]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn matches_r() {
        // R: p <- c(0.01, 0.04, 0.03, 0.2, 0.005, 0.5); p.adjust(p, m) for each method
        close(
            &p_adjust(&P, Adjustment::Holm).unwrap(),
            &[0.05, 0.12, 0.12, 0.4, 0.03, 0.5],
        );
        close(
            &p_adjust(&P, Adjustment::Hochberg).unwrap(),
            &[0.05, 0.12, 0.12, 0.4, 0.03, 0.5],
        );
        close(
            &p_adjust(&P, Adjustment::Hommel).unwrap(),
            &[0.05, 0.12, 0.09, 0.4, 0.03, 0.5],
        );
        close(
            &p_adjust(&P, Adjustment::Bonferroni).unwrap(),
            &[0.06, 0.24, 0.18, 1.0, 0.03, 1.0],
        );
        close(
            &p_adjust(&P, Adjustment::BenjaminiHochberg).unwrap(),
            &[0.03, 0.06, 0.06, 0.24, 0.03, 0.5],
        );
        close(
            &p_adjust(&P, Adjustment::BenjaminiYekutieli).unwrap(),
            &[0.0735, 0.147, 0.147, 0.588, 0.0735, 1.0],
        );
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
