//! Criterion benchmarks of the GAM control on the W3 shape: 1,000 score columns × 200 checkpoints on one
//! control, cubic regression spline with k = 10 (mgcv's `s(z, k = 10, bs = "cr")`).
//!
//! Run with `cargo bench --bench gam` (`-- --quick` for a fast pass). `benches/compare.py` times the same
//! workload through Python against pygam and an mgcv loop.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};

use _core::gam::{GamOptions, GamSmoother, SmoothMethod};
use _core::matrix::Mat;
use _core::rng::Xoshiro256pp;

/// `columns` noisy sine curves of one control at `n` sorted points in [0, 1].
fn w3(columns: usize, n: usize, seed: u64) -> (Mat, Mat) {
    let mut rng = Xoshiro256pp::seed_from_u64(seed);
    let mut control: Vec<f64> = (0..n).map(|_| rng.next_f64()).collect();
    control.sort_by(f64::total_cmp);
    let mut data = Vec::with_capacity(n * columns);
    for _ in 0..columns {
        let phase = std::f64::consts::PI * rng.next_f64();
        let amplitude = 0.1 + 0.9 * rng.next_f64();
        data.extend(
            control
                .iter()
                .map(|z| amplitude * (3.0 * z + phase).sin() + 0.1 * rng.next_normal()),
        );
    }
    (
        Mat::from_col_major(n, columns, data).unwrap(),
        Mat::from_col_major(n, 1, control).unwrap(),
    )
}

fn gam(c: &mut Criterion) {
    let (ys, control) = w3(1000, 200, 4);
    let mut group = c.benchmark_group("GAM W3: 1000 columns x 200 checkpoints, k = 10");
    group.sample_size(10);
    for method in [SmoothMethod::Gcv, SmoothMethod::Reml] {
        let options = GamOptions {
            method,
            ..GamOptions::default()
        };
        group.bench_function(format!("smoother + fit every column ({})", method.name()), |b| {
            b.iter(|| {
                let smoother = GamSmoother::new(&control, &options, "covar").unwrap();
                black_box(smoother.residualise_columns(&ys, "y").unwrap())
            })
        });
    }
    let smoother = GamSmoother::new(&control, &GamOptions::default(), "covar").unwrap();
    group.bench_function("smoother set-up only (basis, QR, eigen, SVD)", |b| {
        b.iter(|| black_box(GamSmoother::new(&control, &GamOptions::default(), "covar").unwrap()))
    });
    let fit = smoother.fit_column(ys.col(0)).unwrap();
    let fixed = smoother.fixed(&fit.lambda).unwrap();
    let mut out = vec![0.0; ys.nrows()];
    group.bench_function(
        "fixed smoother applied to 1000 columns (permutation inner step)",
        |b| {
            b.iter(|| {
                for j in 0..ys.ncols() {
                    fixed.residualise_into(ys.col(j), &mut out);
                }
                black_box(&out);
            })
        },
    );
    group.finish();
}

criterion_group!(benches, gam);
criterion_main!(benches);
