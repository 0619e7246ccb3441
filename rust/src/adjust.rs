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
}
