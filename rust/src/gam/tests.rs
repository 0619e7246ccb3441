//! The GAM smoother against mgcv's numbers (pasted as R prints them) and against closed forms.

#![allow(clippy::excessive_precision)] // R prints 17 significant digits; they are pasted as printed.

use super::*;

/// `i <- 1:40; x <- i/40 + 0.3*sin(i); y <- cos(3*x) + 0.2*sin(7*i)`
fn reference_data() -> (Vec<f64>, Vec<f64>) {
    let x: Vec<f64> = (1..=40)
        .map(|i| i as f64 / 40.0 + 0.3 * (i as f64).sin())
        .collect();
    let y = x
        .iter()
        .enumerate()
        .map(|(i, xi)| (3.0 * xi).cos() + 0.2 * (7.0 * (i + 1) as f64).sin())
        .collect();
    (x, y)
}

fn smoother(controls: &[&[f64]], k: usize, method: SmoothMethod) -> GamSmoother {
    let control = Mat::from_columns(controls[0].len(), controls).unwrap();
    GamSmoother::new(
        &control,
        &GamOptions {
            k,
            method,
            basis: Basis::CubicRegression,
            // These tests check the criterion's own optimum against mgcv's.
            max_edf: EdfCap::Off,
        },
        "covar",
    )
    .unwrap()
}

fn relative(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs()
}

fn linear_residuals(x: &[f64], y: &[f64]) -> Vec<f64> {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx) * (a - mx)).sum();
    x.iter()
        .zip(y)
        .map(|(a, b)| b - my - sxy / sxx * (a - mx))
        .collect()
}

/// mgcv's fit of the reference data with `k = 10` and `method`: λ (to 1e-3 relative), EDF (to 1e-4), the
/// criterion (`score_close`) and the first five fitted values (to 1e-5).
fn assert_fit_matches(
    method: SmoothMethod,
    lambda: f64,
    edf: f64,
    score_close: impl Fn(f64) -> bool,
    fitted: [f64; 5],
) {
    let (x, y) = reference_data();
    let fit = smoother(&[&x], 10, method).fit_column(&y).unwrap();
    assert!(relative(fit.lambda[0], lambda) < 1e-3, "{:?}", fit.lambda);
    assert!((fit.edf - edf).abs() < 1e-4, "{}", fit.edf);
    assert!(score_close(fit.score), "{}", fit.score);
    for (g, w) in fit.fitted.iter().zip(&fitted) {
        assert!((g - w).abs() < 1e-5, "{g} vs {w}");
    }
}

#[test]
fn gcv_fit_matches_mgcv() {
    // R: b <- gam(y ~ s(x, k=10, bs="cr"), data=data.frame(x, y), method="GCV.Cp")
    //    b$sp; sum(b$edf); b$gcv.ubre; fitted(b)[1:5]
    let fitted = [
        0.66687214505122661,
        0.54071159037222871,
        0.99294916965744706,
        0.9530522441777185,
        0.91870772846559867,
    ];
    let score = |s: f64| relative(s, 0.025245791321840263) < 1e-8;
    assert_fit_matches(
        SmoothMethod::Gcv,
        10.856587293414579,
        6.8260555106687733,
        score,
        fitted,
    );
}

#[test]
fn reml_fit_matches_mgcv() {
    // R: b <- gam(y ~ s(x, k=10, bs="cr"), data=data.frame(x, y), method="REML")
    let fitted = [
        0.66689111490936881,
        0.54308688981988018,
        0.9868648748588561,
        0.95967925747632477,
        0.92832327180272545,
    ];
    let score = |s: f64| (s - -10.398158056850228).abs() < 1e-6;
    assert_fit_matches(
        SmoothMethod::Reml,
        14.521200826320195,
        6.5506615886690129,
        score,
        fitted,
    );
}

/// `z1 <- x; z2 <- cos(1.7*i) + i/80; y2 <- sin(4*z1) + 0.5*z2^2 + 0.1*cos(11*i)`
fn additive_data() -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (z1, _) = reference_data();
    let z2: Vec<f64> = (1..=40)
        .map(|i| (1.7 * i as f64).cos() + i as f64 / 80.0)
        .collect();
    let y = (0..40)
        .map(|i| (4.0 * z1[i]).sin() + 0.5 * z2[i] * z2[i] + 0.1 * (11.0 * (i + 1) as f64).cos())
        .collect();
    (z1, z2, y)
}

#[test]
fn additive_fits_match_mgcv() {
    // R: b <- gam(y ~ s(z1, k=6, bs="cr") + s(z2, k=6, bs="cr"), data=data.frame(z1, z2, y), method=m)
    let cases = [
        (
            SmoothMethod::Gcv,
            [0.49901086714043791, 7.7802035937821605],
            8.9078331937715536,
            0.010903515452046576,
            [
                0.9041703876079189,
                1.3202058000603958,
                0.50461019653148154,
                -0.067306780978631187,
                -0.4083852787098316,
            ],
        ),
        (
            SmoothMethod::Reml,
            [0.22786604053865436, 2.1801882682239091],
            9.8668792186510821,
            -19.528830306592234,
            [
                0.90183665069986552,
                1.3197350221234947,
                0.49812233927899724,
                -0.079217002965266015,
                -0.40189953056949235,
            ],
        ),
    ];
    let (z1, z2, y) = additive_data();
    for (method, sp, edf, score, fitted) in cases {
        let fit = smoother(&[&z1, &z2], 6, method).fit_column(&y).unwrap();
        assert!(
            relative(fit.lambda[0], sp[0]) < 1e-2 && relative(fit.lambda[1], sp[1]) < 1e-2,
            "{:?}",
            fit.lambda
        );
        assert!((fit.edf - edf).abs() < 1e-3, "{method:?} edf {}", fit.edf);
        assert!(
            relative(fit.score, score) < 1e-6,
            "{method:?} score {}",
            fit.score
        );
        for (g, w) in fit.fitted.iter().zip(&fitted) {
            assert!((g - w).abs() < 1e-4, "{method:?} {g} vs {w}");
        }
    }
}

#[test]
fn huge_lambda_gives_linear_residuals() {
    let (x, y) = reference_data();
    let gam = smoother(&[&x], 10, SmoothMethod::Gcv);
    let fit = gam.fit_column_with_lambda(&y, &[1e12]).unwrap();
    let linear = linear_residuals(&x, &y);
    for (g, l) in fit.residuals.iter().zip(&linear) {
        assert!((g - l).abs() < 1e-6, "{g} vs {l}");
    }
    assert!((fit.edf - 2.0).abs() < 1e-6);
}

#[test]
fn tiny_lambda_gives_unpenalised_regression_spline() {
    // As λ → 0 the fit is least squares on the full basis: it interpolates when k equals n.
    let x: Vec<f64> = (0..12)
        .map(|i| (i as f64 * 0.37).sin() + i as f64 * 0.2)
        .collect();
    let y: Vec<f64> = x.iter().map(|v| (2.0 * v).cos()).collect();
    let control = Mat::from_columns(12, &[&x]).unwrap();
    let gam = GamSmoother::new(
        &control,
        &GamOptions {
            k: 11,
            ..GamOptions::default()
        },
        "covar",
    )
    .unwrap();
    let fit = gam.fit_column_with_lambda(&y, &[1e-12]).unwrap();
    assert!((fit.edf - 11.0).abs() < 1e-6);
    // Unpenalised residuals are orthogonal to the model space.
    let again = gam.fit_column_with_lambda(&fit.residuals, &[1e-12]).unwrap();
    assert!(again.fitted.iter().all(|f| f.abs() < 1e-9));
}

#[test]
fn edf_lies_between_null_space_and_basis_dimension() {
    let (x, y) = reference_data();
    let gam = smoother(&[&x], 10, SmoothMethod::Gcv);
    let mut last = f64::INFINITY;
    for log_lambda in -12..12 {
        let fit = gam.fit_column_with_lambda(&y, &[10f64.powi(log_lambda)]).unwrap();
        assert!(fit.edf >= 2.0 - 1e-9 && fit.edf <= 10.0 + 1e-9);
        assert!(fit.edf <= last + 1e-12, "edf must fall as lambda grows");
        last = fit.edf;
    }
}

#[test]
fn fixed_smoother_agrees_with_the_fit() {
    let (z1, z2, y) = additive_data();
    for gam in [
        smoother(&[&z1], 10, SmoothMethod::Gcv),
        smoother(&[&z1, &z2], 6, SmoothMethod::Reml),
    ] {
        let fit = gam.fit_column(&y).unwrap();
        let fixed = gam.fixed(&fit.lambda).unwrap();
        let residuals = fixed.residualise(&y).unwrap();
        for (a, b) in residuals.iter().zip(&fit.residuals) {
            assert!((a - b).abs() < 1e-10);
        }
        assert!((fixed.edf() - fit.edf).abs() < 1e-10);
        let hat = fixed.hat_matrix();
        let trace: f64 = (0..hat.nrows()).map(|i| hat.get(i, i)).sum();
        assert!((trace - fit.edf).abs() < 1e-10);
        assert!((hat.get(3, 7) - hat.get(7, 3)).abs() < 1e-14);
        let row: f64 = (0..hat.nrows()).map(|j| hat.get(5, j)).sum();
        assert!(
            (row - 1.0).abs() < 1e-10,
            "the intercept is unpenalised, so A 1 = 1"
        );
    }
}

#[test]
fn columns_fit_in_parallel_in_order() {
    let (x, y) = reference_data();
    let y2: Vec<f64> = y.iter().zip(&x).map(|(a, b)| a * b).collect();
    let gam = smoother(&[&x], 10, SmoothMethod::Gcv);
    let ys = Mat::from_columns(40, &[&y, &y2, &y]).unwrap();
    let fits = gam.residualise_columns(&ys, "scores").unwrap();
    assert_eq!(fits.len(), 3);
    assert_eq!(fits[0], gam.fit_column(&y).unwrap());
    assert_eq!(fits[1], gam.fit_column(&y2).unwrap());
    assert_eq!(fits[0], fits[2]);
}

#[test]
fn k_is_lowered_to_the_distinct_values() {
    let x: Vec<f64> = (0..30).map(|i| (i % 6) as f64).collect();
    let control = Mat::from_columns(30, &[&x]).unwrap();
    let gam = GamSmoother::new(&control, &GamOptions::default(), "covar").unwrap();
    assert_eq!(gam.k_used(), &[6]);
    assert!(gam.k_reduced());
    let short: Vec<f64> = (0..6).map(|i| i as f64).collect();
    let control = Mat::from_columns(6, &[&short]).unwrap();
    assert_eq!(
        GamSmoother::new(&control, &GamOptions::default(), "covar")
            .unwrap()
            .k_used(),
        &[5]
    );
}

#[test]
fn bad_input_is_an_error() {
    let opts = GamOptions::default();
    let constant = Mat::from_columns(20, &[&[1.0; 20]]).unwrap();
    let err = GamSmoother::new(&constant, &opts, "covar").unwrap_err();
    assert!(err.to_string().contains("constant"), "{err}");
    let two: Vec<f64> = (0..20).map(|i| (i % 2) as f64).collect();
    let err = GamSmoother::new(&Mat::from_columns(20, &[&two]).unwrap(), &opts, "covar").unwrap_err();
    assert!(err.to_string().contains("2 distinct"), "{err}");
    let mut nan: Vec<f64> = (0..20).map(|i| i as f64).collect();
    nan[4] = f64::NAN;
    let err = GamSmoother::new(&Mat::from_columns(20, &[&nan]).unwrap(), &opts, "covar").unwrap_err();
    assert!(err.to_string().contains("non-finite"), "{err}");
    let tiny = Mat::from_columns(3, &[&[1.0, 2.0, 3.0]]).unwrap();
    assert!(GamSmoother::new(&tiny, &opts, "covar").is_err());
    let x: Vec<f64> = (0..20).map(|i| i as f64).collect();
    assert!(GamSmoother::new(
        &Mat::from_columns(20, &[&x]).unwrap(),
        &GamOptions { k: 2, ..opts },
        "covar"
    )
    .is_err());
    let twice: Vec<f64> = x.iter().map(|v| 2.0 * v).collect();
    let err = GamSmoother::new(&Mat::from_columns(20, &[&x, &twice]).unwrap(), &opts, "covar").unwrap_err();
    assert!(err.to_string().contains("collinear"), "{err}");
    let too_many = GamSmoother::new(
        &Mat::from_columns(20, &[&x, &x.iter().map(|v| v * v).collect::<Vec<_>>()]).unwrap(),
        &GamOptions { k: 11, ..opts },
        "covar",
    );
    assert!(too_many.is_err());
    let gam = GamSmoother::new(&Mat::from_columns(20, &[&x]).unwrap(), &opts, "covar").unwrap();
    assert!(gam.fit_column(&x[..10]).is_err());
    assert!(gam.fit_column(&nan).is_err());
    assert!(gam.fixed(&[-1.0]).is_err());
    assert!(gam.fixed(&[1.0, 1.0]).is_err());
}

#[test]
fn thin_plate_fits_match_mgcv() {
    // R: gam(y ~ s(x, k=10), data=data.frame(x, y), method=m,
    //        control=gam.control(mgcv.tol=1e-9, newton=list(conv.tol=1e-9)))
    //    sum(b$edf); b$gcv.ubre; fitted(b)[1:5]   (bs = "tp" is mgcv's default)
    // λ is not compared: its scale depends on the internal parameterisation of the tp basis.
    let cases = [
        (
            SmoothMethod::Gcv,
            6.5127821383925095,
            Some(0.025710514484465201),
            [
                0.66162801594519283,
                0.54582613089432619,
                0.98197606576441521,
                0.96477779614546078,
                0.93503272050289454,
            ],
        ),
        (
            SmoothMethod::Reml,
            6.6350219786980791,
            None,
            [
                0.66132872018536804,
                0.5452612944781674,
                0.98472257064369351,
                0.96156297193026885,
                0.93021155020004276,
            ],
        ),
    ];
    let (x, y) = reference_data();
    let control = Mat::from_columns(40, &[&x]).unwrap();
    for (method, edf, score, fitted) in cases {
        let options = GamOptions {
            k: 10,
            method,
            basis: Basis::ThinPlate,
            max_edf: EdfCap::Off,
        };
        let fit = GamSmoother::new(&control, &options, "covar")
            .unwrap()
            .fit_column(&y)
            .unwrap();
        assert!((fit.edf - edf).abs() < 1e-4, "{method:?} edf {}", fit.edf);
        if let Some(score) = score {
            assert!(relative(fit.score, score) < 1e-8, "{}", fit.score);
        }
        for (g, w) in fit.fitted.iter().zip(&fitted) {
            assert!((g - w).abs() < 1e-5, "{method:?} {g} vs {w}");
        }
    }
}

#[test]
fn basis_names_round_trip() {
    for basis in [Basis::CubicRegression, Basis::ThinPlate] {
        assert_eq!(choice::parse::<Basis>(basis.name()).unwrap(), basis);
    }
    assert!(choice::parse::<Basis>("ps").is_err());
}

#[test]
fn method_names_round_trip() {
    for method in [SmoothMethod::Gcv, SmoothMethod::Reml] {
        assert_eq!(choice::parse::<SmoothMethod>(method.name()).unwrap(), method);
    }
    let err = choice::parse::<SmoothMethod>("GCV.Cp").unwrap_err();
    assert!(err.to_string().starts_with("gam_method: unknown"), "{err}");
}

#[test]
fn constant_y_has_zero_residuals() {
    let (x, _) = reference_data();
    for method in [SmoothMethod::Gcv, SmoothMethod::Reml] {
        let fit = smoother(&[&x], 10, method).fit_column(&[0.25; 40]).unwrap();
        assert!(fit.residuals.iter().all(|r| r.abs() < 1e-12));
        assert!(fit.edf >= 2.0 - 1e-9 && fit.score.is_finite());
    }
}

#[test]
fn linear_y_is_fitted_exactly() {
    let (x, _) = reference_data();
    let y: Vec<f64> = x.iter().map(|v| 3.0 - 2.0 * v).collect();
    for method in [SmoothMethod::Gcv, SmoothMethod::Reml] {
        let fit = smoother(&[&x], 10, method).fit_column(&y).unwrap();
        assert!(fit.residuals.iter().all(|r| r.abs() < 1e-10));
    }
}

/// Eleven checkpoints of a wiggly column: GCV alone spends nearly every degree of freedom.
fn short_wiggly() -> (Vec<f64>, Vec<f64>) {
    let x: Vec<f64> = (0..11).map(|i| 0.5 + 0.035 * i as f64).collect();
    let y = x
        .iter()
        .enumerate()
        .map(|(i, v)| (30.0 * v).sin() + 0.05 * (2.7 * i as f64).sin())
        .collect();
    (x, y)
}

#[test]
fn edf_cap_holds_and_is_the_fit_at_the_returned_lambda() {
    let (x, y) = short_wiggly();
    let control = Mat::from_columns(11, &[&x]).unwrap();
    let free = GamSmoother::new(
        &control,
        &GamOptions {
            max_edf: EdfCap::Off,
            ..GamOptions::default()
        },
        "covar",
    )
    .unwrap()
    .fit_column(&y)
    .unwrap();
    assert!(free.edf > 6.0 && !free.capped, "{}", free.edf);
    let gam = GamSmoother::new(&control, &GamOptions::default(), "covar").unwrap();
    assert!((gam.max_edf() - 3.75).abs() < 1e-12, "1 + 11/4");
    let capped = gam.fit_column(&y).unwrap();
    assert!(
        capped.capped && (capped.edf - 3.75).abs() < 1e-6,
        "{}",
        capped.edf
    );
    assert!(capped.lambda[0] > free.lambda[0]);
    // The capped fit is the penalised fit at its own λ (what mgcv's gam(..., sp = λ) returns).
    let again = gam.fit_column_with_lambda(&y, &capped.lambda).unwrap();
    for (a, b) in again.fitted.iter().zip(&capped.fitted) {
        assert!((a - b).abs() < 1e-12);
    }
    // A column the criterion fits with few degrees of freedom is left alone.
    let line: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, v)| 1.0 + 2.0 * v + if i % 2 == 0 { 0.05 } else { -0.05 })
        .collect();
    let uncapped = gam.fit_column(&line).unwrap();
    assert!(!uncapped.capped && uncapped.edf <= 3.75 + 1e-9);
}

#[test]
fn edf_cap_with_two_controls_raises_both_lambdas_together() {
    let z1: Vec<f64> = (0..30).map(|i| (i as f64 * 0.37).sin()).collect();
    let z2: Vec<f64> = (0..30)
        .map(|i| (i as f64 * 0.91).cos() + 0.01 * i as f64)
        .collect();
    let y: Vec<f64> = z1
        .iter()
        .zip(&z2)
        .map(|(a, b)| (3.0 * a).sin() + (4.0 * b).cos())
        .collect();
    let control = Mat::from_columns(30, &[&z1, &z2]).unwrap();
    let options = |cap| GamOptions {
        k: 6,
        max_edf: cap,
        ..GamOptions::default()
    };
    let free = GamSmoother::new(&control, &options(EdfCap::Off), "covar")
        .unwrap()
        .fit_column(&y)
        .unwrap();
    assert!(free.edf > 5.0, "{}", free.edf);
    let capped = GamSmoother::new(&control, &options(EdfCap::At(4.0)), "covar")
        .unwrap()
        .fit_column(&y)
        .unwrap();
    assert!(capped.capped && (capped.edf - 4.0).abs() < 1e-6, "{}", capped.edf);
    let ratio: Vec<f64> = capped
        .lambda
        .iter()
        .zip(&free.lambda)
        .map(|(c, f)| c / f)
        .collect();
    assert!(
        (ratio[0] / ratio[1] - 1.0).abs() < 1e-9 && ratio[0] > 1.0,
        "{ratio:?}"
    );
}

#[test]
fn edf_cap_below_a_straight_line_is_refused() {
    let (x, _) = short_wiggly();
    let control = Mat::from_columns(11, &[&x]).unwrap();
    for cap in [1.5, f64::NAN] {
        let err = GamSmoother::new(
            &control,
            &GamOptions {
                max_edf: EdfCap::At(cap),
                ..GamOptions::default()
            },
            "covar",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("max_edf: must be at least 2"),
            "{err}"
        );
    }
    assert_eq!(default_max_edf(11, 1), 3.75);
    assert_eq!(default_max_edf(4, 1), 2.0);
    assert_eq!(default_max_edf(40, 2), 21.0);
}
