//! Minimising a smoothness criterion over log smoothing parameters.
//!
//! One parameter: the criterion is evaluated on a grid of `log λ` (step [`GRID_STEP`]) covering every
//! regime from interpolation to a straight line, and Brent's method (golden section with parabolic steps;
//! Brent 1973, ch. 5, as R's `optimize`) polishes the best grid point inside its two neighbours. The grid
//! makes the search global (GCV and REML curves can have several local minima) and deterministic.
//!
//! Several parameters: the smoother evaluates the criterion on a shared grid over the box of `log λ` values
//! (see `GamSmoother`), then [`coordinate_descent`] polishes the best grid point: cyclic coordinate descent,
//! each coordinate minimised by Brent's method within one grid step either side of its current value, until
//! a sweep lowers the criterion by less than a relative 1e-10 (at most [`MAX_SWEEPS`] sweeps). Every accepted
//! step lowers the criterion, so the result is never worse than the best grid point.

/// Grid spacing in `log λ` (natural log).
pub(crate) const GRID_STEP: f64 = 0.25;
/// Absolute tolerance of Brent's search in `log λ`.
pub(crate) const BRENT_TOL: f64 = 1e-7;
/// Cap on coordinate-descent sweeps.
pub(crate) const MAX_SWEEPS: usize = 50;

/// The minimiser `(ρ, f(ρ))` of `f` over `[lo, hi]`: grid, then Brent around the best grid point.
pub(crate) fn minimise_1d<F: FnMut(f64) -> f64>(mut f: F, lo: f64, hi: f64) -> (f64, f64) {
    let steps = (((hi - lo) / GRID_STEP).ceil() as usize).max(2);
    let step = (hi - lo) / steps as f64;
    let mut best_i = 0usize;
    let mut best = f64::INFINITY;
    for i in 0..=steps {
        let value = finite_or_inf(f(lo + step * i as f64));
        if value < best {
            best = value;
            best_i = i;
        }
    }
    let best_rho = lo + step * best_i as f64;
    let a = lo + step * best_i.saturating_sub(1) as f64;
    let b = lo + step * (best_i + 1).min(steps) as f64;
    let (rho, value) = brent(&mut f, a, b, BRENT_TOL);
    if value < best {
        (rho, value)
    } else {
        (best_rho, best)
    }
}

/// Cyclic coordinate descent over `rho` (start value, updated in place): coordinate `j` is searched within
/// `window[j]` of its current value, clipped to `bounds[j]`. Returns the final criterion value.
pub(crate) fn coordinate_descent<F: FnMut(&[f64]) -> f64>(
    mut f: F,
    rho: &mut [f64],
    bounds: &[(f64, f64)],
    window: &[f64],
) -> f64 {
    let mut current = finite_or_inf(f(rho));
    let mut trial = rho.to_vec();
    for _sweep in 0..MAX_SWEEPS {
        let before = current;
        for j in 0..rho.len() {
            trial.copy_from_slice(rho);
            let (lo, hi) = bounds[j];
            let a = (rho[j] - window[j]).max(lo);
            let b = (rho[j] + window[j]).min(hi);
            if a >= b {
                continue;
            }
            let (best_rho, best_value) = brent(
                &mut |r| {
                    trial[j] = r;
                    f(&trial)
                },
                a,
                b,
                BRENT_TOL,
            );
            if best_value < current {
                rho[j] = best_rho;
                current = best_value;
            }
        }
        let improved = before - current > 1e-10 * current.abs().max(1e-300);
        if !improved {
            break;
        }
    }
    current
}

fn finite_or_inf(v: f64) -> f64 {
    if v.is_nan() {
        f64::INFINITY
    } else {
        v
    }
}

/// Brent's minimiser on `[a, b]` (R's `fmin`): returns `(x, f(x))`.
fn brent<F: FnMut(f64) -> f64>(f: &mut F, a: f64, b: f64, tol: f64) -> (f64, f64) {
    let golden = 0.5 * (3.0 - 5f64.sqrt());
    let eps = f64::EPSILON.sqrt();
    let (mut a, mut b) = (a, b);
    let mut x = a + golden * (b - a);
    let (mut v, mut w) = (x, x);
    let (mut d, mut e) = (0.0f64, 0.0f64);
    let mut fx = finite_or_inf(f(x));
    let (mut fv, mut fw) = (fx, fx);
    let tol3 = tol / 3.0;
    for _ in 0..200 {
        let xm = 0.5 * (a + b);
        let tol1 = eps * x.abs() + tol3;
        let t2 = 2.0 * tol1;
        if (x - xm).abs() <= t2 - 0.5 * (b - a) {
            break;
        }
        let (mut p, mut q, mut r) = (0.0f64, 0.0f64, 0.0f64);
        if e.abs() > tol1 {
            r = (x - w) * (fx - fv);
            q = (x - v) * (fx - fw);
            p = (x - v) * q - (x - w) * r;
            q = 2.0 * (q - r);
            if q > 0.0 {
                p = -p;
            } else {
                q = -q;
            }
            r = e;
            e = d;
        }
        if p.abs() >= (0.5 * q * r).abs() || p <= q * (a - x) || p >= q * (b - x) || !p.is_finite() {
            e = if x < xm { b - x } else { a - x };
            d = golden * e;
        } else {
            d = p / q;
            let u = x + d;
            if u - a < t2 || b - u < t2 {
                d = if x < xm { tol1 } else { -tol1 };
            }
        }
        let u = if d.abs() >= tol1 {
            x + d
        } else if d > 0.0 {
            x + tol1
        } else {
            x - tol1
        };
        let fu = finite_or_inf(f(u));
        if fu <= fx {
            if u < x {
                b = x;
            } else {
                a = x;
            }
            v = w;
            fv = fw;
            w = x;
            fw = fx;
            x = u;
            fx = fu;
        } else {
            if u < x {
                a = u;
            } else {
                b = u;
            }
            if fu <= fw || w == x {
                v = w;
                fv = fw;
                w = u;
                fw = fu;
            } else if fu <= fv || v == x || v == w {
                v = u;
                fv = fu;
            }
        }
    }
    (x, fx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brent_finds_a_parabola_minimum() {
        let (x, fx) = brent(&mut |x: f64| (x - 0.3).powi(2) + 1.0, -2.0, 2.0, 1e-9);
        assert!((x - 0.3).abs() < 1e-7);
        assert!((fx - 1.0).abs() < 1e-12);
    }

    #[test]
    fn grid_search_is_global() {
        // Two local minima; the deeper one is at 4.
        let f = |x: f64| ((x + 3.0).powi(2)).min((x - 4.0).powi(2) - 0.5);
        let (x, fx) = minimise_1d(f, -10.0, 10.0);
        assert!((x - 4.0).abs() < 1e-6 && (fx + 0.5).abs() < 1e-10);
    }

    #[test]
    fn boundary_minimum_is_returned() {
        let (x, _) = minimise_1d(|x| -x, 0.0, 5.0);
        assert!((x - 5.0).abs() < 1e-6);
    }

    #[test]
    fn nan_counts_as_infinite() {
        let (x, _) = minimise_1d(|x| if x < 1.0 { f64::NAN } else { (x - 2.0).powi(2) }, 0.0, 4.0);
        assert!((x - 2.0).abs() < 1e-6);
    }

    #[test]
    fn coordinate_descent_respects_bounds() {
        let mut rho = vec![0.5];
        coordinate_descent(|r: &[f64]| -r[0], &mut rho, &[(0.0, 2.0)], &[1.0]);
        assert!((rho[0] - 2.0).abs() < 1e-6, "{rho:?}");
    }

    #[test]
    fn coordinate_descent_on_a_coupled_quadratic() {
        let f = |r: &[f64]| (r[0] - 1.0).powi(2) + (r[1] + 2.0).powi(2) + 0.5 * (r[0] - 1.0) * (r[1] + 2.0);
        let mut rho = vec![0.0, 0.0];
        let value = coordinate_descent(f, &mut rho, &[(-5.0, 5.0), (-5.0, 5.0)], &[1.0, 1.0]);
        assert!(
            (rho[0] - 1.0).abs() < 1e-5 && (rho[1] + 2.0).abs() < 1e-5,
            "{rho:?}"
        );
        assert!(value.abs() < 1e-9);
    }
}
