//! Inference over a batch of runs: what the binding layer asks for and nothing Python-specific.
//!
//! [`permutation_test_batch`] and [`bootstrap_ci_batch`] validate the request, prepare every run, choose the
//! kernel (the GEMM-form [`crate::permutation_fast`] / moment-form [`crate::bootstrap_fast`] kernels for the
//! linear control and Pearson, the reference kernels otherwise), build the rayon pool once, and resample in
//! slices of [`SLICE`] ([`FAST_SLICE`] permutations on the GEMM-form kernel) between which they call
//! `progress`: the binding fills it with Python's signal check so that Ctrl-C stops a long call, and a cargo
//! test or bench with `&|| Ok(())`. The bootstrap then takes the BCa jackknife (one run at a time,
//! `progress` between runs) and the intervals.
//!
//! `progress` is always called on the caller's thread (the pool only runs the slices), which is where
//! Python's signal check works. Results do not depend on the number of threads.

use std::ops::Range;

use crate::bootstrap::{jackknife, replicates_batch, run_intervals, BootstrapRun, IntervalMethod};
use crate::bootstrap_fast::{replicates_batch_fast, FastBootstrapRun};
use crate::bounds::{check_array, check_resamples, check_threads, try_filled, try_with_capacity};
use crate::control::Control;
use crate::error::{Result, StatsError};
use crate::gam::{GamFit, GamOptions, GamSmoother};
use crate::matrix::Mat;
use crate::method::Method;
use crate::pcor::{self, CorrMatrices};
use crate::permutation::{count_exceedances_batch, p_values, ExceedanceCounts, PreparedRun};
use crate::permutation_fast::{count_exceedances_batch_fast, prepare_fast, FastRun};
use crate::rng::{
    bootstrap_into, permutation_into, BootstrapKind, BootstrapScheme, PermutationKind, PermutationScheme,
};

/// Permutations or replicates computed between two calls of `progress`.
pub const SLICE: u64 = 1024;

/// Permutations counted between two calls of `progress` by the GEMM-form kernel: four times [`SLICE`], so
/// that a run's block tables, streamed from memory once per slice and task, serve four times as many
/// permutations (W1 takes ~30 ms CPU per such slice).
pub const FAST_SLICE: u64 = 4 * SLICE;

/// Called between slices of work; an `Err` stops the call and is returned as is.
pub type Progress<'a, E> = &'a (dyn Fn() -> std::result::Result<(), E> + Sync);

/// The rayon pool of a call: the global one, or one of `n_threads` threads built once per call.
pub struct Threads(Option<rayon::ThreadPool>);

impl Threads {
    pub fn new(n_threads: Option<usize>) -> Result<Self> {
        let Some(count) = n_threads else {
            return Ok(Threads(None));
        };
        let count = check_threads(count)?;
        rayon::ThreadPoolBuilder::new()
            .num_threads(count)
            .build()
            .map(|pool| Threads(Some(pool)))
            .map_err(|e| StatsError::invalid("n_threads", e.to_string()))
    }

    /// Runs `work` on the pool (its parallel iterators use the pool's threads).
    pub fn run<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        match &self.0 {
            None => work(),
            Some(pool) => pool.install(work),
        }
    }
}

/// The resampling of a batch: `count` permutations or replicates drawn from `seed`, on `threads`.
struct Resampling {
    threads: Threads,
    count: u64,
    seed: u64,
}

impl Resampling {
    /// Checks `count` (`name`, at least `least`) and builds the pool of `request`.
    fn new(name: &str, count: u64, least: u64, request: &ResamplingRequest) -> Result<Self> {
        let count = check_resamples(name, count, least)?;
        let threads = Threads::new(request.n_threads)?;
        Ok(Resampling {
            threads,
            count,
            seed: request.seed,
        })
    }

    /// Runs `work(seed, range)` on the pool for consecutive ranges of `slice` resamples, hands each result to
    /// `take` and calls `progress` after each.
    fn in_slices<T: Send, E>(
        &self,
        slice: u64,
        work: impl Fn(u64, Range<u64>) -> T + Sync,
        mut take: impl FnMut(T),
        progress: Progress<'_, E>,
    ) -> std::result::Result<(), E> {
        let mut start = 0;
        while start < self.count {
            let end = (start + slice).min(self.count);
            take(self.threads.run(|| work(self.seed, start..end)));
            progress()?;
            start = end;
        }
        Ok(())
    }
}

/// Pairs each run's scores with its covariates, or says how many of each there are.
fn pair_runs(scores: Vec<Mat>, covars: Vec<Mat>) -> Result<Vec<(Mat, Mat)>> {
    let (given, runs) = (covars.len(), scores.len());
    if given != runs {
        let message = format!("{given} covariate matrices for {runs} runs of scores");
        return Err(StatsError::invalid("covar", message));
    }
    Ok(scores.into_iter().zip(covars).collect())
}

/// Which kernel serves a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// GEMM-form permutations / moment-form bootstrap: linear control (and Pearson for the bootstrap).
    Fast,
    /// The reference kernels: any control and method.
    Exact,
}

/// What the two kinds of batch share: `kernel()` and `exact()` of a prepared batch, which holds its fast
/// kernel's layouts in `fast` (`None`: the reference kernels serve it), and the entry point that prepares
/// a batch and runs it.
macro_rules! batch_api {
    ($($(#[$meta:meta])* $batch:ident: $entry:ident($request:ty) -> $outcome:ty;)*) => {$(
        impl $batch {
            /// The kernel that serves the batch.
            pub fn kernel(&self) -> Kernel {
                if self.fast.is_some() {
                    Kernel::Fast
                } else {
                    Kernel::Exact
                }
            }

            /// The same batch on the reference kernel, whatever the control (for checks and benches).
            pub fn exact(mut self) -> Self {
                self.fast = None;
                self
            }
        }

        $(#[$meta])*
        pub fn $entry<E: From<StatsError>>(
            scores: Vec<Mat>,
            covars: Vec<Mat>,
            request: &$request,
            progress: Progress<'_, E>,
        ) -> std::result::Result<Vec<$outcome>, E> {
            $batch::prepare(scores, covars, request)?.run(progress)
        }
    )*};
}

batch_api! {
    /// Freedman–Lane permutation tests of every run: [`PermutationBatch::prepare`], then
    /// [`PermutationBatch::run`].
    PermutationBatch: permutation_test_batch(PermutationRequest) -> PermutationOutcome;
    /// Bootstrap intervals of every run: [`BootstrapBatch::prepare`], then [`BootstrapBatch::run`].
    BootstrapBatch: bootstrap_ci_batch(BootstrapRequest) -> BootstrapOutcome;
}

/// ppcor's partial correlation matrices of every run, in parallel over runs; an error names its run when
/// there are several.
pub fn partial_corr_matrix_batch(
    scores: Vec<Mat>,
    covars: Vec<Mat>,
    method: Method,
    control: &Control,
    n_threads: Option<usize>,
) -> Result<Vec<CorrMatrices>> {
    use rayon::prelude::*;
    let runs = pair_runs(scores, covars)?;
    let count = runs.len();
    let threads = Threads::new(n_threads)?;
    let results: Vec<Result<CorrMatrices>> = threads.run(|| {
        runs.par_iter()
            .enumerate()
            .map(|(i, (s, c))| {
                pcor::partial_corr_matrix_with(s, c, method, control).map_err(|e| e.in_run(i, count))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// What the permutation tests and the bootstrap of a batch are both asked: the partial correlations'
/// method and control, the resampling scheme's block length (None: the default of each run's n) and seed,
/// and the threads (None: rayon's global pool).
#[derive(Debug, Clone)]
pub struct ResamplingRequest {
    pub method: Method,
    pub control: Control,
    pub block_length: Option<usize>,
    pub seed: u64,
    pub n_threads: Option<usize>,
}

/// What a permutation test of a batch is asked to do: `n_perm` permutations by `scheme` (circular ones
/// mirrored with `mirror`).
#[derive(Debug, Clone)]
pub struct PermutationRequest {
    pub resampling: ResamplingRequest,
    pub scheme: PermutationKind,
    pub n_perm: u64,
    pub mirror: bool,
}

/// One run's permutation test: the observed partial correlations and the two-sided p-values, pairwise and
/// family-wise (max-|r|), m × m.
#[derive(Debug, Clone, PartialEq)]
pub struct PermutationOutcome {
    pub r: Mat,
    pub p_value: Mat,
    pub p_fwer: Mat,
    /// The block length used (block scheme only).
    pub block_length: Option<usize>,
}

/// A validated and prepared permutation test of a batch of runs.
pub struct PermutationBatch {
    prepared: Vec<PreparedRun>,
    fast: Option<Vec<FastRun>>,
    resampling: Resampling,
}

impl PermutationBatch {
    /// Checks the request and prepares every run (residuals, and the tiled layout when the control is
    /// linear); an error names its run when there are several.
    pub fn prepare(scores: Vec<Mat>, covars: Vec<Mat>, request: &PermutationRequest) -> Result<Self> {
        let shared = &request.resampling;
        let resampling = Resampling::new("n_perm", request.n_perm, 1, shared)?;
        let runs = pair_runs(scores, covars)?;
        let count = runs.len();
        let mut prepared = Vec::with_capacity(count);
        for (i, (s, c)) in runs.iter().enumerate() {
            let n = s.nrows();
            let plan = PermutationScheme::new(request.scheme, shared.block_length, request.mirror, n)
                .map_err(|e| e.in_run(i, count))?;
            pcor::check_degrees_of_freedom(n, c.ncols()).map_err(|e| e.in_run(i, count))?;
            prepared.push(
                PreparedRun::new(s, c, shared.method, &shared.control, plan)
                    .map_err(|e| e.in_run(i, count))?,
            );
        }
        let fast = prepare_fast(&prepared);
        Ok(PermutationBatch {
            prepared,
            fast,
            resampling,
        })
    }

    /// Counts the permutations in slices, calling `progress` after each, and turns the counts into p-values.
    pub fn run<E: From<StatsError>>(
        self,
        progress: Progress<'_, E>,
    ) -> std::result::Result<Vec<PermutationOutcome>, E> {
        let mut totals: Vec<ExceedanceCounts> = Vec::new();
        let slice = if self.fast.is_some() { FAST_SLICE } else { SLICE };
        let count = |seed, range| match &self.fast {
            Some(fast) => count_exceedances_batch_fast(fast, seed, range),
            None => count_exceedances_batch(&self.prepared, seed, range),
        };
        let add = |part: Vec<ExceedanceCounts>| {
            if totals.is_empty() {
                totals = part;
            } else {
                for (total, counts) in totals.iter_mut().zip(&part) {
                    total.merge(counts);
                }
            }
        };
        self.resampling.in_slices(slice, count, add, progress)?;
        Ok(self
            .prepared
            .iter()
            .zip(&totals)
            .map(|(run, counts)| {
                let (p_value, p_fwer) = p_values(counts, run.m);
                PermutationOutcome {
                    r: run.r.clone(),
                    p_value,
                    p_fwer,
                    block_length: run.scheme.block_length(),
                }
            })
            .collect())
    }
}

/// What a bootstrap of a batch is asked to do: `n_boot` replicates by `scheme`, and intervals of `ci_level`
/// by `ci_method`.
#[derive(Debug, Clone)]
pub struct BootstrapRequest {
    pub resampling: ResamplingRequest,
    pub scheme: BootstrapKind,
    pub n_boot: u64,
    pub ci_level: f64,
    pub ci_method: IntervalMethod,
}

/// One run's bootstrap intervals, m × m: the observed partial correlations, the bounds (unit diagonal) and
/// the number of valid (non-degenerate) replicates behind each pair.
#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapOutcome {
    pub r: Mat,
    pub ci_low: Mat,
    pub ci_high: Mat,
    pub n_valid: Mat,
    /// The block length used (block schemes only).
    pub block_length: Option<usize>,
}

/// A validated and prepared bootstrap of a batch of runs.
pub struct BootstrapBatch {
    runs: Vec<BootstrapRun>,
    observed: Vec<Mat>,
    fast: Option<Vec<FastBootstrapRun>>,
    resampling: Resampling,
    method: Method,
    ci_level: f64,
    ci_method: IntervalMethod,
}

impl BootstrapBatch {
    /// Checks the request (the kept replicates' memory included) and computes every run's observed
    /// estimates with the point estimate's full checks; an error names its run when there are several.
    pub fn prepare(scores: Vec<Mat>, covars: Vec<Mat>, request: &BootstrapRequest) -> Result<Self> {
        let shared = &request.resampling;
        let resampling = Resampling::new("n_boot", request.n_boot, 2, shared)?;
        let n_boot = resampling.count;
        let ci_level = request.ci_level;
        if !(ci_level > 0.0 && ci_level < 1.0) {
            return Err(StatsError::invalid(
                "ci_level",
                format!("must lie strictly between 0 and 1, got {ci_level}"),
            ));
        }
        let pairs_of_runs = pair_runs(scores, covars)?;
        // Every replicate of every pair is kept until the intervals are taken: bound that before resampling.
        let pairs: usize = pairs_of_runs
            .iter()
            .map(|(s, _)| s.ncols() * s.ncols().saturating_sub(1) / 2 + 3)
            .sum();
        check_array(
            "n_boot",
            &[n_boot as usize, pairs],
            8,
            "keeping the bootstrap replicates",
        )?;
        let count = pairs_of_runs.len();
        let mut runs = Vec::with_capacity(count);
        let mut observed = Vec::with_capacity(count);
        for (i, (s, c)) in pairs_of_runs.into_iter().enumerate() {
            let n = s.nrows();
            pcor::check_degrees_of_freedom(n, c.ncols()).map_err(|e| e.in_run(i, count))?;
            let plan = BootstrapScheme::new(request.scheme, shared.block_length, n)
                .map_err(|e| e.in_run(i, count))?;
            let estimate = pcor::partial_corr_matrix_with(&s, &c, shared.method, &shared.control)
                .map_err(|e| e.in_run(i, count))?;
            observed.push(estimate.estimate);
            runs.push(BootstrapRun {
                scores: s,
                covar: c,
                scheme: plan,
                control: shared.control,
            });
        }
        let fast = if shared.method == Method::Pearson {
            runs.iter().map(FastBootstrapRun::new).collect()
        } else {
            None
        };
        Ok(BootstrapBatch {
            runs,
            observed,
            fast,
            resampling,
            method: shared.method,
            ci_level,
            ci_method: request.ci_method,
        })
    }

    /// Draws the replicates in slices and, for BCa, the leave-one-checkpoint-out fits run by run (n refits
    /// per run, GAM ones included), calling `progress` after each; then the intervals.
    pub fn run<E: From<StatsError>>(
        self,
        progress: Progress<'_, E>,
    ) -> std::result::Result<Vec<BootstrapOutcome>, E> {
        // Per run, pieces of consecutive replicates: one replicate each (reference kernel) or a chunk of them.
        let mut collected: Vec<Vec<Vec<f64>>> = self.runs.iter().map(|_| Vec::new()).collect();
        let draw = |seed, range| match &self.fast {
            Some(fast) => replicates_batch_fast(&self.runs, fast, seed, range),
            None => replicates_batch(&self.runs, self.method, seed, range),
        };
        let keep = |slice: Vec<Vec<Vec<f64>>>| {
            for (all, part) in collected.iter_mut().zip(slice) {
                all.extend(part);
            }
        };
        self.resampling.in_slices(SLICE, draw, keep, progress)?;
        let threads = &self.resampling.threads;
        let mut jackknives: Vec<Option<Vec<Vec<f64>>>> = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            if self.ci_method != IntervalMethod::Bca {
                jackknives.push(None);
                continue;
            }
            let jack = threads.run(|| jackknife(&run.scores, &run.covar, self.method, &run.control));
            jackknives.push(Some(jack));
            progress()?;
        }
        let intervals: Vec<(Mat, Mat, Mat)> = threads.run(|| {
            collected
                .iter()
                .zip(self.observed.iter().zip(&jackknives))
                .map(|(reps, (estimate, jack))| {
                    let count = self.resampling.count as usize;
                    run_intervals(
                        reps,
                        count,
                        estimate,
                        jack.as_deref(),
                        self.ci_level,
                        self.ci_method,
                    )
                })
                .collect()
        });
        Ok(self
            .runs
            .iter()
            .zip(self.observed)
            .zip(intervals)
            .map(|((run, r), (ci_low, ci_high, n_valid))| BootstrapOutcome {
                r,
                ci_low,
                ci_high,
                n_valid,
                block_length: run.scheme.block_length(),
            })
            .collect())
    }
}

/// A rows × n table of indices (row-major), row `i` filled by `fill(i, row)`; its size is checked before
/// anything is allocated, and `progress` is called after every [`SLICE`] rows.
fn index_table<E: From<StatsError>>(
    name: &str,
    rows: usize,
    n: usize,
    fill: impl Fn(u64, &mut [usize]),
    progress: Progress<'_, E>,
) -> std::result::Result<Vec<i64>, E> {
    // The table plus the row buffer, so that n alone cannot overflow either.
    let total = check_array(
        name,
        &[rows.saturating_add(1), n],
        8,
        &format!("a table of {rows} x {n} indices"),
    )?;
    let mut data: Vec<i64> = try_with_capacity(name, total - n)?;
    let mut row = try_filled(name, n, 0usize)?;
    for index in 0..rows {
        fill(index as u64, &mut row);
        data.extend(row.iter().map(|&i| i as i64));
        if (index as u64 + 1) % SLICE == 0 {
            progress()?;
        }
    }
    Ok(data)
}

/// At least one checkpoint to draw indices of.
fn checkpoints(n: usize) -> Result<usize> {
    if n == 0 {
        return Err(StatsError::invalid("n", "must be at least 1"));
    }
    Ok(n)
}

/// How the rows of an index table are drawn: as the permutation tests or as the bootstrap draw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexPlan {
    Permutation(PermutationScheme),
    Bootstrap(BootstrapScheme),
}

/// The plan of permutations of `n` checkpoints by `scheme` (see [`PermutationScheme::new`]).
pub fn permutation_plan(
    n: usize,
    scheme: PermutationKind,
    block_length: Option<usize>,
    mirror: bool,
) -> Result<IndexPlan> {
    let plan = PermutationScheme::new(scheme, block_length, mirror, checkpoints(n)?)?;
    Ok(IndexPlan::Permutation(plan))
}

/// The plan of bootstrap resamples of `n` checkpoints by `scheme` (see [`BootstrapScheme::new`]).
pub fn bootstrap_plan(n: usize, scheme: BootstrapKind, block_length: Option<usize>) -> Result<IndexPlan> {
    let plan = BootstrapScheme::new(scheme, block_length, checkpoints(n)?)?;
    Ok(IndexPlan::Bootstrap(plan))
}

/// The rows of `rows` permutations (`n_perm`) or bootstrap resamples (`n_boot`) of `n` checkpoints under
/// `plan`, drawn from `seed` as the tests and intervals draw them (`rows` × n, row-major).
pub fn indices<E: From<StatsError>>(
    n: usize,
    rows: usize,
    plan: IndexPlan,
    seed: u64,
    progress: Progress<'_, E>,
) -> std::result::Result<Vec<i64>, E> {
    let name = match plan {
        IndexPlan::Permutation(_) => "n_perm",
        IndexPlan::Bootstrap(_) => "n_boot",
    };
    let fill = |index, row: &mut [usize]| match plan {
        IndexPlan::Permutation(scheme) => permutation_into(n, scheme, seed, index, row),
        IndexPlan::Bootstrap(scheme) => bootstrap_into(n, scheme, seed, index, row),
    };
    index_table(name, rows, n, fill, progress)
}

/// GAM fits of every column of y (n × m), as matrices: see [`gam_fit`].
#[derive(Debug, Clone, PartialEq)]
pub struct GamColumns {
    pub fitted: Mat,
    pub residuals: Mat,
    /// Effective degrees of freedom per column (intercept included).
    pub edf: Vec<f64>,
    /// Smoothing parameter per column and control (m × q).
    pub lambda: Mat,
    /// Criterion at the optimum per column.
    pub score: Vec<f64>,
    /// Basis dimension used per control (lowered where a control has few distinct values).
    pub k_used: Vec<usize>,
    /// Per column, whether the EDF cap raised λ above the criterion's optimum.
    pub capped: Vec<bool>,
    /// The resolved EDF cap (infinite when off).
    pub max_edf: f64,
}

/// GAM control, mgcv's `y ~ s(z_1, k, bs = basis) + … + s(z_q, k, bs = basis)` per column of `y`, with λ
/// chosen per column by GCV or REML, or fixed at `lambda` (one value per control); columns in parallel.
pub fn gam_fit(
    y: &Mat,
    covar: &Mat,
    options: &GamOptions,
    lambda: Option<&[f64]>,
    n_threads: Option<usize>,
) -> Result<GamColumns> {
    use rayon::prelude::*;
    if covar.nrows() != y.nrows() {
        return Err(StatsError::invalid(
            "covar",
            format!("has {} rows but y has {}", covar.nrows(), y.nrows()),
        ));
    }
    let smoother = GamSmoother::new(covar, options, "covar")?;
    let threads = Threads::new(n_threads)?;
    let fits: Vec<GamFit> = threads.run(|| match lambda {
        None => smoother.residualise_columns(y, "y"),
        Some(lambda) => (0..y.ncols())
            .into_par_iter()
            .map(|j| {
                crate::matrix::check_finite(&crate::residualise::column_name("y", j, y.ncols()), y.col(j))?;
                smoother.fit_column_with_lambda(y.col(j), lambda)
            })
            .collect(),
    })?;
    let (n, m, q) = (y.nrows(), y.ncols(), smoother.q());
    let mut fitted = Mat::zeros(n, m);
    let mut residuals = Mat::zeros(n, m);
    let mut lambda = Mat::zeros(m, q);
    for (j, fit) in fits.iter().enumerate() {
        fitted.col_mut(j).copy_from_slice(&fit.fitted);
        residuals.col_mut(j).copy_from_slice(&fit.residuals);
        for (c, value) in fit.lambda.iter().enumerate() {
            lambda.set(j, c, *value);
        }
    }
    Ok(GamColumns {
        fitted,
        residuals,
        edf: fits.iter().map(|f| f.edf).collect(),
        lambda,
        score: fits.iter().map(|f| f.score).collect(),
        k_used: smoother.k_used().to_vec(),
        capped: fits.iter().map(|f| f.capped).collect(),
        max_edf: smoother.max_edf(),
    })
}

#[cfg(test)]
mod tests;
