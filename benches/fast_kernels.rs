//! Criterion comparison of the fast kernels gengen uses with the reference kernels, on the W1 and W2
//! shapes: the GEMM-form permutation counting (`rust/src/permutation_fast.rs`, identical counts checked
//! first) and the moment-form bootstrap (`rust/src/bootstrap_fast.rs`, replicates checked to 1e-12 first).
//!
//! Run with `cargo bench --bench fast_kernels` (`-- --quick` for a fast pass). The fast kernels are what
//! `gengen._core` uses (the linear control, Pearson); the reference kernels remain its fallback for the GAM
//! control and for near-degenerate resamples.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};

use _core::bootstrap::{replicates_batch, BootstrapRun};
use _core::control::Control;
use _core::matrix::Mat;
use _core::method::Method;
use _core::permutation::{count_exceedances_batch, PreparedRun};
use _core::rng::{BootstrapScheme, PermutationScheme, Xoshiro256pp};
use _core::{bootstrap_fast, permutation_fast};
use bootstrap_fast::{replicates_batch_fast, FastBootstrapRun};
use permutation_fast::{count_exceedances_batch_fast, FastRun};

/// A run of `n` checkpoints: an ID learning curve and `m` OOD scores that follow it plus AR(1) noise.
fn trajectory(n: usize, m: usize, seed: u64) -> (Mat, Mat) {
    let mut rng = Xoshiro256pp::seed_from_u64(seed);
    let id: Vec<f64> = (0..n)
        .map(|i| 0.5 + 0.4 * (1.0 - (-(i as f64) / (n as f64 / 4.0)).exp()) + 0.01 * rng.next_normal())
        .collect();
    let mut data = Vec::with_capacity(n * m);
    for _ in 0..m {
        let mut noise = 0.0;
        for value in &id {
            noise = 0.5 * noise + 0.01 * rng.next_normal();
            data.push(0.8 * value + noise);
        }
    }
    (
        Mat::from_col_major(n, m, data).unwrap(),
        Mat::from_col_major(n, 1, id).unwrap(),
    )
}

fn compare(c: &mut Criterion, label: &str, runs: usize, n: usize, m: usize, length: usize, perms: u64) {
    let scheme = PermutationScheme::Block { length };
    let prepared: Vec<PreparedRun> = (0..runs)
        .map(|s| {
            let (scores, covar) = trajectory(n, m, 10 + s as u64);
            PreparedRun::linear(&scores, &covar, Method::Pearson, scheme).unwrap()
        })
        .collect();
    let fast: Vec<FastRun> = prepared
        .iter()
        .map(|r| FastRun::from_prepared(r).unwrap())
        .collect();
    assert_eq!(
        count_exceedances_batch(&prepared, 7, 0..perms),
        count_exceedances_batch_fast(&fast, 7, 0..perms),
        "the fast kernel must count exactly as the scalar kernel"
    );
    let mut group = c.benchmark_group(label);
    group.sample_size(10);
    group.bench_function("scalar (count_exceedances_batch)", |b| {
        b.iter(|| black_box(count_exceedances_batch(&prepared, 7, 0..perms)))
    });
    group.bench_function("GEMM form (count_exceedances_batch_fast)", |b| {
        b.iter(|| black_box(count_exceedances_batch_fast(&fast, 7, 0..perms)))
    });
    group.finish();
}

fn bootstraps(c: &mut Criterion) {
    let runs: Vec<BootstrapRun> = (0..50)
        .map(|s| {
            let (scores, covar) = trajectory(100, 7, 100 + s);
            BootstrapRun {
                scores,
                covar,
                scheme: BootstrapScheme::MovingBlock { length: 5 },
                control: Control::Linear,
            }
        })
        .collect();
    let fast: Vec<FastBootstrapRun> = runs.iter().map(|r| FastBootstrapRun::new(r).unwrap()).collect();
    let expected = replicates_batch(&runs, Method::Pearson, 3, 0..200);
    let got = replicates_batch_fast(&runs, &fast, 3, 0..200);
    let worst = expected
        .iter()
        .flatten()
        .flatten()
        .zip(got.iter().flatten().flatten())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 1e-12,
        "the fast kernel must agree with the exact path (max |diff| {worst:e})"
    );
    let mut group =
        c.benchmark_group("W1 shape: 50 runs x 7 OOD x 100 ckpt, 200 moving-block bootstrap replicates");
    group.sample_size(10);
    group.bench_function("exact (replicates_batch)", |b| {
        b.iter(|| black_box(replicates_batch(&runs, Method::Pearson, 3, 0..200)))
    });
    group.bench_function("moment form (replicates_batch_fast)", |b| {
        b.iter(|| black_box(replicates_batch_fast(&runs, &fast, 3, 0..200)))
    });
    group.finish();
}

fn permutations(c: &mut Criterion) {
    compare(
        c,
        "W1 shape: 50 runs x 7 OOD x 100 ckpt, 1000 block perms",
        50,
        100,
        7,
        5,
        1000,
    );
    compare(
        c,
        "W2 shape: 1 run x 50 OOD x 1000 ckpt, 100 block perms",
        1,
        1000,
        50,
        10,
        100,
    );
}

criterion_group!(benches, permutations, bootstraps);
criterion_main!(benches);
