//! Tests of [`crate::pcor`]: the formulas against closed forms and against each other on a small synthetic set,
//! and errors that name their input.

use super::*;

/// The reference data set of ppcor's golden values (first 12 rows of shared/golden/ppcor/partial_corr.csv
/// would do, but the formulas are checked here on a small synthetic set against closed forms).
fn data() -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = 12;
    let z1: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin() + 0.1 * i as f64).collect();
    let z2: Vec<f64> = (0..n).map(|i| ((i * i) % 7) as f64).collect();
    let x: Vec<f64> = (0..n).map(|i| z1[i] + (i as f64 * 1.3).cos()).collect();
    let y: Vec<f64> = (0..n)
        .map(|i| z1[i] - 0.5 * z2[i] + (i as f64 * 0.4).sin())
        .collect();
    (x, y, z1, z2)
}

#[test]
fn one_covariate_matches_the_textbook_formula() {
    let (x, y, z1, _) = data();
    let pearson = |a: &[f64], b: &[f64]| {
        let ma = a.iter().sum::<f64>() / a.len() as f64;
        let mb = b.iter().sum::<f64>() / b.len() as f64;
        let ac: Vec<f64> = a.iter().map(|v| v - ma).collect();
        let bc: Vec<f64> = b.iter().map(|v| v - mb).collect();
        correlation_of_centred(&ac, &bc)
    };
    let (rxy, rxz, ryz) = (pearson(&x, &y), pearson(&x, &z1), pearson(&y, &z1));
    let expected = (rxy - rxz * ryz) / ((1.0 - rxz * rxz) * (1.0 - ryz * ryz)).sqrt();
    let covar = Mat::from_columns(12, &[&z1]).unwrap();
    let got = partial_corr(&x, &y, &covar, Method::Pearson, Semi::Both).unwrap();
    assert!((got.r - expected).abs() < 1e-13);
    assert_eq!(got.df, 9.0);
    // semi-partial, z removed from y only: (r_xy − r_xz r_yz) / √(1 − r_yz²)
    let expected_semi = (rxy - rxz * ryz) / (1.0 - ryz * ryz).sqrt();
    let got = partial_corr(&x, &y, &covar, Method::Pearson, Semi::Y).unwrap();
    assert!(
        (got.r - expected_semi).abs() < 1e-13,
        "{} vs {expected_semi}",
        got.r
    );
}

#[test]
fn precision_formulas_agree_with_residual_correlations() {
    let (x, y, z1, z2) = data();
    let covar = Mat::from_columns(12, &[&z1, &z2]).unwrap();
    let data = Mat::from_columns(12, &[&x, &y, &z1, &z2]).unwrap();
    let pcor = ppcor_matrices(&data, Method::Pearson, false).unwrap();
    let spcor = ppcor_matrices(&data, Method::Pearson, true).unwrap();
    for (semi, matrix, i, j) in [
        (Semi::Both, &pcor, 0, 1),
        (Semi::Y, &spcor, 0, 1),
        (Semi::X, &spcor, 1, 0),
    ] {
        let direct = partial_corr(&x, &y, &covar, Method::Pearson, semi).unwrap();
        assert!((direct.r - matrix.estimate.get(i, j)).abs() < 1e-12, "{semi:?}");
        assert!((direct.p_value / matrix.p_value.get(i, j) - 1.0).abs() < 1e-10);
    }
}

#[test]
fn kendall_without_covariates_is_tau_b_with_its_normal_test() {
    let (x, y, _, _) = data();
    let got = partial_corr(&x, &y, &Mat::zeros(12, 0), Method::Kendall, Semi::Both).unwrap();
    let tau = crate::rank::kendall_tau_b(&x, &y);
    assert_eq!(got.r, tau);
    let z = tau / (2.0 * (2.0 * 12.0 + 5.0) / (9.0 * 12.0 * 11.0_f64)).sqrt();
    assert!((got.statistic - z).abs() < 1e-14);
}

#[test]
fn matrix_agrees_with_pairwise_calls() {
    let (x, y, z1, z2) = data();
    let scores = Mat::from_columns(12, &[&x, &y, &z2]).unwrap();
    let covar = Mat::from_columns(12, &[&z1]).unwrap();
    for method in [Method::Pearson, Method::Spearman, Method::Kendall] {
        let matrix = partial_corr_matrix(&scores, &covar, method).unwrap();
        let pair = partial_corr(&y, &z2, &covar, method, Semi::Both).unwrap();
        assert!((matrix.estimate.get(1, 2) - pair.r).abs() < 1e-13, "{method:?}");
        assert!((matrix.p_value.get(2, 1) - pair.p_value).abs() < 1e-13);
    }
}

#[test]
fn bad_input_is_named() {
    let (x, y, z1, _) = data();
    let covar = Mat::from_columns(12, &[&z1]).unwrap();
    let err = partial_corr(&x, &y[..11], &covar, Method::Pearson, Semi::Both).unwrap_err();
    assert!(err.to_string().starts_with("y: has 11 values"));
    let err = partial_corr(&x[..3], &y[..3], &Mat::zeros(3, 1), Method::Pearson, Semi::Both).unwrap_err();
    assert!(err.to_string().starts_with("n: 3 observations"), "{err}");
    let err = partial_corr(&x, &z1, &covar, Method::Pearson, Semi::Both).unwrap_err();
    assert!(
        err.to_string().starts_with("y: is a linear function of covar"),
        "{err}"
    );
    assert!(crate::choice::parse::<Method>("pearsn")
        .unwrap_err()
        .to_string()
        .starts_with("method: unknown method"));
}
