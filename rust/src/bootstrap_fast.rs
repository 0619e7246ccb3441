//! Moment-form bootstrap replicates for the Pearson partial correlation: the kernel
//! [`crate::batch`] chooses over [`crate::bootstrap::replicates_batch`] for the linear control.
//!
//! A resample's partial correlations depend on its rows only through the cross-product matrix of
//! [X Z] (scores, then covariates). With the data centred on their full-sample means once, a replicate
//! accumulates Σ_i d_{π(i)} d_{π(i)}ᵀ and Σ_i d_{π(i)} over its n resampled rows in 4 × 8 register tiles
//! (no gathered copy, no allocation), forms the covariance S, the partial covariance
//! S_xx − S_xz S_zz⁻¹ S_zx by a k × k Cholesky factorisation, and r_ab = P_ab / √(P_aa P_bb).
//!
//! The moment form loses accuracy when a resampled column is (nearly) constant or explained by the
//! covariates, or the covariates are (nearly) collinear: those replicates — flagged by a partial variance
//! below 1e-5 of the variance, a variance below 1e-10 of the full-sample one, or a Cholesky pivot below 1e-8
//! of its diagonal — are recomputed by the exact path ([`crate::bootstrap::pair_correlations`]), which also
//! decides whether they are degenerate (NaN). Elsewhere the relative error of P_aa is at most about
//! 1e5 ε, and r agrees with the exact path to ~1e-12.
//! Spearman replicates re-rank every resample and GAM-controlled ones refit the smoother: both keep the
//! exact path.
//!
//! How it is chosen ([`crate::batch::bootstrap_ci_batch`]): when the method is Pearson and every
//! `FastBootstrapRun::new(&run)` is `Some`, [`replicates_batch_fast`] serves every slice instead of
//! `replicates_batch`; the output has the same shape and order.

use std::ops::Range;

use rayon::prelude::*;

use crate::bootstrap::{pair_correlations, BootstrapRun};
use crate::fast_kernel::{
    add_table_rows, chunk_ranges, group_runs, lanes, outer_add, with_avx2, SUM_TAIL, TILE_A, TILE_B,
};
use crate::method::Method;
use crate::rng::{bootstrap_into, BootstrapScheme};

const CHUNK: u64 = 32;

/// One row of pair correlations per replicate.
type Replicates = Vec<Vec<f64>>;
/// A replicate whose partial variance falls below this fraction of its variance takes the exact path.
const MIN_PARTIAL_FRACTION: f64 = 1e-5;
/// A replicate in which a column's variance falls below this fraction of the full-sample one takes the
/// exact path (it may be constant).
const MIN_VARIANCE_FRACTION: f64 = 1e-10;
/// A Cholesky pivot of S_zz below this fraction of its diagonal sends the replicate to the exact path.
const MIN_PIVOT_FRACTION: f64 = 1e-8;

/// One run's centred data, row-major, for the tiled accumulation.
pub struct FastBootstrapRun {
    n: usize,
    m: usize,
    k: usize,
    /// m + k rounded up to a multiple of [`TILE_B`].
    stride: usize,
    /// Row-major n × stride: x_0 … x_{m−1}, z_0 … z_{k−1} at row i, centred, zero-padded.
    rows: Vec<f64>,
    /// Full-sample variance of each column (the scale of the thresholds).
    variance: Vec<f64>,
    /// Moments of every possible block, for the moving- and circular-block schemes when they are small.
    blocks: Option<MomentTables>,
}

impl FastBootstrapRun {
    /// The centred row-major layout of a run; `None` unless its control is linear (the moment form is
    /// least squares on [1, covar]).
    pub fn new(run: &BootstrapRun) -> Option<Self> {
        if !matches!(run.control, crate::control::Control::Linear) {
            return None;
        }
        let (n, m, k) = (run.scores.nrows(), run.scores.ncols(), run.covar.ncols());
        let width = m + k;
        let stride = width.div_ceil(TILE_B) * TILE_B;
        let mut rows = vec![0.0; n * stride];
        let mut variance = vec![0.0; width];
        for c in 0..width {
            let column = if c < m {
                run.scores.col(c)
            } else {
                run.covar.col(c - m)
            };
            let centre = crate::matrix::mean(column);
            for (i, v) in column.iter().enumerate() {
                rows[i * stride + c] = v - centre;
            }
            variance[c] = column.iter().map(|v| (v - centre) * (v - centre)).sum::<f64>() / n as f64;
        }
        let mut fast = FastBootstrapRun {
            n,
            m,
            k,
            stride,
            rows,
            variance,
            blocks: None,
        };
        fast.blocks = MomentTables::new(&fast, run.scheme);
        Some(fast)
    }
}

/// Largest block tables used, in f64 values per run (2 MiB).
const MAX_TABLE_VALUES: usize = 1 << 18;
/// A block bootstrap resample is ⌈n/L⌉ blocks of consecutive rows (the last one cut to n mod L rows when
/// L does not divide n), so its moments are sums of per-block moments. The tables hold, for every possible
/// block start, the block's upper-triangle cross products and column sums: a replicate then costs ⌈n/L⌉ row
/// additions instead of n outer products.
struct MomentTables {
    /// Possible block starts: n − L + 1 (moving blocks) or n (circular blocks, which wrap around).
    starts: usize,
    /// Values per row: the w(w + 1)/2 upper-triangle cross products (row-major, w = m + k), then the w column
    /// sums, padded to a multiple of [`SUM_TAIL`].
    entries: usize,
    /// Row `start`: the full block of L rows from `start`; row `starts + start`: the cut last block.
    values: Vec<f64>,
}

impl MomentTables {
    fn new(run: &FastBootstrapRun, scheme: BootstrapScheme) -> Option<Self> {
        let n = run.n;
        let (length, circular) = match scheme {
            BootstrapScheme::MovingBlock { length } => (length, false),
            BootstrapScheme::CircularBlock { length } => (length, true),
            BootstrapScheme::Iid => return None,
        };
        let width = run.m + run.k;
        let triangle = width * (width + 1) / 2;
        let entries = (triangle + width).div_ceil(SUM_TAIL) * SUM_TAIL;
        let starts = if circular { n } else { n - length + 1 };
        if length < 2 || 2 * starts * entries > MAX_TABLE_VALUES {
            return None;
        }
        let mut values = vec![0.0; 2 * starts * entries];
        for (kind, len) in [(0, length), (1, n % length)] {
            for start in 0..starts {
                let out = &mut values[(kind * starts + start) * entries..][..entries];
                for j in 0..len {
                    let i = if circular { (start + j) % n } else { start + j };
                    let row = &run.rows[i * run.stride..][..width];
                    let mut index = 0;
                    for a in 0..width {
                        for b in a..width {
                            out[index] += row[a] * row[b];
                            index += 1;
                        }
                    }
                    for (total, v) in out[triangle..triangle + width].iter_mut().zip(row) {
                        *total += v;
                    }
                }
            }
        }
        Some(MomentTables {
            starts,
            entries,
            values,
        })
    }

    /// The summed table rows `table_rows` of a resample into `packed` (a table row's layout: the upper
    /// triangle of cross products, then the column sums).
    fn moments(&self, table_rows: &[u32], packed: &mut [f64]) {
        packed.fill(0.0);
        add_table_rows(&self.values, table_rows, self.entries, packed);
    }
}

/// The table row each block of the block resample `rows` reads: ⌈n/L⌉ blocks starting at positions
/// 0, L, 2L, …, the last cut to n mod L rows when L does not divide n.
fn block_rows(n: usize, length: usize, starts: usize, rows: &[usize], out: &mut Vec<u32>) {
    for position in (0..n).step_by(length) {
        let cut = usize::from(n - position < length);
        out.push((cut * starts + rows[position]) as u32);
    }
}

/// Σ_i d_{rows[i]}[a0..a0+4] ⊗ d_{rows[i]}[b0..b0+8].
#[inline(always)]
fn tile(run: &FastBootstrapRun, rows: &[usize], a0: usize, b0: usize) -> [[f64; TILE_B]; TILE_A] {
    let mut acc = [[0.0; TILE_B]; TILE_A];
    for &source in rows {
        let row = &run.rows[source * run.stride..][..run.stride];
        let l: [f64; TILE_A] = lanes(&row[a0..]);
        let g: [f64; TILE_B] = lanes(&row[b0..]);
        outer_add(&mut acc, &l, &g);
    }
    acc
}

/// The cross products (stride × stride, upper tiles filled) and column sums of the resampled rows.
#[inline(always)]
fn moments_generic(run: &FastBootstrapRun, rows: &[usize], products: &mut [f64], sums: &mut [f64]) {
    let s = run.stride;
    for a0 in (0..s).step_by(TILE_A) {
        for b0 in (0..s).step_by(TILE_B) {
            if b0 + TILE_B <= a0 {
                continue;
            }
            let acc = tile(run, rows, a0, b0);
            for (a, values) in acc.iter().enumerate() {
                products[(a0 + a) * s + b0..][..TILE_B].copy_from_slice(values);
            }
        }
    }
    // Column sums, TILE_B columns at a time in registers (summing in memory stalls on store forwarding).
    for (c, out) in sums.chunks_exact_mut(TILE_B).enumerate() {
        let mut acc = [0.0; TILE_B];
        for &source in rows {
            let row: [f64; TILE_B] = lanes(&run.rows[source * s + c * TILE_B..]);
            for j in 0..TILE_B {
                acc[j] += row[j];
            }
        }
        out.copy_from_slice(&acc);
    }
}

with_avx2! {
    fn moments(
        run: &FastBootstrapRun,
        rows: &[usize],
        products: &mut [f64],
        sums: &mut [f64],
    ) => moments_generic;
}

/// Work space of [`from_moments`], allocated once per run and chunk of replicates.
struct Scratch {
    /// Covariance matrix, w × w row-major (upper triangle).
    cov: Vec<f64>,
    /// Cholesky factor of S_zz, k × k row-major.
    chol: Vec<f64>,
    /// L⁻¹ S_zx, k × m row-major.
    w: Vec<f64>,
    /// 1 / √ of the partial variances.
    scale: Vec<f64>,
    /// Column means of the resample.
    means: Vec<f64>,
}

impl Scratch {
    fn new(run: &FastBootstrapRun) -> Self {
        let width = run.m + run.k;
        Scratch {
            cov: vec![0.0; width * width],
            chol: vec![0.0; run.k * run.k],
            w: vec![0.0; run.k * run.m],
            scale: vec![0.0; run.m],
            means: vec![0.0; width],
        }
    }
}

/// Pair correlations (a < b, row-major) of one resample from its moments — `product(a, b)` = Σ d_a d_b for
/// a ≤ b and `sum(a)` = Σ d_a over its rows — or `None` when the moment form cannot be trusted for it (see
/// the module documentation).
#[inline(always)]
fn from_moments(
    run: &FastBootstrapRun,
    product: impl Fn(usize, usize) -> f64,
    sum: impl Fn(usize) -> f64,
    work: &mut Scratch,
) -> Option<Vec<f64>> {
    let (m, k) = (run.m, run.k);
    let width = m + k;
    // Multiplications by 1/n rather than divisions: a replicate is only a few hundred operations, and
    // divisions were a third of them.
    let inverse = 1.0 / run.n as f64;
    let Scratch {
        cov,
        chol,
        w,
        scale,
        means,
    } = work;
    for (a, mean) in means.iter_mut().enumerate() {
        *mean = sum(a) * inverse;
    }
    for a in 0..width {
        for b in a..width {
            // Upper triangle only: every read below is of an entry with a ≤ b.
            cov[a * width + b] = product(a, b) * inverse - means[a] * means[b];
        }
        if cov[a * width + a] <= MIN_VARIANCE_FRACTION * run.variance[a] {
            return None;
        }
    }
    let cov = |a: usize, b: usize| cov[a * width + b];
    // Cholesky factor L of S_zz, then W = L⁻¹ S_zx.
    for i in 0..k {
        for j in 0..=i {
            let mut value = cov(m + j, m + i);
            for p in 0..j {
                value -= chol[i * k + p] * chol[j * k + p];
            }
            if i == j {
                if value <= MIN_PIVOT_FRACTION * cov(m + i, m + i) {
                    return None;
                }
                chol[i * k + i] = value.sqrt();
            } else {
                chol[i * k + j] = value / chol[j * k + j];
            }
        }
    }
    for a in 0..m {
        for i in 0..k {
            let mut value = cov(a, m + i);
            for p in 0..i {
                value -= chol[i * k + p] * w[p * m + a];
            }
            w[i * m + a] = value / chol[i * k + i];
        }
    }
    let partial = |a: usize, b: usize| cov(a, b) - (0..k).map(|i| w[i * m + a] * w[i * m + b]).sum::<f64>();
    for (a, value) in scale.iter_mut().enumerate() {
        let p = partial(a, a);
        if p <= MIN_PARTIAL_FRACTION * cov(a, a) {
            return None;
        }
        *value = 1.0 / p.sqrt();
    }
    let mut out = Vec::with_capacity(m * (m - 1) / 2);
    for a in 0..m {
        for b in (a + 1)..m {
            out.push((partial(a, b) * scale[a] * scale[b]).clamp(-1.0, 1.0));
        }
    }
    Some(out)
}

/// One chunk of resamples, drawn once for every run of a group (same n and scheme): the resampled rows and,
/// when the group's runs have block tables, each resample's table rows.
struct Resamples {
    rows: Vec<Vec<usize>>,
    table_rows: Vec<u32>,
    /// Table rows per resample, ⌈n/L⌉.
    per_resample: usize,
}

fn draw_chunk(
    runs: &[BootstrapRun],
    fast: &[FastBootstrapRun],
    members: &[usize],
    seed: u64,
    range: Range<u64>,
) -> Resamples {
    let first = &runs[members[0]];
    let n = first.scores.nrows();
    let mut resamples = Vec::with_capacity((range.end - range.start) as usize);
    let mut rows = vec![0usize; n];
    for index in range {
        bootstrap_into(n, first.scheme, seed, index, &mut rows);
        resamples.push(rows.clone());
    }
    // The block-table rows of each resample, shared by the runs of the group that have tables (all of them
    // share n and the scheme, so the number of starts too).
    let mut table_rows: Vec<u32> = Vec::new();
    let blocks = members.iter().find_map(|&r| fast[r].blocks.as_ref());
    let length = first.scheme.block_length().unwrap_or(n);
    if let Some(tables) = blocks {
        for rows in &resamples {
            block_rows(n, length, tables.starts, rows, &mut table_rows);
        }
    }
    Resamples {
        rows: resamples,
        table_rows,
        per_resample: n.div_ceil(length),
    }
}

/// The replicates of one run over one chunk of drawn resamples.
fn replicate_run_chunk(run: &BootstrapRun, layout: &FastBootstrapRun, drawn: &Resamples) -> Replicates {
    let Resamples {
        rows: resamples,
        table_rows,
        per_resample,
    } = drawn;
    let per_resample = *per_resample;
    let m = run.scores.ncols();
    let mut products = vec![0.0; layout.stride * layout.stride];
    let mut sums = vec![0.0; layout.stride];
    let mut packed = vec![0.0; layout.blocks.as_ref().map_or(0, |tables| tables.entries)];
    let width = layout.m + layout.k;
    let triangle = width * (width + 1) / 2;
    // Where row a of the upper triangle starts in a table row: (a, b) sits at start[a] + b.
    let start: Vec<usize> = (0..width).map(|a| a * width - a * (a + 1) / 2).collect();
    let mut work = Scratch::new(layout);
    resamples
        .iter()
        .enumerate()
        .map(|(i, rows)| {
            let replicate = match &layout.blocks {
                Some(tables) => {
                    tables.moments(&table_rows[i * per_resample..(i + 1) * per_resample], &mut packed);
                    from_moments(
                        layout,
                        |a, b| packed[start[a] + b],
                        |a| packed[triangle + a],
                        &mut work,
                    )
                }
                None => {
                    moments(layout, rows, &mut products, &mut sums);
                    let s = layout.stride;
                    from_moments(layout, |a, b| products[a * s + b], |a| sums[a], &mut work)
                }
            };
            replicate.unwrap_or_else(|| {
                pair_correlations(
                    &run.scores.gather_rows(rows),
                    &run.covar.gather_rows(rows),
                    Method::Pearson,
                    &run.control,
                )
                .unwrap_or_else(|| vec![f64::NAN; m * (m - 1) / 2])
            })
        })
        .collect()
}

/// Replicates `range` of every run, as [`crate::bootstrap::replicates_batch`] with `Method::Pearson`:
/// one row of pair correlations per replicate, in replicate order, NaN rows for degenerate resamples.
/// `fast[i]` is `FastBootstrapRun::new(&runs[i])` (so every run's control is linear).
pub fn replicates_batch_fast(
    runs: &[BootstrapRun],
    fast: &[FastBootstrapRun],
    seed: u64,
    range: Range<u64>,
) -> Vec<Replicates> {
    let groups = group_runs(
        runs.iter()
            .map(|run| (run.scores.nrows(), format!("{:?}", run.scheme))),
    );
    let chunks = chunk_ranges(range, CHUNK);
    let mut out: Vec<Replicates> = runs.iter().map(|_| Vec::new()).collect();
    for members in &groups {
        let drawn: Vec<Resamples> = chunks
            .par_iter()
            .map(|chunk| draw_chunk(runs, fast, members, seed, chunk.clone()))
            .collect();
        // Run-major tasks: a thread takes consecutive chunks of the same run, so that run's moment tables stay
        // in its cache instead of every table being streamed again for every chunk. `collect` on an indexed
        // parallel iterator keeps task order, so each run's replicates stay in index order.
        let tasks: Vec<(usize, &Resamples)> = members
            .iter()
            .flat_map(|&r| drawn.iter().map(move |d| (r, d)))
            .collect();
        let replicates: Vec<(usize, Replicates)> = tasks
            .into_par_iter()
            .map(|(r, d)| (r, replicate_run_chunk(&runs[r], &fast[r], d)))
            .collect();
        for (r, rows) in replicates {
            out[r].extend(rows);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::replicates_batch;
    use crate::matrix::Mat;
    use crate::rng::Xoshiro256pp;

    fn run(n: usize, m: usize, k: usize, seed: u64, scheme: BootstrapScheme) -> BootstrapRun {
        let mut rng = Xoshiro256pp::seed_from_u64(seed);
        let covar = Mat::from_col_major(n, k, (0..n * k).map(|_| rng.next_normal() + 5.0).collect()).unwrap();
        let mut data = Vec::with_capacity(n * m);
        for j in 0..m {
            for i in 0..n {
                data.push(0.9 * covar.get(i, j % k) + 0.3 * rng.next_normal() + 100.0);
            }
        }
        BootstrapRun {
            scores: Mat::from_col_major(n, m, data).unwrap(),
            covar,
            scheme,
            control: crate::control::Control::Linear,
        }
    }

    fn assert_close(runs: &[BootstrapRun], range: Range<u64>, tolerance: f64) {
        let fast: Vec<FastBootstrapRun> = runs.iter().map(|r| FastBootstrapRun::new(r).unwrap()).collect();
        let expected = replicates_batch(runs, Method::Pearson, 11, range.clone());
        let got = replicates_batch_fast(runs, &fast, 11, range);
        assert_eq!(got.len(), expected.len());
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g.len(), e.len());
            for (gr, er) in g.iter().zip(e) {
                for (a, b) in gr.iter().zip(er) {
                    assert!(
                        a.is_nan() && b.is_nan() || (a - b).abs() < tolerance,
                        "{a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn matches_the_exact_path() {
        let runs = vec![
            run(100, 7, 1, 1, BootstrapScheme::MovingBlock { length: 5 }),
            run(100, 7, 1, 2, BootstrapScheme::MovingBlock { length: 5 }),
            run(40, 9, 3, 3, BootstrapScheme::Iid),
            run(30, 2, 2, 4, BootstrapScheme::CircularBlock { length: 4 }),
            run(37, 4, 1, 7, BootstrapScheme::MovingBlock { length: 5 }),
        ];
        // Block schemes use the block tables (the last two cut their last block), iid the tiled sums.
        let tabled: Vec<bool> = runs
            .iter()
            .map(|r| FastBootstrapRun::new(r).unwrap().blocks.is_some())
            .collect();
        assert_eq!(tabled, [true, true, false, true, true]);
        assert_close(&runs, 0..300, 1e-12);
    }

    #[test]
    fn only_the_linear_control_has_a_moment_form() {
        let mut gam = run(30, 2, 1, 6, BootstrapScheme::Iid);
        gam.control = crate::control::Control::Gam(crate::gam::GamOptions::default());
        assert!(FastBootstrapRun::new(&gam).is_none());
    }

    #[test]
    fn degenerate_resamples_take_the_exact_path() {
        // n = 6 with iid resampling: some resamples repeat one row or leave the covariate constant; others
        // have two or three distinct rows, |r| within 1e-11 of 1, where the two forms agree to ~1e-12.
        let runs = vec![run(6, 3, 1, 5, BootstrapScheme::Iid)];
        let fast: Vec<FastBootstrapRun> = runs.iter().map(|r| FastBootstrapRun::new(r).unwrap()).collect();
        let got = replicates_batch_fast(&runs, &fast, 1, 0..2000);
        assert!(got[0].iter().any(|row| row[0].is_nan()));
        assert_close(&runs, 0..2000, 1e-10);
    }
}
