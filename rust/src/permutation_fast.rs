//! GEMM-form Freedman–Lane counting for the linear control: the kernel [`crate::batch`] chooses over
//! [`crate::permutation::count_exceedances_batch`] (the scalar reference kernel) whenever the control is
//! linear.
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
//! - **Block tables** (block scheme): P moves whole blocks, so C is a sum of one precomputed row of block
//!   cross products per placed block (`BlockTables`): ⌈n/L⌉ vector additions instead of n (k + m) m
//!   multiply-adds. Their build is O(n²/L) per run, so they are built (lazily, on the first call, in
//!   parallel) only where a cost model says the permutations repay it and within a memory budget; elsewhere
//!   the tiles keep the cost linear in n.
//! - Each permutation is drawn once per chunk and serves every run of the same length and scheme; tasks are
//!   run-major so a run's tables stay in cache; |r*| is compared with precomputed limits, and the
//!   family-wise counts come from each permutation's max |r*|.
//!
//! What differs from the scalar kernel: only the order of the additions in the dot products, so r* agrees to
//! rounding (~1e-16) and the counts are identical (the comparison allows a relative slack of 1e-10; the tests
//! check equality for every scheme). No fused multiply-add is used, so the results are the same bit for bit
//! with and without AVX2, and do not depend on the number of threads.
//!
//! How it is chosen ([`crate::batch::permutation_test_batch`]): `prepare_fast(&prepared)` once per call; when
//! it is `Some`, [`count_exceedances_batch_fast`] serves every slice, else `count_exceedances_batch`.
//!
//! Size: ~640 lines of code and ~220 of tests below them (`mod tests`), which check every tile shape against the
//! scalar kernel.

use std::ops::Range;
use std::sync::OnceLock;

use rayon::prelude::*;

use crate::fast_kernel::{
    add_table_rows_inline, chunk_ranges, group_runs, lanes, outer_add, with_avx2, SUM_LANES, TILE_A, TILE_B,
};
use crate::matrix::Mat;
use crate::permutation::{ExceedanceCounts, PreparedRun, TIE_TOLERANCE};
use crate::rng::{permutation_into, PermutationScheme};

/// Permutations per task: each task draws them once and applies them to every run of its group.
const CHUNK: u64 = 64;

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
    /// Block cross-product tables (see [`BlockTables`]), for the block scheme: built on the first call that
    /// counts this run's permutations, and only when they pay for themselves (see [`BlockLayout::worth_it`]);
    /// `None` inside means the tiled kernel serves the run.
    blocks: OnceLock<Option<BlockTables>>,
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
            blocks: OnceLock::new(),
        };
        if !matches!(run.scheme, PermutationScheme::Block { .. }) {
            fast.blocks = OnceLock::from(None);
        }
        Some(fast)
    }

    /// The block tables if they are built (and worth it).
    fn tables(&self) -> Option<&BlockTables> {
        self.blocks.get().and_then(Option::as_ref)
    }

    /// Multiply-adds per row of P E in the tiled kernel: 32 per register tile a pair needs.
    fn tile_work(&self) -> usize {
        let mut tiles = 0;
        for a0 in (0..self.width).step_by(TILE_A) {
            for b0 in (0..self.stride).step_by(TILE_B) {
                tiles += usize::from(self.tile_needed(a0, b0));
            }
        }
        tiles * TILE_A * TILE_B
    }

    /// Whether the tile of L rows `a0..a0 + TILE_A` and G columns `b0..b0 + TILE_B` holds anything needed:
    /// covariate rows pair with every column, residual row a only with columns b > a.
    fn tile_needed(&self, a0: usize, b0: usize) -> bool {
        let b_end = (b0 + TILE_B).min(self.m);
        b0 < self.m && (a0 < self.k || a0 - self.k + 1 < b_end)
    }
}

/// Largest block tables built, in f64 values per run (4 MiB): each permutation reads ⌈n/L⌉ rows of them at
/// random, and tables far beyond the caches would make that memory-bound, slower than the tiles.
const MAX_TABLE_VALUES: usize = 1 << 19;

/// Largest block tables built for one call, all runs together, in f64 values (256 MiB): runs past it (in
/// run order) use the tiles, so memory does not grow with the number of runs.
const MAX_TOTAL_TABLE_VALUES: usize = 1 << 25;

/// Decides, for every run whose block tables are not decided yet, whether they are worth building for
/// `permutations` permutations per call and fit in the budget, and builds them in parallel on the caller's
/// rayon pool. The first call decides for all later ones.
fn ensure_tables(runs: &[FastRun], permutations: u64) {
    ensure_tables_within(runs, permutations, MAX_TOTAL_TABLE_VALUES);
}

/// [`ensure_tables`] with a total budget of `budget` f64 values.
fn ensure_tables_within(runs: &[FastRun], permutations: u64, mut budget: usize) {
    if runs.iter().all(|run| run.blocks.get().is_some()) {
        return;
    }
    let plans: Vec<Option<BlockLayout>> = runs
        .iter()
        .map(|run| {
            let PermutationScheme::Block { length } = run.scheme else {
                return None;
            };
            if run.blocks.get().is_some() {
                return None;
            }
            let layout = BlockLayout::new(run, length)?;
            let size = layout.rows * layout.entries;
            (size <= budget && layout.worth_it(run, permutations)).then(|| {
                budget -= size;
                layout
            })
        })
        .collect();
    runs.par_iter().zip(plans).for_each(|(run, plan)| {
        // Runs decided before keep their tables: `set` leaves them as they are.
        let _ = run.blocks.set(plan.map(|layout| layout.build(run)));
    });
}

/// The block scheme moves whole blocks, so ⟨l, P e_b⟩ is a sum over the placed blocks of cross products of a
/// block of L rows (where the block lands) with a block of E rows (where it comes from). With L the block
/// length, n = n_full L + r and blocks placed in the order σ: a full block placed t-th starts at row tL, or at
/// tL − (L − r) once the short last block (length r > 0) has been placed. Tabulating, for every needed
/// entry C[row, b], the cross products for every (slot t, source block s) — aligned, shifted, and the short
/// block at each slot — makes a permutation cost one sum of ⌈n/L⌉ table rows instead of n × (k + m) × m
/// multiply-adds.
///
/// The layout says which rows exist and where each entry goes, so that whether the tables are worth
/// building is decided before anything is computed.
struct BlockLayout {
    length: usize,
    /// Full blocks, ⌊n/L⌋, and the short block's length r = n mod L.
    full: usize,
    short: usize,
    /// Blocks per permutation, ⌈n/L⌉.
    slots: usize,
    /// Entries per table row: for b = 1 … m − 1, the rows 0 … k + b − 1 of column b, padded to a multiple of
    /// [`SUM_LANES`].
    entries: usize,
    /// Where column b's entries start in a table row.
    offset: Vec<usize>,
    /// Table rows: full block s placed at slot t, aligned (starting at row tL), is row t · full + s; with a
    /// short block, the same after the short block (starting at tL − (L − r)) is row (slots + t) · full + s,
    /// and the short block placed at slot t is row 2 · slots · full + t. Without one, only the aligned rows.
    rows: usize,
}

impl BlockLayout {
    /// `None` for a single column (no pair).
    fn new(run: &FastRun, length: usize) -> Option<Self> {
        let (n, m, k) = (run.n, run.m, run.k);
        if m < 2 {
            return None;
        }
        let (full, short) = (n / length, n % length);
        let slots = full + usize::from(short > 0);
        let mut offset = vec![0; m];
        let mut entries = 0;
        for (b, start) in offset.iter_mut().enumerate().skip(1) {
            *start = entries;
            entries += k + b;
        }
        let entries = entries.div_ceil(SUM_LANES) * SUM_LANES;
        let rows = if short > 0 {
            2 * slots * full + slots
        } else {
            full * full
        };
        Some(BlockLayout {
            length,
            full,
            short,
            slots,
            entries,
            offset,
            rows,
        })
    }

    /// (first row of L, first row of E, rows) whose cross products make table row `row`, or `None` for a row
    /// no permutation reads (an aligned full block cannot sit in the last slot while the short block is
    /// unplaced, nor a shifted one in the first).
    fn source(&self, row: usize) -> Option<(usize, usize, usize)> {
        let (length, full, slots) = (self.length, self.full, self.slots);
        if row < slots * full {
            let (t, s) = (row / full, row % full);
            (t < full).then_some((t * length, s * length, length))
        } else if row < 2 * slots * full {
            let (t, s) = ((row - slots * full) / full, (row - slots * full) % full);
            (t > 0).then(|| (t * length - (length - self.short), s * length, length))
        } else {
            let t = row - 2 * slots * full;
            Some((t * length, full * length, self.short))
        }
    }

    /// Whether building the tables and summing their rows costs less than the tiled kernel for
    /// `permutations` permutations, and the tables fit in [`MAX_TABLE_VALUES`]. The build is O(n²/L) per run
    /// against O(n/L) per permutation, so with few permutations or many checkpoints the tiles (O(n) per
    /// permutation) are chosen and the cost stays linear in n.
    fn worth_it(&self, run: &FastRun, permutations: u64) -> bool {
        if self.rows * self.entries > MAX_TABLE_VALUES {
            return false;
        }
        let tile = run.tile_work() as f64;
        let build = BUILD_COST * self.rows as f64 * (self.length as f64 * tile + self.entries as f64);
        let summed = SUM_COST * (self.slots * self.entries) as f64;
        let tiled = (run.n as f64) * tile;
        build + permutations as f64 * summed < permutations as f64 * tiled
    }

    /// Every table row, in parallel on the caller's rayon pool: each block's cross products are computed in
    /// register tiles into a scratch product, then its needed entries gathered into the table row.
    fn build(self, run: &FastRun) -> BlockTables {
        // gather[e]: where table entry e (column b, row < k + b) sits in the width × stride product.
        let mut gather = Vec::with_capacity(self.entries);
        for b in 1..run.m {
            gather.extend((0..run.k + b).map(|row| row * run.stride + b));
        }
        let mut values = vec![0.0; self.rows * self.entries];
        // Rows in parallel batches; within a batch one scratch product serves every row.
        values
            .par_chunks_mut(BUILD_BATCH * self.entries)
            .enumerate()
            .for_each(|(batch, chunk)| {
                let mut product = vec![0.0; run.width * run.stride];
                for (i, out) in chunk.chunks_exact_mut(self.entries).enumerate() {
                    if let Some((start, source, len)) = self.source(batch * BUILD_BATCH + i) {
                        block_cross(run, start, source, len, &mut product);
                        for (value, &at) in out.iter_mut().zip(&gather) {
                            *value = product[at];
                        }
                    }
                }
            });
        // Table rows a slot can read: its aligned and shifted rows of every full block, and its short row.
        let rows_per_slot = if self.short > 0 {
            2 * self.full + 1
        } else {
            self.full
        };
        let slot_bytes = rows_per_slot * self.entries * std::mem::size_of::<f64>();
        BlockTables {
            entries: self.entries,
            offset: self.offset,
            values,
            slots: self.slots,
            slots_per_pass: (PASS_BYTES / slot_bytes.max(1)).max(1),
        }
    }
}

/// Table rows built by one task.
const BUILD_BATCH: usize = 256;

/// Cost of a table entry built and of one added, in multiply-adds of the tiled kernel (measured on the W1
/// shape, n = 100 … 1,000, one thread: 0.07 ns per tiled multiply-add, 0.3–0.8 ns per built entry's
/// multiply-add, most of it first-touch page faults of the new table, 0.16–0.6 ns per added entry as the
/// tables outgrow L2).
const BUILD_COST: f64 = 4.0;
const SUM_COST: f64 = 2.5;

/// Cross products of L rows `start..start + len` with E rows `source..source + len`, C[row, b] for every
/// tile a pair needs, into `product` (width × stride, row-major): the tiled kernel's register tiles over
/// contiguous rows. Each entry is one running sum over the rows in order.
#[inline(always)]
fn block_cross_generic(run: &FastRun, start: usize, source: usize, len: usize, product: &mut [f64]) {
    for a0 in (0..run.width).step_by(TILE_A) {
        for b0 in (0..run.stride).step_by(TILE_B) {
            if !run.tile_needed(a0, b0) {
                continue;
            }
            let mut acc = [[0.0; TILE_B]; TILE_A];
            for j in 0..len {
                let l: [f64; TILE_A] = lanes(&run.left[(start + j) * run.width + a0..]);
                let g: [f64; TILE_B] = lanes(&run.rows[(source + j) * run.stride + b0..]);
                outer_add(&mut acc, &l, &g);
            }
            for (a, values) in acc.iter().enumerate() {
                product[(a0 + a) * run.stride + b0..][..TILE_B].copy_from_slice(values);
            }
        }
    }
}

with_avx2! {
    fn block_cross(
        run: &FastRun,
        start: usize,
        source: usize,
        len: usize,
        product: &mut [f64],
    ) => block_cross_generic;
}

/// Block cross-product tables of one run (see [`BlockLayout`]).
struct BlockTables {
    /// Values per table row.
    entries: usize,
    /// Where column b's entries start in a table row.
    offset: Vec<usize>,
    /// Table rows of `entries` values, as laid out by [`BlockLayout`].
    values: Vec<f64>,
    /// Blocks per permutation, ⌈n/L⌉.
    slots: usize,
    /// Slots summed per pass over a span of permutations (see [`BlockTables::sum_span`]).
    slots_per_pass: usize,
}

/// Bytes of table rows one pass of [`BlockTables::sum_span`] reads: a core's L2 (1 MiB here); the span's
/// partial sums stream through sequentially, which the prefetcher handles. Fewer, longer passes reload the
/// sums less often: with spans of 4,096 permutations, 1 MiB beat 512 KiB by 8 % at n = 1,000 (W1's shape,
/// 10,000 permutations, one thread: 0.406 against 0.442 s CPU), and with spans of 1,024 it beat 256 KiB,
/// 2 and 4 MiB and a single pass.
const PASS_BYTES: usize = 1 << 20;

impl BlockTables {
    /// C's needed entries for every permutation of a span (`perms[p]`: its table rows from [`block_rows`])
    /// into `sums` (one row of `entries` per permutation). Slot-major passes: the table rows a slot can read
    /// (its aligned, shifted and short rows) are contiguous, so a pass over a few slots reads a cache-sized
    /// part of the tables for all the span's permutations, instead of each permutation reading rows anywhere
    /// in tables that may not fit in cache (O(n²/L) values). Each entry still adds its rows in slot order,
    /// so the sums are the same bit for bit as one permutation at a time.
    fn sum_span(&self, perms: &[&[u32]], sums: &mut [f64]) {
        sum_span(self, perms, sums);
    }
}

#[inline(always)]
fn sum_span_generic(tables: &BlockTables, perms: &[&[u32]], sums: &mut [f64]) {
    sums.fill(0.0);
    for first in (0..tables.slots).step_by(tables.slots_per_pass) {
        let last = (first + tables.slots_per_pass).min(tables.slots);
        for (rows, out) in perms.iter().zip(sums.chunks_exact_mut(tables.entries)) {
            add_table_rows_inline(&tables.values, &rows[first..last], tables.entries, out);
        }
    }
}

with_avx2! {
    fn sum_span(tables: &BlockTables, perms: &[&[u32]], sums: &mut [f64]) => sum_span_generic;
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
        outer_add(&mut acc, &l, &g);
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

with_avx2! {
    fn products(run: &FastRun, order: &[u32], product: &mut [f64]) => products_generic;
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

/// One chunk of permutations, drawn once for every run of a group (same n and scheme): the permuted row
/// orders (for runs on the tiled kernel) and each permutation's table rows (for runs with block tables).
struct Draws {
    orders: Vec<u32>,
    table_rows: Vec<u32>,
}

fn draw_chunk(
    first: &FastRun,
    seed: u64,
    range: Range<u64>,
    orders_needed: bool,
    rows_needed: bool,
) -> Draws {
    let n = first.n;
    let count = (range.end - range.start) as usize;
    let mut order = vec![0usize; n];
    let mut orders: Vec<u32> = Vec::with_capacity(if orders_needed { count * n } else { 0 });
    let mut table_rows: Vec<u32> = Vec::new();
    for index in range {
        permutation_into(n, first.scheme, seed, index, &mut order);
        let permuted = order.iter().map(|&i| i as u32);
        if orders_needed {
            orders.extend(permuted);
            if let (true, PermutationScheme::Block { length }) = (rows_needed, first.scheme) {
                block_rows(n, length, &orders[orders.len() - n..], &mut table_rows);
            }
        } else if let (true, PermutationScheme::Block { length }) = (rows_needed, first.scheme) {
            let permuted: Vec<u32> = permuted.collect();
            block_rows(n, length, &permuted, &mut table_rows);
        }
    }
    Draws { orders, table_rows }
}

/// Most chunks of drawn permutations counted by one task (4,096 permutations, one slice of
/// [`crate::batch::FAST_SLICE`]): the more permutations share a task, the more of them read each part of a
/// run's block tables while it is in cache (see [`BlockTables::sum_span`]); tables beyond the caches are
/// streamed from memory once per task.
const SPAN: usize = 64;

/// Chunks per task: [`SPAN`], or fewer when that would leave fewer than four tasks per thread.
fn span_for(chunks: usize, runs: usize) -> usize {
    let tasks_wanted = 4 * rayon::current_num_threads();
    (chunks * runs / tasks_wanted).clamp(1, SPAN)
}

/// Exceedance counts of one run over a span of chunks of drawn permutations.
fn count_run_span(run: &FastRun, span: &[Draws]) -> ExceedanceCounts {
    let n = run.n;
    let mut counts = zeros(run.m);
    let mut largest = Vec::with_capacity(SPAN * CHUNK as usize);
    if let Some(tables) = run.tables() {
        let perms: Vec<&[u32]> = span
            .iter()
            .flat_map(|draws| draws.table_rows.chunks_exact(tables.slots))
            .collect();
        let mut sums = vec![0.0; perms.len() * tables.entries];
        tables.sum_span(&perms, &mut sums);
        for sums in sums.chunks_exact(tables.entries) {
            largest.push(count_one(run, |row, b| sums[tables.offset[b] + row], &mut counts));
        }
    } else {
        let mut product = vec![0.0; run.width * run.stride];
        for permuted in span.iter().flat_map(|draws| draws.orders.chunks_exact(n)) {
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
}

/// The tiled layouts of `runs`, or `None` when any run's control is not linear (then the scalar kernel
/// serves the batch). Build once per call and reuse across the slices of permutations.
pub fn prepare_fast(runs: &[PreparedRun]) -> Option<Vec<FastRun>> {
    runs.iter().map(FastRun::from_prepared).collect()
}

/// Exceedance counts for permutations `range` of every run: the same numbers as
/// [`crate::permutation::count_exceedances_batch`], in parallel over runs and chunks of permutations, each
/// chunk drawn once for all the runs that share its length and scheme. The first call decides (and builds)
/// the block tables for the later ones. The result does not depend on the thread count.
pub fn count_exceedances_batch_fast(runs: &[FastRun], seed: u64, range: Range<u64>) -> Vec<ExceedanceCounts> {
    ensure_tables(runs, range.end - range.start);
    let groups = group_runs(runs.iter().map(|run| (run.n, format!("{:?}", run.scheme))));
    let chunks = chunk_ranges(range, CHUNK);
    let mut totals: Vec<ExceedanceCounts> = runs.iter().map(|run| zeros(run.m)).collect();
    for members in &groups {
        let first = &runs[members[0]];
        let rows_needed = members.iter().any(|&r| runs[r].tables().is_some());
        let orders_needed = members.iter().any(|&r| runs[r].tables().is_none());
        let draws: Vec<Draws> = chunks
            .par_iter()
            .map(|chunk| draw_chunk(first, seed, chunk.clone(), orders_needed, rows_needed))
            .collect();
        // Run-major tasks: a thread takes consecutive chunks of the same run, so that run's block tables stay
        // in its cache instead of every table being streamed again for every chunk.
        let span = span_for(draws.len(), members.len());
        let tasks: Vec<(usize, &[Draws])> = members
            .iter()
            .flat_map(|&r| draws.chunks(span).map(move |chunks| (r, chunks)))
            .collect();
        let partial: Vec<(usize, ExceedanceCounts)> = tasks
            .into_par_iter()
            .map(|(r, span)| (r, count_run_span(&runs[r], span)))
            .collect();
        for (r, counts) in &partial {
            totals[*r].merge(counts);
        }
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::Method;
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

    fn fast_runs(runs: &[PreparedRun]) -> Vec<FastRun> {
        runs.iter().map(|r| FastRun::from_prepared(r).unwrap()).collect()
    }

    /// Builds the block tables whatever the cost model says (`tables: true`) or forbids them.
    fn force(fast: &mut [FastRun], tables: bool) {
        for run in fast.iter_mut() {
            let PermutationScheme::Block { length } = run.scheme else {
                unreachable!()
            };
            let built = if tables {
                BlockLayout::new(run, length).map(|layout| layout.build(run))
            } else {
                None
            };
            run.blocks = OnceLock::from(built);
        }
    }

    #[test]
    fn block_tables_and_tiles_count_alike() {
        // Short last blocks (37 = 7·5 + 2, 40 = 13·3 + 1) exercise the shifted tables, 100 = 20·5 and
        // 36 = 12·3 the aligned ones alone; the tiled kernel is what runs when the tables do not pay.
        for (shapes, length) in [
            (vec![(37, 13, 2), (100, 7, 1)], 5),
            (vec![(40, 4, 1), (36, 5, 2)], 3),
        ] {
            let runs = prepared(&shapes, PermutationScheme::Block { length }, Method::Pearson);
            let expected = count_exceedances_batch(&runs, 5, 0..500);
            let mut fast = fast_runs(&runs);
            force(&mut fast, true);
            assert!(fast.iter().all(|f| f.tables().is_some()));
            assert_eq!(count_exceedances_batch_fast(&fast, 5, 0..500), expected);
            force(&mut fast, false);
            assert_eq!(count_exceedances_batch_fast(&fast, 5, 0..500), expected);
            assert_same_counts(&runs, 8, 0..500);
        }
    }

    #[test]
    fn slot_passes_sum_as_one_pass() {
        // One slot per pass (tables far beyond the cache take several) counts as the single pass that small
        // tables take, short last block (37 = 7·5 + 2) included.
        let runs = prepared(
            &[(37, 6, 2), (37, 9, 1)],
            PermutationScheme::Block { length: 5 },
            Method::Pearson,
        );
        let expected = count_exceedances_batch(&runs, 3, 0..700);
        let mut fast = fast_runs(&runs);
        force(&mut fast, true);
        assert!(fast
            .iter()
            .all(|f| f.tables().is_some_and(|t| t.slots_per_pass >= t.slots)));
        for run in fast.iter_mut() {
            if let Some(Some(tables)) = run.blocks.get_mut() {
                tables.slots_per_pass = 1;
            }
        }
        assert_eq!(count_exceedances_batch_fast(&fast, 3, 0..700), expected);
    }

    #[test]
    fn tables_only_where_they_pay() {
        let block = |length| PermutationScheme::Block { length };
        // W1's shape: a 400-row table (20 × 20 aligned blocks, no shifted rows since 5 divides 100) repays
        // its build within a few hundred permutations (W1 runs 10,000, in slices of 1,024).
        let w1 = fast_runs(&prepared(&[(100, 7, 1)], block(5), Method::Pearson));
        let layout = BlockLayout::new(&w1[0], 5).unwrap();
        assert_eq!((layout.rows, layout.entries), (400, 32));
        assert!(layout.worth_it(&w1[0], 256) && !layout.worth_it(&w1[0], 64));
        // 1,000 checkpoints in blocks of 10 with 50 permutations: building the 10,000 rows costs more than
        // tiling the permutations, so the tiles run and the cost stays linear in n.
        let long = fast_runs(&prepared(&[(1000, 7, 1)], block(10), Method::Pearson));
        let layout = BlockLayout::new(&long[0], 10).unwrap();
        assert!(!layout.worth_it(&long[0], 50) && layout.worth_it(&long[0], 1024));
        // Tables over the memory cap are never built.
        let wide = fast_runs(&prepared(&[(1000, 50, 1)], block(10), Method::Pearson));
        assert!(!BlockLayout::new(&wide[0], 10)
            .unwrap()
            .worth_it(&wide[0], 1 << 20));
        // The first call decides for the later ones.
        let runs = prepared(&[(100, 7, 1)], block(5), Method::Pearson);
        let fast = fast_runs(&runs);
        let first = count_exceedances_batch_fast(&fast, 2, 0..2);
        assert!(fast[0].blocks.get().is_some_and(Option::is_none));
        let mut total = first;
        total[0].merge(&count_exceedances_batch_fast(&fast, 2, 2..300)[0]);
        assert_eq!(total, count_exceedances_batch(&runs, 2, 0..300));
        // Runs past the total budget (here room for two 400 × 32 tables) use the tiles, and count alike.
        let runs = prepared(&[(100, 7, 1); 3], block(5), Method::Pearson);
        let fast = fast_runs(&runs);
        ensure_tables_within(&fast, 1000, 2 * 400 * 32);
        let built: Vec<bool> = fast.iter().map(|f| f.tables().is_some()).collect();
        assert_eq!(built, [true, true, false]);
        assert_eq!(
            count_exceedances_batch_fast(&fast, 4, 0..300),
            count_exceedances_batch(&runs, 4, 0..300)
        );
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
