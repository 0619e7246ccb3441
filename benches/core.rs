//! Criterion benchmarks of the numerical kernels on the standard workload shapes (see benches/README.md).
//!
//! Run with `cargo bench --bench core`; `cargo bench --bench core -- --quick` for a fast pass.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};

use _core::batch::{
    bootstrap_ci_batch, permutation_test_batch, BootstrapRequest, PermutationRequest, ResamplingRequest,
};
use _core::bootstrap::{replicates_batch, BootstrapRun, IntervalMethod};
use _core::control::Control;
use _core::error::StatsError;
use _core::matrix::Mat;
use _core::method::Method;
use _core::pcor::partial_corr_matrix;
use _core::permutation::{count_exceedances_batch, PreparedRun};
use _core::residualise::LinearResidualiser;
use _core::rng::{BootstrapKind, BootstrapScheme, PermutationKind, PermutationScheme, Xoshiro256pp};

/// A run of `n` checkpoints: an ID learning curve and `m` OOD scores that follow it plus AR(1) noise.
fn trajectory(n: usize, m: usize, seed: u64) -> (Mat, Mat) {
    let mut rng = Xoshiro256pp::seed_from_u64(seed);
    let id: Vec<f64> = (0..n)
        .map(|i| 0.5 + 0.4 * (1.0 - (-(i as f64) / (n as f64 / 4.0)).exp()))
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

fn residualisation(c: &mut Criterion) {
    let (scores, covar) = trajectory(1000, 50, 1);
    c.bench_function("residualise 1000x50 on 1 covariate", |b| {
        b.iter(|| {
            let residualiser = LinearResidualiser::new(&covar, "covar").unwrap();
            black_box(residualiser.residualise_checked(&scores, "scores").unwrap())
        })
    });
}

fn correlation_matrix(c: &mut Criterion) {
    let (scores, covar) = trajectory(1000, 50, 2);
    c.bench_function("partial_corr_matrix 1000x50 (W2 point estimate)", |b| {
        b.iter(|| black_box(partial_corr_matrix(&scores, &covar, Method::Pearson).unwrap()))
    });
}

fn permutations(c: &mut Criterion) {
    let schemes = [
        ("free", PermutationScheme::Free),
        ("block", PermutationScheme::Block { length: 5 }),
        ("circular", PermutationScheme::Circular { mirror: true }),
    ];
    for (name, scheme) in schemes {
        let runs: Vec<PreparedRun> = (0..50)
            .map(|s| {
                let (scores, covar) = trajectory(100, 7, 10 + s);
                PreparedRun::linear(&scores, &covar, Method::Pearson, scheme).unwrap()
            })
            .collect();
        c.bench_function(
            &format!("permutation {name}: W1 shape, 50 runs x 7 OOD x 100 ckpt, 100 perms"),
            |b| b.iter(|| black_box(count_exceedances_batch(&runs, 7, 0..100))),
        );
    }
}

fn bootstraps(c: &mut Criterion) {
    let schemes = [
        ("iid", BootstrapScheme::Iid),
        ("block", BootstrapScheme::MovingBlock { length: 5 }),
        ("circular", BootstrapScheme::CircularBlock { length: 5 }),
    ];
    for (name, scheme) in schemes {
        let runs: Vec<BootstrapRun> = (0..50)
            .map(|s| {
                let (scores, covar) = trajectory(100, 7, 100 + s);
                BootstrapRun {
                    scores,
                    covar,
                    scheme,
                    control: Control::Linear,
                }
            })
            .collect();
        c.bench_function(
            &format!("bootstrap {name}: W1 shape, 50 runs, 20 replicates"),
            |b| b.iter(|| black_box(replicates_batch(&runs, Method::Pearson, 3, 0..20))),
        );
    }
}

/// The whole of W1 as the binding runs it ([`_core::batch`]: validation, preparation, kernel choice, slices,
/// intervals), on one thread so that the figure does not depend on the machine's other work.
fn w1_batch(c: &mut Criterion) {
    let (scores, covars): (Vec<Mat>, Vec<Mat>) = (0..50).map(|s| trajectory(100, 7, 200 + s)).unzip();
    let quiet = || -> Result<(), StatsError> { Ok(()) };
    let resampling = ResamplingRequest {
        method: Method::Pearson,
        control: Control::Linear,
        block_length: None,
        seed: 1,
        n_threads: Some(1),
    };
    let permutations = PermutationRequest {
        resampling: resampling.clone(),
        scheme: PermutationKind::Block,
        n_perm: 10_000,
        mirror: false,
    };
    c.bench_function("W1 permutations through batch (10,000 block, 1 thread)", |b| {
        b.iter(|| {
            black_box(permutation_test_batch(scores.clone(), covars.clone(), &permutations, &quiet).unwrap())
        })
    });
    let bootstrap = BootstrapRequest {
        resampling,
        scheme: BootstrapKind::MovingBlock,
        n_boot: 2_000,
        ci_level: 0.95,
        ci_method: IntervalMethod::Percentile,
    };
    c.bench_function("W1 bootstrap through batch (2,000 block, 1 thread)", |b| {
        b.iter(|| black_box(bootstrap_ci_batch(scores.clone(), covars.clone(), &bootstrap, &quiet).unwrap()))
    });
}

criterion_group!(
    benches,
    residualisation,
    correlation_matrix,
    permutations,
    bootstraps,
    w1_batch
);
criterion_main!(benches);
