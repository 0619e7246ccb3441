//! Ranks and Kendall's τ_b, the two rank-based building blocks.
//!
//! Ranks are "average" ranks (ties share the mean of the positions they span), as R's `rank()` and
//! `cor(method = "spearman")` use. τ_b is the tie-corrected Kendall correlation that R's
//! `cor(method = "kendall")` and `scipy.stats.kendalltau` return.

use crate::matrix::Mat;

/// Average ranks (1-based) of `values`. Values must be finite (checked by the callers).
pub fn average_ranks(values: &[f64]) -> Vec<f64> {
    let n = values.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; n];
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // positions start..end (0-based) share rank mean(start+1 ..= end)
        let shared = (start + end + 1) as f64 / 2.0;
        for &index in &order[start..end] {
            ranks[index] = shared;
        }
        start = end;
    }
    ranks
}

/// Every column of `m` replaced by its average ranks.
pub fn rank_columns(m: &Mat) -> Mat {
    let mut out = Mat::zeros(m.nrows(), m.ncols());
    for j in 0..m.ncols() {
        out.col_mut(j).copy_from_slice(&average_ranks(m.col(j)));
    }
    out
}

/// Kendall's τ_b of two equally long series: (concordant − discordant) / √((n₀ − n₁)(n₀ − n₂)), with n₀ the
/// number of pairs and n₁, n₂ the pairs tied in x and in y. Returns NaN only when a series is constant,
/// which callers reject beforehand.
pub fn kendall_tau_b(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len();
    let mut score: i64 = 0;
    let mut untied_x: i64 = 0;
    let mut untied_y: i64 = 0;
    for i in 0..n {
        let (xi, yi) = (x[i], y[i]);
        for j in (i + 1)..n {
            let sx = sign(x[j] - xi);
            let sy = sign(y[j] - yi);
            score += sx * sy;
            untied_x += sx * sx;
            untied_y += sy * sy;
        }
    }
    score as f64 / ((untied_x as f64) * (untied_y as f64)).sqrt()
}

#[inline]
fn sign(v: f64) -> i64 {
    if v > 0.0 {
        1
    } else if v < 0.0 {
        -1
    } else {
        0
    }
}

/// The matrix of τ_b between every pair of columns (unit diagonal).
pub fn kendall_matrix(m: &Mat) -> Mat {
    let p = m.ncols();
    let mut out = Mat::filled(p, p, 1.0);
    for a in 0..p {
        for b in (a + 1)..p {
            let tau = kendall_tau_b(m.col(a), m.col(b));
            out.set(a, b, tau);
            out.set(b, a, tau);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_ranks_with_ties() {
        // R: rank(c(10, 20, 10, 30, 20, 20)) -> 1.5 4.0 1.5 6.0 4.0 4.0
        assert_eq!(
            average_ranks(&[10.0, 20.0, 10.0, 30.0, 20.0, 20.0]),
            vec![1.5, 4.0, 1.5, 6.0, 4.0, 4.0]
        );
    }

    #[test]
    fn tau_b_known_values() {
        // R: cor(c(1,2,3,4,5), c(3,1,2,5,4), method = "kendall") = 0.4
        let tau = kendall_tau_b(&[1.0, 2.0, 3.0, 4.0, 5.0], &[3.0, 1.0, 2.0, 5.0, 4.0]);
        assert!((tau - 0.4).abs() < 1e-15);
        // R: cor(c(1,1,2,3), c(1,2,2,3), method = "kendall") = 0.8
        let tau = kendall_tau_b(&[1.0, 1.0, 2.0, 3.0], &[1.0, 2.0, 2.0, 3.0]);
        assert!((tau - 0.8).abs() < 1e-15, "{tau}");
    }
}
