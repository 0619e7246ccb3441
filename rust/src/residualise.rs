//! Linear residualisation: what is left of a column after least squares on `[1, covar]`.
//!
//! The covariates are centred (which absorbs the intercept), scaled to unit length and orthonormalised by
//! Gram–Schmidt applied twice ("twice is enough", Giraud et al. 2005), which gives the thin Q of a QR
//! decomposition to working precision without forming normal equations. Residuals are then
//! `y_c − Q Qᵀ y_c`, again projected twice. Singularity is judged by the condition number of the
//! centred, unit-scaled covariate matrix, which, unlike a determinant threshold, does not depend on units.

use crate::error::{Result, StatsError};
use crate::matrix::{centre_into, check_finite, dot, norm, Mat};

/// Covariate matrices with a larger condition number (after centring and unit scaling) are rejected as
/// singular: at 1e12 barely four significant digits of the regression coefficients would survive.
pub const MAX_CONDITION_NUMBER: f64 = 1e12;

/// A column whose residual norm is below this fraction of its centred norm is, to working precision, a
/// linear function of the covariates: nothing is left to correlate.
pub const MIN_RESIDUAL_FRACTION: f64 = 1e-11;

/// The residual-maker `M = I − 11ᵀ/n − QQᵀ` of one covariate matrix, reusable for many columns.
#[derive(Debug, Clone)]
pub struct LinearResidualiser {
    n: usize,
    /// Orthonormal basis of the centred covariates, column-major n × k.
    q: Mat,
    condition_number: f64,
}

impl LinearResidualiser {
    /// Builds the residual-maker for `covar` (n × k, k may be 0: centring only).
    ///
    /// `name` is the argument name used in error messages.
    pub fn new(covar: &Mat, name: &str) -> Result<Self> {
        let n = covar.nrows();
        if n < 2 {
            return Err(StatsError::invalid(
                name,
                format!("needs at least 2 rows, got {n}"),
            ));
        }
        let basis = orthonormal_basis(covar, name)?;
        Ok(LinearResidualiser {
            n,
            q: basis.q,
            condition_number: basis.condition_number,
        })
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of covariates (columns of Q).
    pub fn k(&self) -> usize {
        self.q.ncols()
    }

    /// The orthonormal basis (n × k) of the centred covariates.
    pub fn basis(&self) -> &Mat {
        &self.q
    }

    pub fn condition_number(&self) -> f64 {
        self.condition_number
    }

    /// Writes the residuals of `y` on `[1, covar]` into `out`.
    pub fn residualise_into(&self, y: &[f64], out: &mut [f64]) {
        debug_assert_eq!(y.len(), self.n);
        centre_into(y, out);
        self.project_out(out);
    }

    /// Applies the residual-maker in place to a vector (centring included).
    pub fn apply_in_place(&self, v: &mut [f64]) {
        let centre = v.iter().sum::<f64>() / self.n as f64;
        for x in v.iter_mut() {
            *x -= centre;
        }
        self.project_out(v);
    }

    fn project_out(&self, v: &mut [f64]) {
        for pass in 0..2 {
            if pass == 1 {
                // The second pass also removes the rounding left in the mean.
                let centre = v.iter().sum::<f64>() / self.n as f64;
                for x in v.iter_mut() {
                    *x -= centre;
                }
            }
            for j in 0..self.q.ncols() {
                let qj = self.q.col(j);
                let projection = dot(qj, v);
                for (x, q) in v.iter_mut().zip(qj) {
                    *x -= projection * q;
                }
            }
        }
    }

    /// Residuals of every column of `y`, checking each is finite and not explained away by the covariates.
    ///
    /// `name` and `labels` name the columns in errors.
    pub fn residualise_checked(&self, y: &Mat, name: &str) -> Result<Mat> {
        if y.nrows() != self.n {
            return Err(StatsError::invalid(
                name,
                format!("has {} rows but covar has {}", y.nrows(), self.n),
            ));
        }
        let mut out = Mat::zeros(self.n, y.ncols());
        for j in 0..y.ncols() {
            let label = column_name(name, j, y.ncols());
            let column = y.col(j);
            check_finite(&label, column)?;
            if is_constant(column) {
                return Err(StatsError::degenerate(
                    label,
                    "is constant, so its correlation is undefined",
                ));
            }
            self.residualise_into(column, out.col_mut(j));
            let centred_norm = centred_norm(column);
            let residual_norm = norm(out.col(j));
            if residual_norm <= MIN_RESIDUAL_FRACTION * centred_norm {
                return Err(StatsError::degenerate(
                    label,
                    "is a linear function of covar (nothing is left after regressing covar out)",
                ));
            }
        }
        Ok(out)
    }
}

/// The orthonormal basis of centred columns, with the triangular factor of the unit-scaled columns.
pub struct OrthonormalBasis {
    /// n × p, orthonormal columns spanning the centred input columns.
    pub q: Mat,
    /// p × p upper triangular with `Zs = Q R`, Zs the centred columns scaled to unit length, so that
    /// `RᵀR` is the correlation matrix of the input columns.
    pub r: nalgebra::DMatrix<f64>,
    /// Condition number of `Zs` (ratio of its extreme singular values).
    pub condition_number: f64,
}

/// Centres and unit-scales the columns of `columns`, then orthonormalises them by Gram–Schmidt applied twice.
///
/// Fails, naming `name`, on non-finite values, constant columns and collinear columns (condition number
/// above [`MAX_CONDITION_NUMBER`]).
pub fn orthonormal_basis(columns: &Mat, name: &str) -> Result<OrthonormalBasis> {
    let n = columns.nrows();
    let p = columns.ncols();
    let mut q = Mat::zeros(n, p);
    for j in 0..p {
        let column = columns.col(j);
        check_finite(&column_name(name, j, p), column)?;
        if is_constant(column) {
            return Err(StatsError::degenerate(
                column_name(name, j, p),
                "is constant, so it cannot be regressed out or correlated",
            ));
        }
        let target = q.col_mut(j);
        centre_into(column, target);
        let length = norm(target);
        for t in target.iter_mut() {
            *t /= length;
        }
    }
    let mut r = nalgebra::DMatrix::<f64>::zeros(p, p);
    for j in 0..p {
        let mut column = q.col(j).to_vec();
        for _pass in 0..2 {
            for i in 0..j {
                let projection = dot(q.col(i), &column);
                r[(i, j)] += projection;
                for (c, qi) in column.iter_mut().zip(q.col(i)) {
                    *c -= projection * qi;
                }
            }
        }
        let length = norm(&column);
        r[(j, j)] = length;
        if length <= f64::EPSILON {
            return Err(StatsError::degenerate(
                name,
                format!(
                    "column {j} is a linear combination of the columns before it (the columns are collinear)"
                ),
            ));
        }
        for (t, c) in q.col_mut(j).iter_mut().zip(&column) {
            *t = c / length;
        }
    }
    let condition_number = if p == 0 {
        1.0
    } else {
        let singular = r.singular_values();
        let smallest = singular.min();
        if smallest > 0.0 {
            singular.max() / smallest
        } else {
            f64::INFINITY
        }
    };
    if condition_number > MAX_CONDITION_NUMBER {
        return Err(StatsError::degenerate(
            name,
            format!(
                "the columns are collinear (condition number {condition_number:.3e} after centring and scaling, limit {MAX_CONDITION_NUMBER:.0e})"
            ),
        ));
    }
    Ok(OrthonormalBasis {
        q,
        r,
        condition_number,
    })
}

/// True when every value equals the first (exactly: nearly constant data are still data).
pub fn is_constant(values: &[f64]) -> bool {
    values.iter().all(|v| *v == values[0])
}

fn centred_norm(values: &[f64]) -> f64 {
    let mut centred = vec![0.0; values.len()];
    centre_into(values, &mut centred);
    norm(&centred)
}

/// `name` for a single column, `name column j` otherwise.
pub fn column_name(name: &str, j: usize, ncols: usize) -> String {
    if ncols == 1 {
        name.to_string()
    } else {
        format!("{name} column {j}")
    }
}

/// Residuals of each column of `y` on [1, covar] (least squares), n × m.
pub fn residualise_columns(y: &Mat, covar: &Mat) -> Result<Mat> {
    if covar.nrows() != y.nrows() {
        return Err(StatsError::invalid(
            "covar",
            format!("has {} rows but y has {}", covar.nrows(), y.nrows()),
        ));
    }
    let residualiser = LinearResidualiser::new(covar, "covar")?;
    let mut out = Mat::zeros(y.nrows(), y.ncols());
    for j in 0..y.ncols() {
        check_finite(&column_name("y", j, y.ncols()), y.col(j))?;
        residualiser.residualise_into(y.col(j), out.col_mut(j));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ols_residuals(y: &[f64], z: &[f64]) -> Vec<f64> {
        // closed form for one covariate
        let n = y.len() as f64;
        let my = y.iter().sum::<f64>() / n;
        let mz = z.iter().sum::<f64>() / n;
        let szz: f64 = z.iter().map(|v| (v - mz).powi(2)).sum();
        let szy: f64 = z.iter().zip(y).map(|(a, b)| (a - mz) * (b - my)).sum();
        let beta = szy / szz;
        y.iter().zip(z).map(|(b, a)| b - my - beta * (a - mz)).collect()
    }

    #[test]
    fn matches_closed_form_simple_regression() {
        let z = [1.0, 2.0, 4.0, 7.0, 11.0];
        let y = [2.0, 1.0, 5.0, 4.0, 9.0];
        let covar = Mat::from_col_major(5, 1, z.to_vec()).unwrap();
        let res = LinearResidualiser::new(&covar, "covar").unwrap();
        let mut out = vec![0.0; 5];
        res.residualise_into(&y, &mut out);
        for (a, b) in out.iter().zip(ols_residuals(&y, &z)) {
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        }
    }

    #[test]
    fn residuals_orthogonal_to_covariates() {
        let n = 50;
        let z1: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() * 1e6 + 1e8).collect();
        let z2: Vec<f64> = (0..n).map(|i| (i as f64 * 1.1).cos() * 1e-3).collect();
        let y: Vec<f64> = (0..n).map(|i| (i as f64 * 0.13).sin() + i as f64).collect();
        let covar = Mat::from_columns(n, &[&z1, &z2]).unwrap();
        let res = LinearResidualiser::new(&covar, "covar").unwrap();
        let mut out = vec![0.0; n];
        res.residualise_into(&y, &mut out);
        let scale = norm(&out);
        assert!(out.iter().sum::<f64>().abs() < 1e-12 * scale * n as f64);
        for z in [&z1, &z2] {
            let zc: Vec<f64> = {
                let m = crate::matrix::mean(z);
                z.iter().map(|v| v - m).collect()
            };
            assert!(dot(&zc, &out).abs() < 1e-10 * norm(&zc) * scale);
        }
    }

    #[test]
    fn constant_and_collinear_covariates_are_rejected() {
        let constant = Mat::from_col_major(4, 1, vec![3.0; 4]).unwrap();
        let err = LinearResidualiser::new(&constant, "covar").unwrap_err();
        assert!(err.to_string().contains("constant"));
        let z: Vec<f64> = (0..6).map(|i| i as f64).collect();
        let z2: Vec<f64> = z.iter().map(|v| 2.0 * v + 1.0).collect();
        let collinear = Mat::from_columns(6, &[&z, &z2]).unwrap();
        let err = LinearResidualiser::new(&collinear, "covar").unwrap_err();
        assert!(err.to_string().contains("collinear"), "{err}");
    }

    #[test]
    fn y_explained_by_covariates_is_rejected() {
        let z: Vec<f64> = (0..6).map(|i| (i * i) as f64).collect();
        let y: Vec<f64> = z.iter().map(|v| 3.0 - v).collect();
        let covar = Mat::from_columns(6, &[&z]).unwrap();
        let res = LinearResidualiser::new(&covar, "covar").unwrap();
        let err = res
            .residualise_checked(&Mat::from_columns(6, &[&y]).unwrap(), "x")
            .unwrap_err();
        assert!(
            err.to_string().starts_with("x: is a linear function of covar"),
            "{err}"
        );
    }
}
