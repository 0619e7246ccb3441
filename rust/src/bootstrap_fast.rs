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
    /// Row `start`: the full block of L rows from `start`; row `starts + start`: the cut last block (when
    /// L does not divide n).
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
        // The cut last blocks only when L does not divide n.
        let kinds = if n % length == 0 { 1 } else { 2 };
        let mut values = vec![0.0; kinds * starts * entries];
        for (kind, len) in [(0, length), (1, n % length)].into_iter().take(kinds) {
            for start in 0..starts {
                let out = &mut values[(kind * starts + start) * entries..][..entries];
                for j in 0..len {
                    let i = if circular { (start + j) % n } else { start + j };
                    let row = &run.rows[i * run.stride..][..width];
                    let (products, sums) = out.split_at_mut(triangle);
                    let mut rest = products;
                    for (a, &left) in row.iter().enumerate() {
                        // Row a of the upper triangle: (a, a) to (a, width − 1).
                        let (line, tail) = rest.split_at_mut(width - a);
                        for (total, &right) in line.iter_mut().zip(&row[a..]) {
                            *total += left * right;
                        }
                        rest = tail;
                    }
                    for (total, v) in sums.iter_mut().zip(row) {
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
    /// Covariance matrix, its upper triangle packed as the moments are.
    cov: Vec<f64>,
    /// Cholesky factor of S_zz, k × k row-major.
    chol: Vec<f64>,
    /// (L⁻¹ S_zx)ᵀ, m × k row-major.
    w: Vec<f64>,
    /// 1 / √ of the partial variances.
    scale: Vec<f64>,
    /// Column means of the resample.
    means: Vec<f64>,
    /// Where row a of a packed upper triangle starts: (a, b), a ≤ b, sits at `start[a] + b`.
    start: Vec<usize>,
}

impl Scratch {
    fn new(run: &FastBootstrapRun) -> Self {
        let width = run.m + run.k;
        Scratch {
            cov: vec![0.0; width * (width + 1) / 2],
            chol: vec![0.0; run.k * run.k],
            w: vec![0.0; run.k * run.m],
            scale: vec![0.0; run.m],
            means: vec![0.0; width],
            start: (0..width).map(|a| a * width - a * (a + 1) / 2).collect(),
        }
    }
}

/// Pair correlations (a < b, row-major) of one resample into `out` from its moments `packed` — the upper
/// triangle of Σ d_a d_b (a ≤ b, row-major), then Σ d_a, over its rows: a block table row's layout — or
/// `false` when the moment form cannot be trusted for it (see the module documentation).
///
/// `K` is the number of covariates when it is known at compile time (the loops over them then unroll: a
/// third less time for one covariate), 0 when it is read from the run.
fn from_moments<const K: usize>(
    run: &FastBootstrapRun,
    packed: &[f64],
    work: &mut Scratch,
    out: &mut [f64],
) -> bool {
    let (m, k) = (run.m, if K == 0 { run.k } else { K });
    let width = m + k;
    let triangle = width * (width + 1) / 2;
    // Multiplications by 1/n rather than divisions: a replicate is only a few hundred operations, and
    // divisions were a third of them.
    let inverse = 1.0 / run.n as f64;
    let Scratch {
        cov,
        chol,
        w,
        scale,
        means,
        start,
    } = work;
    for (mean, total) in means.iter_mut().zip(&packed[triangle..triangle + width]) {
        *mean = total * inverse;
    }
    for a in 0..width {
        // Row a of the upper triangle, (a, a) to (a, width − 1): every read below is of an entry with a ≤ b.
        let row = start[a] + a..start[a] + width;
        let (mean, diagonal) = (means[a], row.start);
        for ((c, p), other) in cov[row.clone()].iter_mut().zip(&packed[row]).zip(&means[a..]) {
            *c = p * inverse - mean * other;
        }
        if cov[diagonal] <= MIN_VARIANCE_FRACTION * run.variance[a] {
            return false;
        }
    }
    let cov = |a: usize, b: usize| cov[start[a] + b];
    // Cholesky factor L of S_zz, then W = L⁻¹ S_zx.
    for i in 0..k {
        for j in 0..=i {
            let mut value = cov(m + j, m + i);
            for p in 0..j {
                value -= chol[i * k + p] * chol[j * k + p];
            }
            if i == j {
                if value <= MIN_PIVOT_FRACTION * cov(m + i, m + i) {
                    return false;
                }
                chol[i * k + i] = value.sqrt();
            } else {
                chol[i * k + j] = value / chol[j * k + j];
            }
        }
    }
    if k > 0 {
        for (a, row) in w.chunks_exact_mut(k).enumerate() {
            for i in 0..k {
                let mut value = cov(a, m + i);
                for p in 0..i {
                    value -= chol[i * k + p] * row[p];
                }
                row[i] = value / chol[i * k + i];
            }
        }
    }
    let w = |a: usize| &w[a * k..(a + 1) * k];
    let partial = |a: usize, b: usize| cov(a, b) - w(a).iter().zip(w(b)).map(|(x, y)| x * y).sum::<f64>();
    for (a, value) in scale.iter_mut().enumerate() {
        *value = partial(a, a);
        if *value <= MIN_PARTIAL_FRACTION * cov(a, a) {
            return false;
        }
    }
    // Apart, so that the square roots and divisions run side by side.
    for value in scale.iter_mut() {
        *value = 1.0 / value.sqrt();
    }
    let mut pair = 0;
    for a in 0..m {
        for b in (a + 1)..m {
            out[pair] = (partial(a, b) * scale[a] * scale[b]).clamp(-1.0, 1.0);
            pair += 1;
        }
    }
    true
}

/// One chunk of resamples, drawn once for every run of a group (same n and scheme): the resampled rows and,
/// when the group's runs have block tables, each resample's table rows.
struct Resamples {
    /// The resampled rows, n per resample, one resample after the other.
    rows: Vec<usize>,
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
    // n ≥ 3: the batch checked the degrees of freedom.
    let n = first.scores.nrows();
    let mut rows = vec![0usize; (range.end - range.start) as usize * n];
    for (index, resample) in range.zip(rows.chunks_exact_mut(n)) {
        bootstrap_into(n, first.scheme, seed, index, resample);
    }
    // The block-table rows of each resample, shared by the runs of the group that have tables (all of them
    // share n and the scheme, so the number of starts too).
    let mut table_rows: Vec<u32> = Vec::new();
    let blocks = members.iter().find_map(|&r| fast[r].blocks.as_ref());
    let length = first.scheme.block_length().unwrap_or(n);
    if let Some(tables) = blocks {
        for resample in rows.chunks_exact(n) {
            block_rows(n, length, tables.starts, resample, &mut table_rows);
        }
    }
    Resamples {
        rows,
        table_rows,
        per_resample: n.div_ceil(length),
    }
}

/// The replicates of one run over one chunk of drawn resamples, one row of pair correlations after the
/// other.
fn replicate_run_chunk(run: &BootstrapRun, layout: &FastBootstrapRun, drawn: &Resamples) -> Vec<f64> {
    let (n, m) = (layout.n, layout.m);
    let pairs = m * (m - 1) / 2;
    if pairs == 0 {
        return Vec::new();
    }
    let count = drawn.rows.len() / n;
    let per_resample = drawn.per_resample;
    let mut out = vec![0.0; count * pairs];
    let s = layout.stride;
    let mut products = vec![0.0; s * s];
    let mut sums = vec![0.0; s];
    let width = layout.m + layout.k;
    let triangle = width * (width + 1) / 2;
    let mut packed = vec![
        0.0;
        layout
            .blocks
            .as_ref()
            .map_or(triangle + width, |tables| tables.entries)
    ];
    let mut work = Scratch::new(layout);
    let from_moments = match layout.k {
        1 => from_moments::<1>,
        2 => from_moments::<2>,
        _ => from_moments::<0>,
    };
    let resamples = drawn.rows.chunks_exact(n).zip(out.chunks_exact_mut(pairs));
    for (i, (rows, replicate)) in resamples.enumerate() {
        match &layout.blocks {
            Some(tables) => tables.moments(
                &drawn.table_rows[i * per_resample..(i + 1) * per_resample],
                &mut packed,
            ),
            None => {
                moments(layout, rows, &mut products, &mut sums);
                // The tiles' upper triangle and sums, packed as a block table row is.
                let mut index = 0;
                for a in 0..width {
                    packed[index..index + width - a].copy_from_slice(&products[a * s + a..a * s + width]);
                    index += width - a;
                }
                packed[triangle..triangle + width].copy_from_slice(&sums[..width]);
            }
        }
        if !from_moments(layout, &packed, &mut work, replicate) {
            let exact = pair_correlations(
                &run.scores.gather_rows(rows),
                &run.covar.gather_rows(rows),
                Method::Pearson,
                &run.control,
            );
            match exact {
                Some(values) => replicate.copy_from_slice(&values),
                None => replicate.fill(f64::NAN),
            }
        }
    }
    out
}

/// Replicates `range` of every run, as [`crate::bootstrap::replicates_batch`] with `Method::Pearson`, in
/// pieces: per run, pieces of consecutive replicates in replicate order, each piece one row of pair
/// correlations per replicate, one after the other (NaN rows for degenerate resamples). `fast[i]` is
/// `FastBootstrapRun::new(&runs[i])` (so every run's control is linear).
pub fn replicates_batch_fast(
    runs: &[BootstrapRun],
    fast: &[FastBootstrapRun],
    seed: u64,
    range: Range<u64>,
) -> Vec<Vec<Vec<f64>>> {
    let groups = group_runs(
        runs.iter()
            .map(|run| (run.scores.nrows(), format!("{:?}", run.scheme))),
    );
    let chunks = chunk_ranges(range, CHUNK);
    let mut out: Vec<Vec<Vec<f64>>> = runs.iter().map(|_| Vec::new()).collect();
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
        let replicates: Vec<(usize, Vec<f64>)> = tasks
            .into_par_iter()
            .map(|(r, d)| (r, replicate_run_chunk(&runs[r], &fast[r], d)))
            .collect();
        for (r, piece) in replicates {
            out[r].push(piece);
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
            let (g, e) = (g.concat(), e.concat());
            assert_eq!(g.len(), e.len());
            for (a, b) in g.iter().zip(&e) {
                assert!(
                    a.is_nan() && b.is_nan() || (a - b).abs() < tolerance,
                    "{a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn matches_the_exact_path() {
        // A run without covariates (plain correlations) too.
        let mut free = run(30, 3, 1, 8, BootstrapScheme::MovingBlock { length: 4 });
        free.covar = Mat::zeros(30, 0);
        let runs = vec![
            free,
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
        assert_eq!(tabled, [true, true, true, false, true, true]);
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
        assert!(got[0].concat().chunks_exact(3).any(|row| row[0].is_nan()));
        assert_close(&runs, 0..2000, 1e-10);
    }
}
