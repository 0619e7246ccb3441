//! The orchestration: kernel choice, identical results on either kernel and any thread count, progress
//! between slices, errors naming their run.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::gam::GamOptions;
use crate::rng::Xoshiro256pp;

/// `runs` runs of n checkpoints: m scores sharing a factor with one covariate, so that p-values span (0, 1].
fn data(runs: usize, n: usize, m: usize, seed: u64) -> (Vec<Mat>, Vec<Mat>) {
    let mut rng = Xoshiro256pp::seed_from_u64(seed);
    let mut scores = Vec::new();
    let mut covars = Vec::new();
    for _ in 0..runs {
        let id: Vec<f64> = (0..n)
            .map(|i| i as f64 / n as f64 + 0.1 * rng.next_normal())
            .collect();
        let shared: Vec<f64> = (0..n).map(|_| rng.next_normal()).collect();
        let mut values = Vec::with_capacity(n * m);
        for j in 0..m {
            for i in 0..n {
                let factor = if j < 2 { 0.7 * shared[i] } else { 0.0 };
                values.push(id[i] + factor + rng.next_normal());
            }
        }
        scores.push(Mat::from_col_major(n, m, values).unwrap());
        covars.push(Mat::from_col_major(n, 1, id).unwrap());
    }
    (scores, covars)
}

/// Resampling with the default block length from `seed`.
fn resampling(method: Method, control: Control, seed: u64, n_threads: Option<usize>) -> ResamplingRequest {
    ResamplingRequest {
        method,
        control,
        block_length: None,
        seed,
        n_threads,
    }
}

fn permutation_request(
    scheme: PermutationKind,
    control: Control,
    n_threads: Option<usize>,
) -> PermutationRequest {
    PermutationRequest {
        resampling: resampling(Method::Pearson, control, 3, n_threads),
        scheme,
        n_perm: 2500,
        mirror: false,
    }
}

fn bootstrap_request(
    method: Method,
    ci_method: IntervalMethod,
    n_threads: Option<usize>,
) -> BootstrapRequest {
    BootstrapRequest {
        resampling: resampling(method, Control::Linear, 5, n_threads),
        scheme: BootstrapKind::MovingBlock,
        n_boot: 1500,
        ci_level: 0.9,
        ci_method,
    }
}

fn quiet() -> std::result::Result<(), StatsError> {
    Ok(())
}

#[test]
fn the_linear_control_takes_the_fast_kernels() {
    let (scores, covars) = data(2, 40, 4, 1);
    let linear = permutation_request(PermutationKind::Block, Control::Linear, None);
    let batch = PermutationBatch::prepare(scores.clone(), covars.clone(), &linear).unwrap();
    assert_eq!(batch.kernel(), Kernel::Fast);
    let gam = permutation_request(PermutationKind::Block, Control::Gam(GamOptions::default()), None);
    let batch = PermutationBatch::prepare(scores.clone(), covars.clone(), &gam).unwrap();
    assert_eq!(batch.kernel(), Kernel::Exact);
    for (method, kernel) in [
        (Method::Pearson, Kernel::Fast),
        (Method::Spearman, Kernel::Exact),
        (Method::Kendall, Kernel::Exact),
    ] {
        let request = bootstrap_request(method, IntervalMethod::Percentile, None);
        let batch = BootstrapBatch::prepare(scores.clone(), covars.clone(), &request).unwrap();
        assert_eq!(batch.kernel(), kernel, "{method:?}");
    }
}

#[test]
fn both_kernels_give_the_same_answers() {
    let (scores, covars) = data(3, 45, 5, 2);
    for scheme in [
        PermutationKind::Free,
        PermutationKind::Block,
        PermutationKind::Circular,
    ] {
        let request = permutation_request(scheme, Control::Linear, None);
        let fast = PermutationBatch::prepare(scores.clone(), covars.clone(), &request).unwrap();
        let exact = PermutationBatch::prepare(scores.clone(), covars.clone(), &request)
            .unwrap()
            .exact();
        assert_eq!(exact.kernel(), Kernel::Exact);
        let (fast, exact) = (fast.run(&quiet).unwrap(), exact.run(&quiet).unwrap());
        assert_eq!(fast, exact, "{scheme:?}");
        // Not a vacuous equality: some pairs are significant, some not.
        let p: Vec<f64> = fast.iter().flat_map(|o| o.p_value.as_slice().to_vec()).collect();
        assert!(p.iter().any(|&v| v < 0.01) && p.iter().any(|&v| v > 0.2), "{p:?}");
    }
    for ci_method in [IntervalMethod::Percentile, IntervalMethod::Bca] {
        let request = bootstrap_request(Method::Pearson, ci_method, None);
        let fast = BootstrapBatch::prepare(scores.clone(), covars.clone(), &request)
            .unwrap()
            .run(&quiet)
            .unwrap();
        let exact = BootstrapBatch::prepare(scores.clone(), covars.clone(), &request)
            .unwrap()
            .exact()
            .run(&quiet)
            .unwrap();
        for (f, e) in fast.iter().zip(&exact) {
            assert_eq!(
                (&f.r, &f.n_valid, f.block_length),
                (&e.r, &e.n_valid, e.block_length)
            );
            for (a, b) in [(&f.ci_low, &e.ci_low), (&f.ci_high, &e.ci_high)] {
                for (x, y) in a.as_slice().iter().zip(b.as_slice()) {
                    assert!((x - y).abs() < 1e-10, "{x} vs {y}");
                }
            }
        }
    }
}

/// `call(threads)` gives the same result on one thread, three and the global pool.
fn same_for_any_thread_count<T: PartialEq + std::fmt::Debug>(call: impl Fn(Option<usize>) -> T) {
    let one = call(Some(1));
    assert_eq!(call(Some(3)), one);
    assert_eq!(call(None), one);
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let (scores, covars) = data(5, 60, 4, 3);
    let (s, c) = (&scores, &covars);
    same_for_any_thread_count(|threads| {
        let request = permutation_request(PermutationKind::Block, Control::Linear, threads);
        permutation_test_batch(s.clone(), c.clone(), &request, &quiet).unwrap()
    });
    same_for_any_thread_count(|threads| {
        let request = bootstrap_request(Method::Pearson, IntervalMethod::Bca, threads);
        bootstrap_ci_batch(s.clone(), c.clone(), &request, &quiet).unwrap()
    });
    same_for_any_thread_count(|threads| {
        let matrices =
            partial_corr_matrix_batch(s.clone(), c.clone(), Method::Spearman, &Control::Linear, threads);
        matrices
            .unwrap()
            .into_iter()
            .map(|m| m.estimate)
            .collect::<Vec<_>>()
    });
}

/// What a binding's progress check returns: its own error type, into which core errors convert.
#[derive(Debug, PartialEq)]
enum Interrupt {
    Stopped,
    Core(StatsError),
}

impl From<StatsError> for Interrupt {
    fn from(error: StatsError) -> Self {
        Interrupt::Core(error)
    }
}

#[test]
fn progress_is_called_between_slices_and_can_stop_the_call() {
    let (scores, covars) = data(2, 30, 3, 4);
    let calls = AtomicUsize::new(0);
    let count = || -> std::result::Result<(), StatsError> {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    // The fast kernel counts 9,000 permutations in slices of 4,096, 4,096 and 808; the reference kernel 2,500
    // in slices of 1,024, 1,024 and 452.
    let mut request = permutation_request(PermutationKind::Free, Control::Linear, Some(2));
    request.n_perm = 9000;
    permutation_test_batch(scores.clone(), covars.clone(), &request, &count).unwrap();
    assert_eq!(calls.swap(0, Ordering::SeqCst), 3);
    let exact = PermutationBatch::prepare(
        scores.clone(),
        covars.clone(),
        &permutation_request(PermutationKind::Free, Control::Linear, None),
    )
    .unwrap()
    .exact();
    exact.run(&count).unwrap();
    assert_eq!(calls.swap(0, Ordering::SeqCst), 3);
    // 1,500 replicates (two slices), then one BCa jackknife per run.
    let request = bootstrap_request(Method::Pearson, IntervalMethod::Bca, None);
    bootstrap_ci_batch(scores.clone(), covars.clone(), &request, &count).unwrap();
    assert_eq!(calls.swap(0, Ordering::SeqCst), 4);
    // An interrupt after the first slice is returned as is, and nothing more runs.
    let stop = || -> std::result::Result<(), Interrupt> {
        calls.fetch_add(1, Ordering::SeqCst);
        Err(Interrupt::Stopped)
    };
    let request = permutation_request(PermutationKind::Free, Control::Linear, None);
    let stopped = permutation_test_batch(scores, covars, &request, &stop);
    assert_eq!(stopped, Err(Interrupt::Stopped));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn errors_name_the_argument_and_the_run() {
    let (scores, mut covars) = data(3, 30, 3, 5);
    let request = permutation_request(PermutationKind::Block, Control::Linear, None);
    let short = covars.pop().unwrap();
    let error = PermutationBatch::prepare(scores.clone(), covars.clone(), &request)
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "covar: 2 covariate matrices for 3 runs of scores"
    );
    // A covariate with too few rows for its run's scores, in the second of three runs.
    covars.insert(
        1,
        Mat::from_col_major(20, 1, short.as_slice()[..20].to_vec()).unwrap(),
    );
    let error = PermutationBatch::prepare(scores.clone(), covars.clone(), &request)
        .err()
        .unwrap();
    assert!(error.to_string().starts_with("run 1: "), "{error}");
    let mut request = request;
    request.n_perm = 0;
    let error = PermutationBatch::prepare(scores.clone(), covars.clone(), &request)
        .err()
        .unwrap();
    assert_eq!(error.to_string(), "n_perm: must be at least 1, got 0");
    let mut bad_level = bootstrap_request(Method::Pearson, IntervalMethod::Percentile, Some(0));
    let error = BootstrapBatch::prepare(scores.clone(), covars.clone(), &bad_level)
        .err()
        .unwrap();
    assert_eq!(error.to_string(), "n_threads: must be at least 1");
    bad_level.resampling.n_threads = None;
    bad_level.ci_level = 1.0;
    let error = BootstrapBatch::prepare(scores, covars, &bad_level).err().unwrap();
    assert!(
        error
            .to_string()
            .starts_with("ci_level: must lie strictly between 0 and 1"),
        "{error}"
    );
}

#[test]
fn index_tables_are_the_drawn_rows() {
    let calls = AtomicUsize::new(0);
    let count = || -> std::result::Result<(), StatsError> {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    // 2,100 rows: progress after rows 1,024 and 2,048.
    let plan = PermutationScheme::Block { length: 3 };
    assert_eq!(
        permutation_plan(12, PermutationKind::Block, Some(3), false).unwrap(),
        IndexPlan::Permutation(plan)
    );
    let table = indices(12, 2100, IndexPlan::Permutation(plan), 4, &count).unwrap();
    assert_eq!(calls.swap(0, Ordering::SeqCst), 2);
    let mut row = vec![0usize; 12];
    for index in [0u64, 1, 2099] {
        permutation_into(12, plan, 4, index, &mut row);
        let expected: Vec<i64> = row.iter().map(|&i| i as i64).collect();
        assert_eq!(&table[index as usize * 12..][..12], expected.as_slice());
    }
    let table = indices(
        10,
        5,
        bootstrap_plan(10, BootstrapKind::Iid, None).unwrap(),
        9,
        &count,
    )
    .unwrap();
    assert_eq!(table.len(), 50);
    assert!(table.iter().all(|&i| (0..10).contains(&i)));
    let error = bootstrap_plan(0, BootstrapKind::Iid, None).unwrap_err();
    assert_eq!(error.to_string(), "n: must be at least 1");
    let error = permutation_plan(0, PermutationKind::Block, None, false).unwrap_err();
    assert_eq!(error.to_string(), "n: must be at least 1");
    let error = indices(
        10,
        usize::MAX,
        IndexPlan::Permutation(PermutationScheme::Free),
        0,
        &count,
    )
    .err()
    .unwrap();
    assert!(error.to_string().starts_with("n_perm: a table of"), "{error}");
}
