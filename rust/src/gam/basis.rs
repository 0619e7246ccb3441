//! mgcv's cubic regression spline basis (`s(z, bs = "cr")`), built the way mgcv builds it.
//!
//! With knots `x_1 < … < x_k` and spacings `h_j = x_{j+1} − x_j`, the spline is parameterised by its values
//! `β` at the knots. Its second derivatives at the knots are `δ = F β`, where `F` has zero first and last
//! rows (a natural spline) and middle rows `B⁻¹D`: `D` is (k−2) × k with `D[i,i] = 1/h_i`,
//! `D[i,i+1] = −1/h_i − 1/h_{i+1}`, `D[i,i+2] = 1/h_{i+1}`, and `B` is the symmetric tridiagonal
//! (k−2) × (k−2) matrix with diagonal `(h_i + h_{i+1})/3` and off-diagonal `h_{i+1}/6`. On `[x_j, x_{j+1}]`
//!
//! ```text
//! f(x) = a⁻ β_j + a⁺ β_{j+1} + c⁻ δ_j + c⁺ δ_{j+1},
//! a⁻ = (x_{j+1} − x)/h_j,  a⁺ = (x − x_j)/h_j,
//! c⁻ = ((x_{j+1} − x)³/h_j − h_j (x_{j+1} − x))/6,  c⁺ = ((x − x_j)³/h_j − h_j (x − x_j))/6,
//! ```
//!
//! and the wiggliness penalty `∫ f''² = βᵀ S β` has `S = Dᵀ B⁻¹ D` (Wood 2017, *Generalized Additive Models*,
//! 2nd ed., §5.3.1; mgcv's C routines `getFS` and `crspl`).
//!
//! Knots sit at R's type-7 quantiles of the distinct control values (`quantile(unique(x), seq(0, 1,
//! length = k))`, mgcv's `smooth.construct.cr.smooth.spec`). As in mgcv's `smoothCon`, the penalty is
//! rescaled by `‖X‖∞² / ‖S‖₁` and the sum-to-zero constraint `1ᵀ X β = 0` is absorbed by the Householder
//! reflection of `colMeans(X)` (LINPACK `dqrdc2` sign convention), dropping its first column; the intercept
//! is a separate model column. The constrained columns and penalty therefore equal mgcv's `smoothCon(…,
//! absorb.cons = TRUE)` and the smoothing parameter means what mgcv's `sp` means.
//!
//! The thin plate regression spline (`s(z, bs = "tp")`, mgcv's default basis; Wood 2003, JRSS B 65, 95–114)
//! is built from the distinct control values `u_i` (centred, as mgcv's `shift`): `E_ij = η(|u_i − u_j|)` with
//! `η(r) = r³/12` (order m = 2 in one dimension), truncated to the k eigenvectors `U_k` of largest
//! |eigenvalue| `D_k`, the constraint `Tᵀ U_k δ = 0` (`T = [1, u]`) absorbed by an orthonormal null-space
//! basis `Z`, giving columns `[U_k D_k Z, T]` and penalty `Zᵀ D_k Z` on the first k − 2. The function space
//! and penalty are mgcv's, so fitted values and EDF at a given optimum agree with mgcv; the numerical scale
//! of λ need not (it depends on the internal parameterisation). Cost is one eigen-decomposition of the
//! (distinct values)² matrix `E`, so this basis accepts at most [`MAX_THIN_PLATE_KNOTS`] distinct values
//! (mgcv subsamples beyond 2000 with its own random seed).

use nalgebra::{DMatrix, SymmetricEigen};

use crate::error::{Result, StatsError};

/// One smooth term of the model: its constrained model-matrix columns and penalty.
#[derive(Debug, Clone)]
pub(crate) struct SmoothTerm {
    /// n × (k − 1) model-matrix columns after absorbing the sum-to-zero constraint.
    pub x: DMatrix<f64>,
    /// (k − 1) × (k − 1) scaled penalty in the constrained parameterisation.
    pub s: DMatrix<f64>,
    /// Basis dimension k (knots), before the constraint removes one column.
    pub k: usize,
    /// Knot locations.
    pub knots: Vec<f64>,
}

impl SmoothTerm {
    /// Rank of the penalty: a cubic spline penalty leaves constants and straight lines unpenalised, and the
    /// constraint removes the constant.
    pub fn penalty_rank(&self) -> usize {
        self.k - 2
    }
}

/// Largest number of distinct control values the thin plate basis accepts.
pub(crate) const MAX_THIN_PLATE_KNOTS: usize = 2000;

/// The distinct values of `x`, sorted ascending (exact comparison, as R's `unique`).
pub(crate) fn distinct_sorted(x: &[f64]) -> Vec<f64> {
    let mut values = x.to_vec();
    values.sort_by(|a, b| a.total_cmp(b));
    values.dedup();
    values
}

/// `quantile(values, seq(0, 1, length = k), type = 7)` for sorted `values` — mgcv's `cr` knots.
pub(crate) fn quantile_knots(sorted: &[f64], k: usize) -> Vec<f64> {
    let m = sorted.len();
    (0..k)
        .map(|i| {
            let prob = if i + 1 == k {
                1.0
            } else {
                i as f64 / (k - 1) as f64
            };
            let index = (m - 1) as f64 * prob;
            let lo = index.floor();
            let lo_i = lo as usize;
            let h = index - lo;
            if h > 0.0 && lo_i + 1 < m && sorted[lo_i + 1] != sorted[lo_i] {
                (1.0 - h) * sorted[lo_i] + h * sorted[lo_i + 1]
            } else {
                sorted[lo_i.min(m - 1)]
            }
        })
        .collect()
}

/// mgcv's `getFS`: the map `F` (k × k) from knot values to knot second derivatives and the penalty
/// `S = DᵀB⁻¹D` (k × k, symmetrised).
pub(crate) fn cr_penalty(knots: &[f64]) -> Result<(DMatrix<f64>, DMatrix<f64>)> {
    let k = knots.len();
    if k < 3 {
        return Err(StatsError::invalid(
            "k",
            format!("a cubic regression spline needs k >= 3 knots, got {k}"),
        ));
    }
    let h: Vec<f64> = knots.windows(2).map(|w| w[1] - w[0]).collect();
    if h.iter().any(|&v| v <= 0.0 || v.is_nan()) {
        return Err(StatsError::degenerate("knots", "are not strictly increasing"));
    }
    let m = k - 2;
    let mut d = DMatrix::<f64>::zeros(m, k);
    let mut b = DMatrix::<f64>::zeros(m, m);
    for i in 0..m {
        d[(i, i)] = 1.0 / h[i];
        d[(i, i + 2)] = 1.0 / h[i + 1];
        d[(i, i + 1)] = -d[(i, i)] - d[(i, i + 2)];
        b[(i, i)] = (h[i] + h[i + 1]) / 3.0;
        if i + 1 < m {
            b[(i, i + 1)] = h[i + 1] / 6.0;
            b[(i + 1, i)] = h[i + 1] / 6.0;
        }
    }
    let chol = b
        .cholesky()
        .ok_or_else(|| StatsError::degenerate("knots", "give a singular spline system (knots too close)"))?;
    let binv_d = chol.solve(&d);
    let mut f = DMatrix::<f64>::zeros(k, k);
    f.view_mut((1, 0), (m, k)).copy_from(&binv_d);
    let s = d.transpose() * &binv_d;
    let s = (&s + s.transpose()) * 0.5;
    Ok((f, s))
}

/// mgcv's `crspl` model matrix (n × k) for data inside the knot range.
pub(crate) fn cr_design(x: &[f64], knots: &[f64], f: &DMatrix<f64>) -> DMatrix<f64> {
    let k = knots.len();
    let mut out = DMatrix::<f64>::zeros(x.len(), k);
    for (i, &xi) in x.iter().enumerate() {
        // Bisection for the interval [knots[j], knots[j + 1]] holding xi, as crspl does.
        let (mut j, mut up) = (0usize, k - 1);
        while up - j > 1 {
            let mid = (up + j) / 2;
            if xi > knots[mid] {
                j = mid;
            } else {
                up = mid;
            }
        }
        let h = knots[j + 1] - knots[j];
        let am = knots[j + 1] - xi;
        let ap = xi - knots[j];
        let cm = am * (am * am / h - h) / 6.0;
        let cp = ap * (ap * ap / h - h) / 6.0;
        for col in 0..k {
            out[(i, col)] = cm * f[(j, col)] + cp * f[(j + 1, col)];
        }
        out[(i, j)] += am / h;
        out[(i, j + 1)] += ap / h;
    }
    out
}

/// Builds the constrained, scaled `cr` smooth of `x` with `k` knots (`k <= ` number of distinct values).
pub(crate) fn cr_term(x: &[f64], distinct: &[f64], k: usize) -> Result<SmoothTerm> {
    let knots = quantile_knots(distinct, k);
    let (f, s) = cr_penalty(&knots)?;
    let design = cr_design(x, &knots, &f);
    let s = scale_penalty(&design, &s);
    let (x_con, s_con) = absorb_sum_to_zero(&design, &s)?;
    Ok(SmoothTerm {
        x: x_con,
        s: s_con,
        k,
        knots,
    })
}

/// Builds the constrained, scaled thin plate regression spline of `x` with basis dimension `k`
/// (`3 <= k <= ` number of distinct values).
pub(crate) fn tp_term(x: &[f64], distinct: &[f64], k: usize) -> Result<SmoothTerm> {
    let nu = distinct.len();
    if nu > MAX_THIN_PLATE_KNOTS {
        let problem = format!(
            "the thin plate basis takes at most {MAX_THIN_PLATE_KNOTS} distinct control values, got {nu}; \
             use the cubic regression basis"
        );
        return Err(StatsError::invalid("gam_basis", problem));
    }
    if k < 3 || k > nu {
        return Err(StatsError::invalid(
            "k",
            format!("must be between 3 and {nu} for this control, got {k}"),
        ));
    }
    let shift = x.iter().sum::<f64>() / x.len() as f64;
    let u: Vec<f64> = distinct.iter().map(|v| v - shift).collect();
    let e = DMatrix::from_fn(nu, nu, |i, j| (u[i] - u[j]).abs().powi(3) / 12.0);
    let eig = SymmetricEigen::try_new(e, f64::EPSILON, 10_000).ok_or_else(|| {
        StatsError::degenerate("control", "thin plate eigen-decomposition did not converge")
    })?;
    let mut order: Vec<usize> = (0..nu).collect();
    order.sort_by(|&a, &b| eig.eigenvalues[b].abs().total_cmp(&eig.eigenvalues[a].abs()));
    let keep = &order[..k];
    let u_k = eig.eigenvectors.select_columns(keep);
    let d_k: Vec<f64> = keep.iter().map(|&i| eig.eigenvalues[i]).collect();
    // Z: orthonormal basis of {δ : Tᵀ U_k δ = 0}, the last k − 2 columns of the full Q of U_kᵀ T.
    let t = DMatrix::from_fn(nu, 2, |i, j| if j == 0 { 1.0 } else { u[i] });
    let q_full = (u_k.transpose() * &t).qr();
    let mut q = DMatrix::<f64>::identity(k, k);
    q_full.q_tr_mul(&mut q);
    let z = q.transpose().columns(2, k - 2).into_owned();
    let mut u_d = u_k;
    for (mut column, d) in u_d.column_iter_mut().zip(&d_k) {
        column *= *d;
    }
    let wiggly = u_d * &z;
    let mut scaled_z = z.clone();
    for (mut row, d) in scaled_z.row_iter_mut().zip(&d_k) {
        row *= *d;
    }
    let penalty = z.transpose() * scaled_z;
    let mut s = DMatrix::<f64>::zeros(k, k);
    s.view_mut((0, 0), (k - 2, k - 2))
        .copy_from(&((&penalty + penalty.transpose()) * 0.5));
    let mut design = DMatrix::<f64>::zeros(x.len(), k);
    for (row, xi) in x.iter().enumerate() {
        let index = distinct.partition_point(|v| v < xi).min(nu - 1);
        for col in 0..k - 2 {
            design[(row, col)] = wiggly[(index, col)];
        }
        design[(row, k - 2)] = 1.0;
        design[(row, k - 1)] = xi - shift;
    }
    let s = scale_penalty(&design, &s);
    let (x_con, s_con) = absorb_sum_to_zero(&design, &s)?;
    Ok(SmoothTerm {
        x: x_con,
        s: s_con,
        k,
        knots: distinct.to_vec(),
    })
}

/// mgcv `smoothCon(scale.penalty = TRUE)`: `S · ‖X‖∞² / ‖S‖₁`, so the penalty is on the scale of `XᵀX`.
fn scale_penalty(x: &DMatrix<f64>, s: &DMatrix<f64>) -> DMatrix<f64> {
    let max_row_sum = x
        .row_iter()
        .map(|r| r.iter().map(|v| v.abs()).sum::<f64>())
        .fold(0.0, f64::max);
    let max_col_sum = s
        .column_iter()
        .map(|c| c.iter().map(|v| v.abs()).sum::<f64>())
        .fold(0.0, f64::max);
    if max_col_sum > 0.0 {
        s * (max_row_sum * max_row_sum / max_col_sum)
    } else {
        s.clone()
    }
}

/// Absorbs `colMeans(X) β = 0` as mgcv does: `X Z`, `Zᵀ S Z` with `Z` the last k − 1 columns of the
/// Householder reflection `H = I − u uᵀ / u₁`, `u = c/(±‖c‖) + e₁` (sign of `c₁`), LINPACK's convention.
fn absorb_sum_to_zero(x: &DMatrix<f64>, s: &DMatrix<f64>) -> Result<(DMatrix<f64>, DMatrix<f64>)> {
    let (n, k) = x.shape();
    let c: Vec<f64> = (0..k).map(|j| x.column(j).sum() / n as f64).collect();
    let mut norm = c.iter().map(|v| v * v).sum::<f64>().sqrt();
    if norm == 0.0 {
        return Err(StatsError::degenerate(
            "control",
            "gives a basis whose columns all have mean zero",
        ));
    }
    if c[0] < 0.0 {
        norm = -norm;
    }
    let mut u: Vec<f64> = c.iter().map(|v| v / norm).collect();
    u[0] += 1.0;
    let mut h = DMatrix::<f64>::identity(k, k);
    for i in 0..k {
        for j in 0..k {
            h[(i, j)] -= u[i] * u[j] / u[0];
        }
    }
    let z = h.columns(1, k - 1).into_owned();
    let x_con = x * &z;
    let s_con = z.transpose() * s * &z;
    let s_con = (&s_con + s_con.transpose()) * 0.5;
    Ok((x_con, s_con))
}

#[cfg(test)]
#[allow(clippy::excessive_precision)] // R prints 17 significant digits; they are pasted as printed.
mod tests {
    use super::*;

    /// The data of the mgcv reference values below: `i <- 1:40; x <- i/40 + 0.3*sin(i)`.
    pub(crate) fn reference_x() -> Vec<f64> {
        (1..=40)
            .map(|i| i as f64 / 40.0 + 0.3 * (i as f64).sin())
            .collect()
    }

    /// [`reference_x`], its `k` quantile knots and their cubic regression spline maps (F, S).
    type Basis = (Vec<f64>, Vec<f64>, DMatrix<f64>, DMatrix<f64>);
    fn reference_basis(k: usize) -> Basis {
        let x = reference_x();
        let knots = quantile_knots(&distinct_sorted(&x), k);
        let (f, s) = cr_penalty(&knots).unwrap();
        (x, knots, f, s)
    }

    fn assert_close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= tol * (1.0 + w.abs()), "got {g}, want {w}");
        }
    }

    #[test]
    fn knots_match_mgcv() {
        // R: sm <- smoothCon(s(x, k=10, bs="cr"), data=data.frame(x=x), absorb.cons=FALSE,
        //                    scale.penalty=FALSE)[[1]]; sm$xp
        let want = [
            -0.16267728239894153,
            0.096974445294779443,
            0.25986213895107835,
            0.32832649139801284,
            0.46799616651043241,
            0.56250577043571637,
            0.65378870640308051,
            0.77775503987133143,
            0.99429253868150713,
            1.2641386158852264,
        ];
        let x = reference_x();
        assert_close(&quantile_knots(&distinct_sorted(&x), 10), &want, 1e-14);
    }

    #[test]
    fn raw_basis_and_penalty_match_mgcv() {
        let (x, knots, f, s) = reference_basis(10);
        let design = cr_design(&x, &knots, &f);
        // R: sm$X[1, ], sm$X[7, ], sm$S[[1]][1, ], sm$S[[1]][5, ] (same smoothCon call as above)
        let row1 = [
            0.0023979745257446767,
            -0.026052015662072804,
            0.77863750671164,
            0.26786394731257906,
            -0.033121335172577863,
            0.013037086038802794,
            -0.0032096278956461749,
            0.00049765349618621649,
            -5.8668236296147161e-05,
            7.4788816402359588e-06,
        ];
        let row7 = [
            -0.0017417098943445608,
            0.018922241649819326,
            -0.26734116869715419,
            0.98686437940476657,
            0.36785505720263229,
            -0.13267981103844481,
            0.032664724420056232,
            -0.0050646725533670016,
            0.00059707287982633075,
            -7.6113373790123793e-05,
        ];
        let s_row1 = [
            113.20694032915604,
            -358.96957606375759,
            429.71073011300234,
            -202.37398515335138,
            26.711562801664066,
            -10.514097353312543,
            2.5884879536954042,
            -0.40134561446821027,
            0.047314526124081713,
            -0.0060315387522412705,
        ];
        let s_row5 = [
            26.711562801664066,
            -290.19910136505268,
            4100.0515874152725,
            -7968.3093988700948,
            10750.707654995844,
            -10310.712970701043,
            4288.2532397243212,
            -664.89458799118506,
            78.384243452998504,
            -9.9922294627240191,
        ];
        let row = |m: &DMatrix<f64>, i: usize| m.row(i).iter().copied().collect::<Vec<_>>();
        assert_close(&row(&design, 0), &row1, 1e-12);
        assert_close(&row(&design, 6), &row7, 1e-12);
        assert_close(&row(&s, 0), &s_row1, 1e-11);
        assert_close(&row(&s, 4), &s_row5, 1e-11);
    }

    #[test]
    fn constrained_basis_matches_mgcv() {
        // R: smc <- smoothCon(s(x, k=10, bs="cr"), data=data.frame(x=x), absorb.cons=TRUE)[[1]]
        //    smc$X[1, ]; smc$S[[1]][2, ]
        let x = reference_x();
        let term = cr_term(&x, &distinct_sorted(&x), 10).unwrap();
        let x_row1 = [
            -0.10668030787929428,
            0.7514682261559027,
            0.18981375377855386,
            -0.0881605109387881,
            -0.052147940901787676,
            -0.045734837464987313,
            -0.066563455285279974,
            -0.073085568259399353,
            -0.029928431604132912,
        ];
        let s_row2 = [
            -0.17108267587775847,
            1.1793021824443084,
            -1.0181495989125005,
            0.47767305101522711,
            -0.068454637815642774,
            0.12190034884860088,
            0.093208381316400801,
            0.11620142847834874,
            0.047139561717517993,
        ];
        let row = |m: &DMatrix<f64>, i: usize| m.row(i).iter().copied().collect::<Vec<_>>();
        assert_close(&row(&term.x, 0), &x_row1, 1e-12);
        assert_close(&row(&term.s, 1), &s_row2, 1e-11);
        assert_eq!(term.penalty_rank(), 8);
    }

    #[test]
    fn basis_interpolates_knots_and_rows_sum_to_one() {
        let (x, knots, f, _) = reference_basis(7);
        // At a knot the basis is the unit vector of that knot (values parameterisation).
        let at_knots = cr_design(&knots, &knots, &f);
        for i in 0..7 {
            for j in 0..7 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((at_knots[(i, j)] - want).abs() < 1e-12);
            }
        }
        // Constants and straight lines are reproduced exactly: rows sum to one, and β = knots gives x.
        let design = cr_design(&x, &knots, &f);
        for (i, xi) in x.iter().enumerate() {
            let r = design.row(i);
            assert!((r.sum() - 1.0).abs() < 1e-12);
            let line: f64 = r.iter().zip(&knots).map(|(b, k)| b * k).sum();
            assert!((line - xi).abs() < 1e-12);
        }
    }

    #[test]
    fn penalty_is_psd_with_linear_null_space() {
        let (_, knots, _, s) = reference_basis(8);
        let ones = DMatrix::from_element(8, 1, 1.0);
        let line = DMatrix::from_column_slice(8, 1, &knots);
        assert!((&s * ones).amax() < 1e-9 * s.amax());
        assert!((&s * line).amax() < 1e-9 * s.amax());
        let eig = s.clone().symmetric_eigen();
        let mut values: Vec<f64> = eig.eigenvalues.iter().copied().collect();
        values.sort_by(|a, b| a.total_cmp(b));
        assert!(values[0].abs() < 1e-9 * values[7] && values[1].abs() < 1e-9 * values[7]);
        assert!(values[2] > 1e-6 * values[7]);
    }

    #[test]
    fn constrained_columns_have_mean_zero() {
        let x = reference_x();
        let term = cr_term(&x, &distinct_sorted(&x), 10).unwrap();
        for c in term.x.column_iter() {
            assert!(c.sum().abs() < 1e-12);
        }
    }

    #[test]
    fn quantiles_follow_r_type_7() {
        // R: quantile(c(1, 2, 4, 8), seq(0, 1, length = 3)) -> 1, 3, 8
        assert_eq!(quantile_knots(&[1.0, 2.0, 4.0, 8.0], 3), vec![1.0, 3.0, 8.0]);
        assert_eq!(distinct_sorted(&[3.0, 1.0, 3.0, 2.0]), vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn thin_plate_penalty_is_psd_and_leaves_lines_alone() {
        let x = reference_x();
        let term = tp_term(&x, &distinct_sorted(&x), 10).unwrap();
        assert_eq!((term.x.nrows(), term.x.ncols()), (40, 9));
        for c in term.x.column_iter() {
            assert!(c.sum().abs() < 1e-10);
        }
        let mut values: Vec<f64> = term.s.symmetric_eigenvalues().iter().copied().collect();
        values.sort_by(|a, b| a.total_cmp(b));
        assert!(
            values[0].abs() < 1e-9 * values[8],
            "one unpenalised direction (the line) after centring"
        );
        assert!(values[1] > 1e-9 * values[8], "{values:?}");
        // The straight line x − mean(x) lies in the span of the constrained columns.
        let (q, _) = term.x.clone().qr().unpack();
        let mean = x.iter().sum::<f64>() / 40.0;
        let line = DMatrix::from_iterator(40, 1, x.iter().map(|v| v - mean));
        let residual = &line - &q * (q.transpose() * &line);
        assert!(residual.norm() < 1e-9 * line.norm());
    }

    #[test]
    fn thin_plate_rejects_bad_k_and_too_many_knots() {
        let x = reference_x();
        assert!(tp_term(&x, &distinct_sorted(&x), 2).is_err());
        assert!(tp_term(&x, &distinct_sorted(&x), 41).is_err());
        let many: Vec<f64> = (0..=MAX_THIN_PLATE_KNOTS).map(|i| i as f64).collect();
        let err = tp_term(&many, &many, 10).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("gam_basis: the thin plate basis takes at most 2000"),
            "{err}"
        );
    }

    #[test]
    fn too_few_knots_is_an_error() {
        assert!(cr_penalty(&[0.0, 1.0]).is_err());
        assert!(cr_penalty(&[0.0, 1.0, 1.0]).is_err());
    }
}
