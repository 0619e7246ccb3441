//! GEMM-form Freedman–Lane counting for the linear control (prototype of a replacement for the inner loop of
//! [`crate::permutation::count_exceedances_batch`]).
//!
//! For a permutation P, every number the count needs is an entry of one small matrix product:
//! with L = [Q E] (n × (k + m): the orthonormal covariate basis, then the unit residuals) and G = P E (the
//! rows of E in permuted order), C = Lᵀ G holds ⟨q_j, P e_b⟩ in its first k rows and ⟨e_a, P e_b⟩ below, so
//! r*_ab = C[k + a, b] / √(1 − Σ_j C[j, b]²) — the same formula as the scalar kernel's projection shortcut.
//!
//! - **Tiled kernel** (any scheme): C is accumulated one row of G at a time in 4 × 8 register tiles, reading
//!   row π(i) of E straight from a row-major copy (no gathered copy is written), 32 rows per pass so that a
//!   pass stays in L1 while every tile reads it; tiles below the diagonal that no pair needs are skipped.
//!   AVX2 is used when the CPU has it (runtime detection; the crate is built for baseline x86-64).
//! - **Block tables** (block scheme, when they fit in 2 MiB per run): P moves whole blocks, so C is a sum of
//!   one precomputed row of block cross products per placed block (`BlockTables`): ⌈n/L⌉ vector additions
//!   instead of n (k + m) m multiply-adds.
//! - Each permutation is drawn once per chunk and serves every run of the same length and scheme; |r*| is
//!   compared with precomputed limits, and the family-wise counts come from each permutation's max |r*|.
//!
//! What differs from the scalar kernel: only the order of the additions in the dot products, so r* agrees to
//! rounding (~1e-16) and the counts are identical (the comparison allows a relative slack of 1e-10; the tests
//! check equality for every scheme). No fused multiply-add is used, so the results are the same bit for bit
//! with and without AVX2, and do not depend on the number of threads.
//!
//! Wiring it in (`py/mod.rs`, `permutation_test_batch`): build `prepare_fast(&prepared)` once, then per slice
//! call [`count_exceedances_batch_fast`] when it is `Some`, else `count_exceedances_batch` as now.

use std::collections::BTreeMap;
use std::ops::Range;

use rayon::prelude::*;

use crate::matrix::Mat;
use crate::permutation::{ExceedanceCounts, PreparedRun, TIE_TOLERANCE};
use crate::rng::{permutation_into, PermutationScheme};

/// Permutations per task: each task draws them once and applies them to every run of its group.
const CHUNK: u64 = 64;
/// Register tile: rows of L (covariate basis and residuals) by columns of G (permuted residuals).
const TILE_A: usize = 4;
const TILE_B: usize = 8;

/// One run laid out for the tiled kernel.
pub struct FastRun {
    n: usize,
    m: usize,
    k: usize,
    /// Row stride of `rows` and of the product: m rounded up to a multiple of [`TILE_B`].
    stride: usize,
    /// Row-major n × stride: row i holds e_0[i] … e_{m−1}[i], zero-padded.
    rows: Vec<f64>,
    /// Row stride of `left`: k + m rounded up to a multiple of [`TILE_A`].
    width: usize,
    /// Row-major n × width: row i holds q_0[i] … q_{k−1}[i], e_0[i] … e_{m−1}[i], zero-padded.
    left: Vec<f64>,
    /// |r_ab| (1 − [`TIE_TOLERANCE`]) for a < b (row-major a·m + b): what a permuted |r*| must reach.
    limit: Vec<f64>,
    scheme: PermutationScheme,
    /// Block cross-product tables, for the block scheme when they are small (see [`BlockTables`]).
    blocks: Option<BlockTables>,
}

impl FastRun {
    /// The tiled layout of a prepared run; `None` unless its control is linear (a projection).
    pub fn from_prepared(run: &PreparedRun) -> Option<Self> {
        let Some(residualiser) = &run.linear else {
            return None;
        };
        let basis: &Mat = residualiser.basis();
        let (n, m, k) = (run.n, run.m, basis.ncols());
        let stride = m.div_ceil(TILE_B) * TILE_B;
        let width = (k + m).div_ceil(TILE_A) * TILE_A;
        let mut rows = vec![0.0; n * stride];
        let mut left = vec![0.0; n * width];
        for i in 0..n {
            for j in 0..k {
                left[i * width + j] = basis.get(i, j);
            }
            for b in 0..m {
                let value = run.unit_residuals.get(i, b);
                rows[i * stride + b] = value;
                left[i * width + k + b] = value;
            }
        }
        let mut limit = vec![0.0; m * m];
        for a in 0..m {
            for b in (a + 1)..m {
                limit[a * m + b] = run.r.get(a, b).abs() * (1.0 - TIE_TOLERANCE);
            }
        }
        let mut fast = FastRun {
            n,
            m,
            k,
            stride,
            rows,
            width,
            left,
            limit,
            scheme: run.scheme,
            blocks: None,
        };
        if let PermutationScheme::Block { length } = run.scheme {
            fast.blocks = BlockTables::new(&fast, length);
        }
        Some(fast)
    }

    /// Whether the tile of L rows `a0..a0 + TILE_A` and G columns `b0..b0 + TILE_B` holds anything needed:
    /// covariate rows pair with every column, residual row a only with columns b > a.
    fn tile_needed(&self, a0: usize, b0: usize) -> bool {
        let b_end = (b0 + TILE_B).min(self.m);
        b0 < self.m && (a0 < self.k || a0 - self.k + 1 < b_end)
    }
}

/// Largest block tables used, in f64 values per run (2 MiB): beyond it the tiled kernel is faster.
const MAX_TABLE_VALUES: usize = 1 << 18;

/// The block scheme moves whole blocks, so ⟨l, P e_b⟩ is a sum over the placed blocks of cross products of a
/// block of L rows (where the block lands) with a block of E rows (where it comes from). With L the block
/// length, n = n_full L + r and blocks placed in the order σ: a full block placed t-th starts at row tL, or at
/// tL − (L − r) once the short last block (length r > 0) has been placed. Tabulating, for every needed
/// entry C[row, b], the cross products for every (slot t, source block s) — aligned, shifted, and the short
/// block at each slot — makes a permutation cost one sum of `blocks` table rows instead of n × (k + m) × m
/// multiply-adds.
struct BlockTables {
    /// Entries per table row: for b = 1 … m − 1, the rows 0 … k + b − 1 of column b, padded to a multiple of
    /// [`SUM_LANES`].
    entries: usize,
    /// Where column b's entries start in a table row.
    offset: Vec<usize>,
    /// Table rows of `entries` values: row (t · full + s) is full block s placed at slot t, aligned (starting
    /// at row tL); row (slots + t) · full + s the same after the short block (starting at tL − (L − r)); row
    /// 2 · slots · full + t the short block placed at slot t.
    values: Vec<f64>,
    /// Blocks per permutation, ⌈n/L⌉.
    slots: usize,
}

impl BlockTables {
    fn new(run: &FastRun, length: usize) -> Option<Self> {
        let (n, m, k) = (run.n, run.m, run.k);
        let (full, short) = (n / length, n % length);
        let slots = full + usize::from(short > 0);
        let mut offset = vec![0; m];
        let mut entries = 0;
        for (b, start) in offset.iter_mut().enumerate().skip(1) {
            *start = entries;
            entries += k + b;
        }
        let entries = entries.div_ceil(SUM_LANES) * SUM_LANES;
        let rows = 2 * slots * full + slots;
        if m < 2 || rows * entries > MAX_TABLE_VALUES {
            return None;
        }
        // Cross products of L rows start.. with E rows source.. over `len` rows, for every entry.
        let cross = |start: usize, source: usize, len: usize, out: &mut [f64]| {
            for b in 1..m {
                for row in 0..k + b {
                    out[offset[b] + row] = (0..len)
                        .map(|j| {
                            run.left[(start + j) * run.width + row] * run.rows[(source + j) * run.stride + b]
                        })
                        .sum();
                }
            }
        };
        let mut values = vec![0.0; rows * entries];
        for t in 0..slots {
            for s in 0..full {
                if (t + 1) * length <= n {
                    let row = (t * full + s) * entries;
                    cross(t * length, s * length, length, &mut values[row..row + entries]);
                }
                if short > 0 && t > 0 {
                    let row = ((slots + t) * full + s) * entries;
                    let start = t * length - (length - short);
                    cross(start, s * length, length, &mut values[row..row + entries]);
                }
            }
            if short > 0 {
                let row = (2 * slots * full + t) * entries;
                cross(t * length, full * length, short, &mut values[row..row + entries]);
            }
        }
        Some(BlockTables {
            entries,
            offset,
            values,
            slots,
        })
    }

    /// C's needed entries for a permutation whose table rows are `rows` (from [`block_rows`]).
    fn sum_into(&self, rows: &[u32], sums: &mut [f64]) {
        add_rows(&self.values, rows, self.entries, sums);
    }
}

/// The table row each placed block of the block permutation `order` reads (the same for every run of n
/// checkpoints and block length `length`): full block s at slot t is row t · full + s, or
/// (slots + t) · full + s after the short block; the short block at slot t is row 2 · slots · full + t.
fn block_rows(n: usize, length: usize, order: &[u32], rows: &mut Vec<u32>) {
    let (full, short) = (n / length, n % length);
    let slots = full + usize::from(short > 0);
    let (mut position, mut after_short, mut t) = (0, false, 0);
    while position < n {
        let source = order[position] as usize / length;
        let row = if source == full {
            after_short = true;
            position += short;
            2 * slots * full + t
        } else {
            position += length;
            (if after_short { slots + t } else { t }) * full + source
        };
        rows.push(row as u32);
        t += 1;
    }
}

/// The first N values of `values` as an array (the callers' strides guarantee there are N); copying them
/// into registers is what the tiles do anyway, and the conversion cannot fail.
#[inline(always)]
fn lanes<const N: usize>(values: &[f64]) -> [f64; N] {
    let mut out = [0.0; N];
    out.copy_from_slice(&values[..N]);
    out
}

/// Entries summed at once, in registers (8 AVX2 accumulators, enough independent additions to hide their
/// latency).
const SUM_LANES: usize = 32;

/// sums[j] = Σ_r values[r · entries + j] over the table rows `rows`, [`SUM_LANES`] entries at a time.
#[inline(always)]
fn add_rows_generic(values: &[f64], rows: &[u32], entries: usize, sums: &mut [f64]) {
    for (c, out) in sums.chunks_exact_mut(SUM_LANES).enumerate() {
        let mut acc = [0.0; SUM_LANES];
        for &r in rows {
            let start = r as usize * entries + c * SUM_LANES;
            let row: [f64; SUM_LANES] = lanes(&values[start..]);
            for j in 0..SUM_LANES {
                acc[j] += row[j];
            }
        }
        out.copy_from_slice(&acc);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_rows_avx2(values: &[f64], rows: &[u32], entries: usize, sums: &mut [f64]) {
    add_rows_generic(values, rows, entries, sums)
}

fn add_rows(values: &[f64], rows: &[u32], entries: usize, sums: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { add_rows_avx2(values, rows, entries, sums) };
    }
    add_rows_generic(values, rows, entries, sums)
}

/// Rows of L and P E taken per pass over the tiles: a pass's rows (≤ 32 × (width + stride) values) stay in
/// L1 while every tile reads them, instead of each tile streaming all n rows from L2.
const ROWS_PER_PASS: usize = 32;

/// acc + Σ_{i in first..first+len} left[i, a0..a0+4] ⊗ rows[order[i], b0..b0+8], `order` holding
/// order[first..first+len]: one register tile of C = Lᵀ P E over one pass of rows.
#[inline(always)]
fn tile(
    run: &FastRun,
    order: &[u32],
    first: usize,
    a0: usize,
    b0: usize,
    mut acc: [[f64; TILE_B]; TILE_A],
) -> [[f64; TILE_B]; TILE_A] {
    for (i, &source) in (first..).zip(order) {
        let l: [f64; TILE_A] = lanes(&run.left[i * run.width + a0..]);
        let start = source as usize * run.stride + b0;
        let g: [f64; TILE_B] = lanes(&run.rows[start..]);
        for a in 0..TILE_A {
            for b in 0..TILE_B {
                acc[a][b] += l[a] * g[b];
            }
        }
    }
    acc
}

/// C = Lᵀ P E into `product` (width × stride, row-major); tiles no pair needs are left untouched. Each
/// entry is still one running sum over i in order, whatever the passes.
#[inline(always)]
fn products_generic(run: &FastRun, order: &[u32], product: &mut [f64]) {
    for (pass, rows) in order.chunks(ROWS_PER_PASS).enumerate() {
        let first = pass * ROWS_PER_PASS;
        for a0 in (0..run.width).step_by(TILE_A) {
            for b0 in (0..run.stride).step_by(TILE_B) {
                if !run.tile_needed(a0, b0) {
                    continue;
                }
                let mut acc = [[0.0; TILE_B]; TILE_A];
                if first > 0 {
                    for (a, values) in acc.iter_mut().enumerate() {
                        values.copy_from_slice(&product[(a0 + a) * run.stride + b0..][..TILE_B]);
                    }
                }
                let acc = tile(run, rows, first, a0, b0, acc);
                for (a, values) in acc.iter().enumerate() {
                    product[(a0 + a) * run.stride + b0..][..TILE_B].copy_from_slice(values);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn products_avx2(run: &FastRun, order: &[u32], product: &mut [f64]) {
    products_generic(run, order, product)
}

fn products(run: &FastRun, order: &[u32], product: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { products_avx2(run, order, product) };
    }
    products_generic(run, order, product)
}

/// Adds one permutation's pairwise exceedances to `counts` and returns its max |r*| over the pairs;
/// `entry(row, b)` is C[row, b] of C = Lᵀ P E.
#[inline(always)]
fn count_one(run: &FastRun, entry: impl Fn(usize, usize) -> f64, counts: &mut ExceedanceCounts) -> f64 {
    let (m, k) = (run.m, run.k);
    let mut largest: f64 = 0.0;
    for b in 1..m {
        let explained: f64 = (0..k).map(|j| entry(j, b).powi(2)).sum();
        let length = (1.0 - explained).max(0.0).sqrt();
        let scale = if length > 0.0 { 1.0 / length } else { 0.0 };
        for a in 0..b {
            let value = (entry(k + a, b) * scale).abs();
            counts.pairwise[a * m + b] += u64::from(value >= run.limit[a * m + b]);
            // Not `f64::max`: value is never NaN, and the plain comparison keeps the chain short.
            if value > largest {
                largest = value;
            }
        }
    }
    counts.permutations += 1;
    largest
}

/// Adds the family-wise exceedances of permutations whose max |r*| are `largest`.
fn count_family_wise(run: &FastRun, largest: &[f64], counts: &mut ExceedanceCounts) {
    let m = run.m;
    for a in 0..m {
        for b in (a + 1)..m {
            let limit = run.limit[a * m + b];
            counts.family_wise[a * m + b] += largest.iter().map(|&v| u64::from(v >= limit)).sum::<u64>();
        }
    }
}

fn zeros(m: usize) -> ExceedanceCounts {
    ExceedanceCounts {
        pairwise: vec![0; m * m],
        family_wise: vec![0; m * m],
        permutations: 0,
    }
}

/// Exceedance counts of permutations `range` for runs `members` (same n and scheme), drawn once.
fn count_chunk(runs: &[FastRun], members: &[usize], seed: u64, range: Range<u64>) -> Vec<ExceedanceCounts> {
    let first = &runs[members[0]];
    let n = first.n;
    let mut order = vec![0usize; n];
    let mut orders: Vec<u32> = Vec::with_capacity((range.end - range.start) as usize * n);
    for index in range {
        permutation_into(n, first.scheme, seed, index, &mut order);
        orders.extend(order.iter().map(|&i| i as u32));
    }
    // The table rows of each permutation, shared by every run of the group that has tables.
    let mut table_rows: Vec<u32> = Vec::new();
    if let PermutationScheme::Block { length } = first.scheme {
        if members.iter().any(|&r| runs[r].blocks.is_some()) {
            for permuted in orders.chunks_exact(n) {
                block_rows(n, length, permuted, &mut table_rows);
            }
        }
    }
    members
        .iter()
        .map(|&r| {
            let run = &runs[r];
            let mut counts = zeros(run.m);
            let mut largest = Vec::with_capacity(orders.len() / n);
            if let Some(tables) = &run.blocks {
                let mut sums = vec![0.0; tables.entries];
                for rows in table_rows.chunks_exact(tables.slots) {
                    tables.sum_into(rows, &mut sums);
                    largest.push(count_one(run, |row, b| sums[tables.offset[b] + row], &mut counts));
                }
            } else {
                let mut product = vec![0.0; run.width * run.stride];
                for permuted in orders.chunks_exact(n) {
                    products(run, permuted, &mut product);
                    largest.push(count_one(
                        run,
                        |row, b| product[row * run.stride + b],
                        &mut counts,
                    ));
                }
            }
            count_family_wise(run, &largest, &mut counts);
            counts
        })
        .collect()
}

/// The tiled layouts of `runs`, or `None` when any run's control is not linear (then the scalar kernel
/// serves the batch). Build once per call and reuse across the slices of permutations.
pub fn prepare_fast(runs: &[PreparedRun]) -> Option<Vec<FastRun>> {
    runs.iter().map(FastRun::from_prepared).collect()
}

/// Exceedance counts for permutations `range` of every run: the same numbers as
/// [`crate::permutation::count_exceedances_batch`], in parallel over chunks of permutations, each drawn once
/// for all the runs that share its length and scheme. The result does not depend on the thread count.
pub fn count_exceedances_batch_fast(runs: &[FastRun], seed: u64, range: Range<u64>) -> Vec<ExceedanceCounts> {
    let mut groups: BTreeMap<(usize, String), Vec<usize>> = BTreeMap::new();
    for (index, run) in runs.iter().enumerate() {
        groups
            .entry((run.n, format!("{:?}", run.scheme)))
            .or_default()
            .push(index);
    }
    let tasks: Vec<(&Vec<usize>, Range<u64>)> = groups
        .values()
        .flat_map(|members| {
            (range.start..range.end)
                .step_by(CHUNK as usize)
                .map(move |start| (members, start..(start + CHUNK).min(range.end)))
        })
        .collect();
    let partial: Vec<(&Vec<usize>, Vec<ExceedanceCounts>)> = tasks
        .into_par_iter()
        .map(|(members, chunk)| (members, count_chunk(runs, members, seed, chunk)))
        .collect();
    let mut totals: Vec<ExceedanceCounts> = runs.iter().map(|run| zeros(run.m)).collect();
    for (members, counts) in &partial {
        for (&r, c) in members.iter().zip(counts) {
            totals[r].merge(c);
        }
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcor::Method;
    use crate::permutation::count_exceedances_batch;
    use crate::rng::Xoshiro256pp;

    fn noise(n: usize, m: usize, seed: u64) -> Mat {
        let mut rng = Xoshiro256pp::seed_from_u64(seed);
        Mat::from_col_major(n, m, (0..n * m).map(|_| rng.next_normal()).collect()).unwrap()
    }

    /// Columns that share a factor with each other and with the covariates, so that counts span 0 … m.
    fn correlated(n: usize, m: usize, k: usize, seed: u64) -> (Mat, Mat) {
        let covar = noise(n, k, seed);
        let shared = noise(n, 1, seed + 1);
        let own = noise(n, m, seed + 2);
        let mut data = Vec::with_capacity(n * m);
        for j in 0..m {
            for i in 0..n {
                let factor = if j % 2 == 0 { 0.8 * shared.get(i, 0) } else { 0.0 };
                data.push(covar.get(i, 0) + factor + own.get(i, j));
            }
        }
        (Mat::from_col_major(n, m, data).unwrap(), covar)
    }

    fn prepared(
        shapes: &[(usize, usize, usize)],
        scheme: PermutationScheme,
        method: Method,
    ) -> Vec<PreparedRun> {
        shapes
            .iter()
            .enumerate()
            .map(|(s, &(n, m, k))| {
                let (scores, covar) = correlated(n, m, k, 10 * s as u64);
                PreparedRun::linear(&scores, &covar, method, scheme).unwrap()
            })
            .collect()
    }

    fn assert_same_counts(runs: &[PreparedRun], seed: u64, range: Range<u64>) {
        let fast: Vec<FastRun> = runs.iter().map(|r| FastRun::from_prepared(r).unwrap()).collect();
        let expected = count_exceedances_batch(runs, seed, range.clone());
        let got = count_exceedances_batch_fast(&fast, seed, range);
        assert_eq!(got, expected);
        assert!(expected.iter().any(|c| c.pairwise.iter().any(|&v| v > 0)));
    }

    #[test]
    fn identical_counts_for_every_scheme() {
        for scheme in [
            PermutationScheme::Free,
            PermutationScheme::Block { length: 5 },
            PermutationScheme::Circular { mirror: true },
        ] {
            // W1's shape (m + k = 8: one tile row pair) and shapes that cross tile boundaries.
            let runs = prepared(
                &[(100, 7, 1), (100, 7, 1), (37, 13, 2), (40, 9, 3)],
                scheme,
                Method::Pearson,
            );
            assert_same_counts(&runs, 17, 0..700);
        }
    }

    #[test]
    fn block_tables_and_tiles_count_alike() {
        // Short last blocks (37 = 7·5 + 2, 40 = 13·3 + 1) exercise the shifted tables; the tiled kernel is
        // what runs when the tables would be too large.
        let scheme = PermutationScheme::Block { length: 5 };
        let runs = prepared(&[(37, 13, 2), (100, 7, 1)], scheme, Method::Pearson);
        let runs3 = prepared(
            &[(40, 4, 1)],
            PermutationScheme::Block { length: 3 },
            Method::Pearson,
        );
        let expected = count_exceedances_batch(&runs, 5, 0..500);
        let mut fast: Vec<FastRun> = runs.iter().map(|r| FastRun::from_prepared(r).unwrap()).collect();
        assert!(fast.iter().all(|f| f.blocks.is_some()));
        assert_eq!(count_exceedances_batch_fast(&fast, 5, 0..500), expected);
        fast.iter_mut().for_each(|f| f.blocks = None);
        assert_eq!(count_exceedances_batch_fast(&fast, 5, 0..500), expected);
        let fast3: Vec<FastRun> = runs3.iter().map(|r| FastRun::from_prepared(r).unwrap()).collect();
        assert!(fast3[0].blocks.is_some() && 40 % 3 == 1);
        assert_same_counts(&runs3, 8, 0..500);
    }

    #[test]
    fn identical_counts_spearman_and_wide_runs() {
        let runs = prepared(
            &[(60, 21, 1), (25, 2, 1)],
            PermutationScheme::Free,
            Method::Spearman,
        );
        assert_same_counts(&runs, 3, 5..400);
    }

    #[test]
    fn split_ranges_add_up_and_identity_counts() {
        let runs = prepared(
            &[(12, 3, 1)],
            PermutationScheme::Circular { mirror: false },
            Method::Pearson,
        );
        let fast: Vec<FastRun> = runs.iter().map(|r| FastRun::from_prepared(r).unwrap()).collect();
        let whole = count_exceedances_batch_fast(&fast, 9, 0..300);
        let mut split = count_exceedances_batch_fast(&fast, 9, 0..77);
        split[0].merge(&count_exceedances_batch_fast(&fast, 9, 77..300)[0]);
        assert_eq!(whole, split);
        // Shift 0 reproduces the data, and with n = 12 it occurs about 25 times in 300 draws: every pair
        // counts it.
        assert!(whole[0].pairwise[1] >= 1 && whole[0].pairwise[2] >= 1 && whole[0].pairwise[5] >= 1);
    }

    #[test]
    fn general_control_is_not_handled() {
        let runs = prepared(&[(20, 3, 1)], PermutationScheme::Free, Method::Pearson);
        let run = &runs[0];
        let Some(residualiser) = &run.linear else {
            unreachable!()
        };
        let general = PreparedRun::from_residuals(
            crate::control::RunResiduals {
                unit_residuals: run.unit_residuals.clone(),
                control_df: vec![1.0; run.m],
                linear: None,
                columns: (0..run.m)
                    .map(|_| crate::control::ColumnMaker {
                        maker: Box::new(residualiser.clone()),
                        offset: vec![0.0; run.n],
                    })
                    .collect(),
            },
            PermutationScheme::Free,
        );
        assert!(FastRun::from_prepared(&general).is_none());
    }
}
