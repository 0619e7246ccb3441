//! Autoregressive series for the AR-sieve bootstrap of `gengen.sieve`.
//!
//! The sieve generates thousands of replicate residual series per analysis, each a short AR(p) recursion driven
//! by resampled innovations. Python would run the recursion one time step at a time; here every series runs its
//! own loop, in parallel. The result does not depend on the thread count: each series is computed alone.

use rayon::prelude::*;

use crate::error::StatsError;

/// Runs `x_t = shock_t + Σ_i coef_i x_{t−i}` for every replicate × series and keeps the last `keep` values.
///
/// * `coef`: `m × p` row-major, the AR coefficients of series `j` in `coef[j p .. (j + 1) p]`;
/// * `shocks`: `b × m × t` row-major;
/// * `start`: `b × m × p` row-major, the `p` values before the first shock, oldest first; empty for zeros.
///
/// Returns `b × m × keep`, row-major.
#[allow(clippy::too_many_arguments)]
pub fn ar_generate(
    coef: &[f64],
    m: usize,
    p: usize,
    shocks: &[f64],
    b: usize,
    t: usize,
    start: &[f64],
    keep: usize,
) -> Result<Vec<f64>, StatsError> {
    if coef.len() != m * p {
        return Err(StatsError::invalid(
            "coef",
            format!("needs {m} × {p} values, got {}", coef.len()),
        ));
    }
    if shocks.len() != b * m * t {
        return Err(StatsError::invalid(
            "shocks",
            format!("needs {b} × {m} × {t} values, got {}", shocks.len()),
        ));
    }
    if !start.is_empty() && start.len() != b * m * p {
        return Err(StatsError::invalid(
            "start",
            format!("needs {b} × {m} × {p} values or none, got {}", start.len()),
        ));
    }
    if keep > t {
        return Err(StatsError::invalid(
            "keep",
            format!("at most the {t} generated steps, got {keep}"),
        ));
    }
    if coef
        .iter()
        .chain(shocks)
        .chain(start)
        .any(|value| !value.is_finite())
    {
        return Err(StatsError::invalid("coef, shocks, start", "must be finite"));
    }
    let mut out = vec![0.0; b * m * keep];
    if keep == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(keep).enumerate().for_each(|(series, kept)| {
        let column = series % m;
        let phi = &coef[column * p..(column + 1) * p];
        let mut state = vec![0.0; p + t];
        if !start.is_empty() {
            state[..p].copy_from_slice(&start[series * p..(series + 1) * p]);
        }
        let driving = &shocks[series * t..(series + 1) * t];
        for step in 0..t {
            let mut value = driving[step];
            for (lag, weight) in phi.iter().enumerate() {
                value += weight * state[p + step - 1 - lag];
            }
            state[p + step] = value;
        }
        kept.copy_from_slice(&state[p + t - keep..]);
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ar1_recursion_by_hand() {
        // x_1 = 1 + 0.5·2 = 2, x_2 = 0 + 0.5·2 = 1, x_3 = −1 + 0.5·1 = −0.5 (start 2).
        let out = ar_generate(&[0.5], 1, 1, &[1.0, 0.0, -1.0], 1, 3, &[2.0], 2).unwrap();
        assert_eq!(out, vec![1.0, -0.5]);
    }

    #[test]
    fn ar2_per_series_coefficients_and_zero_start() {
        // series 0: AR(2) (1, −0.5) from zero; series 1: white (0, 0).
        let shocks = [1.0, 0.0, 0.0, 0.0, 3.0, 4.0, 5.0, 6.0];
        let out = ar_generate(&[1.0, -0.5, 0.0, 0.0], 2, 2, &shocks, 1, 4, &[], 4).unwrap();
        // x = 1, 1, 0.5, 0 for series 0.
        assert_eq!(out, vec![1.0, 1.0, 0.5, 0.0, 3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn shapes_are_checked() {
        assert!(ar_generate(&[0.5], 1, 1, &[1.0, 2.0], 1, 3, &[], 2).is_err());
        assert!(ar_generate(&[0.5], 1, 1, &[1.0, 2.0, 3.0], 1, 3, &[], 4).is_err());
        assert!(ar_generate(&[f64::NAN], 1, 1, &[1.0, 2.0, 3.0], 1, 3, &[], 2).is_err());
    }
}
