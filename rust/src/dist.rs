//! The reference distributions behind the p-values and intervals.
//!
//! Upper tails come from survival functions, never `1 − cdf`, so that small p-values keep their relative
//! precision. The normal tail uses libm's `erfc` (a port of FreeBSD's msun, under one ulp); the t tail
//! uses statrs' regularised incomplete beta function.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Two-sided p-value of a Student t statistic with `df` degrees of freedom: 2·P(T > |t|).
pub fn t_two_sided(t: f64, df: f64) -> f64 {
    if t.is_infinite() {
        return 0.0;
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t.abs())).min(1.0),
        Err(_) => f64::NAN,
    }
}

/// Quantile of a Student t distribution with `df` degrees of freedom (NaN for df ≤ 0 or p outside (0, 1)).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => dist.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// Two-sided p-value of a standard normal statistic: 2·P(Z > |z|) = erfc(|z|/√2).
pub fn normal_two_sided(z: f64) -> f64 {
    libm::erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0)
}

/// Upper tail P(X > x) of a χ² distribution with `df` degrees of freedom.
pub fn chi_squared_sf(x: f64, df: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    match statrs::distribution::ChiSquared::new(df) {
        Ok(dist) => dist.sf(x),
        Err(_) => f64::NAN,
    }
}

/// Standard normal cumulative distribution function.
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

/// Standard normal quantile function.
pub fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    match Normal::new(0.0, 1.0) {
        Ok(dist) => dist.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_p_values_match_r() {
        // R: print(2 * pt(-2.5, 10), digits = 17) = 0.031446844236608776
        assert!((t_two_sided(2.5, 10.0) / 0.031_446_844_236_608_776 - 1.0).abs() < 1e-10);
        // R: print(2 * pt(-12, 3), digits = 17) = 0.001245015800789336
        assert!((t_two_sided(-12.0, 3.0) / 0.001_245_015_800_789_336 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn t_quantiles_match_r() {
        // R: print(qt(0.975, 10), digits = 17) = 2.2281388519862744
        assert!((t_quantile(0.975, 10.0) - 2.228_138_851_986_274_4).abs() < 1e-8);
        // R: print(qt(0.005, 5), digits = 17) = -4.0321429835552278
        assert!((t_quantile(0.005, 5.0) + 4.032_142_983_555_228).abs() < 1e-8);
        assert!(t_quantile(1.0, 5.0).is_nan() && t_quantile(0.5, -1.0).is_nan());
    }

    #[test]
    fn chi_squared_tail_matches_r() {
        // R: print(pchisq(7.5, 3, lower.tail = FALSE), digits = 17) = 0.057558451972636406
        assert!((chi_squared_sf(7.5, 3.0) / 0.057_558_451_972_636_406 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn normal_tails_and_quantiles() {
        // R: 2 * pnorm(-1.96) = 0.04999579
        assert!((normal_two_sided(1.96) / 0.049_995_790_296_440_85 - 1.0).abs() < 1e-12);
        // R: qnorm(0.975) = 1.959963984540054
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-9);
        assert!((normal_cdf(1.0) - 0.841_344_746_068_542_9).abs() < 1e-14);
    }
}
