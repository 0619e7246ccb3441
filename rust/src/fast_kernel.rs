//! Pieces shared by the GEMM-form kernels ([`crate::permutation_fast`], [`crate::bootstrap_fast`]): the
//! register-tile shape, the copy of a few values into registers, the summation of table rows, and the
//! grouping of runs and resampling ranges into tasks.
//!
//! No fused multiply-add is used anywhere here, so every sum is the same bit for bit with and without AVX2.

use std::collections::BTreeMap;
use std::ops::Range;

/// `fn name(args) => generic;` defines `name(args)`, which runs `generic(args)` compiled with AVX2 enabled
/// when the CPU has it (detected at run time: the crate is built for baseline x86-64), else as compiled.
/// `generic` is `#[inline(always)]`, so the AVX2 copy is its own code, vectorised with 256-bit registers;
/// no fused multiply-add is enabled, so both copies give the same bits.
macro_rules! with_avx2 {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $generic:ident;) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) {
                    $generic($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2, checked just above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $generic($($arg),*)
        }
    };
}
pub(crate) use with_avx2;

/// Register tile of the GEMM-form kernels: `TILE_A` rows of the left factor by `TILE_B` columns of the
/// right one (4 × 8 f64: eight AVX2 accumulators).
pub const TILE_A: usize = 4;
pub const TILE_B: usize = 8;

/// Table entries summed at once, in registers (8 AVX2 accumulators, enough independent additions to hide
/// their latency).
pub const SUM_LANES: usize = 32;
/// The last entries of a table row are summed this many at a time: a table's rows are padded to a multiple
/// of it (so that no more than 15 padding zeros are added per row).
pub const SUM_TAIL: usize = 16;

/// The first N values of `values` as an array (the callers' strides guarantee there are N); copying them
/// into registers is what the tiles do anyway, and the conversion cannot fail.
#[inline(always)]
pub fn lanes<const N: usize>(values: &[f64]) -> [f64; N] {
    let mut out = [0.0; N];
    out.copy_from_slice(&values[..N]);
    out
}

/// acc += l ⊗ g: one row's contribution to a register tile.
#[inline(always)]
pub fn outer_add(acc: &mut [[f64; TILE_B]; TILE_A], l: &[f64; TILE_A], g: &[f64; TILE_B]) {
    for a in 0..TILE_A {
        for b in 0..TILE_B {
            acc[a][b] += l[a] * g[b];
        }
    }
}

/// acc + Σ_r values[r · entries + offset + j] over the table rows `rows`, for j < N, summed in registers
/// in the order of `rows`.
#[inline(always)]
fn add_rows_lanes<const N: usize>(
    values: &[f64],
    rows: &[u32],
    entries: usize,
    offset: usize,
    mut acc: [f64; N],
) -> [f64; N] {
    for &r in rows {
        let row: [f64; N] = lanes(&values[r as usize * entries + offset..]);
        for j in 0..N {
            acc[j] += row[j];
        }
    }
    acc
}

/// [`add_table_rows`] as an inline building block, for kernels that choose AVX2 once for a whole loop of
/// calls (see `with_avx2!`) instead of once per call.
#[inline(always)]
pub fn add_table_rows_inline(values: &[f64], rows: &[u32], entries: usize, sums: &mut [f64]) {
    debug_assert_eq!(entries % SUM_TAIL, 0);
    let mut offset = 0;
    while offset + SUM_LANES <= entries {
        let acc = add_rows_lanes::<SUM_LANES>(values, rows, entries, offset, lanes(&sums[offset..]));
        sums[offset..offset + SUM_LANES].copy_from_slice(&acc);
        offset += SUM_LANES;
    }
    while offset < entries {
        let acc = add_rows_lanes::<SUM_TAIL>(values, rows, entries, offset, lanes(&sums[offset..]));
        sums[offset..offset + SUM_TAIL].copy_from_slice(&acc);
        offset += SUM_TAIL;
    }
}

with_avx2! {
    /// `sums[j] += Σ_r values[r · entries + j]` over the table rows `rows` (tables of rows of `entries`
    /// values, `entries` a multiple of [`SUM_TAIL`]): [`SUM_LANES`] entries at a time, then [`SUM_TAIL`].
    /// Each entry is one running sum that starts from `sums[j]` and adds the rows in order, so summing a
    /// list of rows in two calls gives the same bits as in one.
    pub fn add_table_rows(
        values: &[f64],
        rows: &[u32],
        entries: usize,
        sums: &mut [f64],
    ) => add_table_rows_inline;
}

/// Indices of the runs that share a key (checkpoints and scheme), in key order: each group's resamples are
/// drawn once and serve all its members.
pub fn group_runs<K: Ord>(keys: impl IntoIterator<Item = K>) -> Vec<Vec<usize>> {
    let mut groups: BTreeMap<K, Vec<usize>> = BTreeMap::new();
    for (index, key) in keys.into_iter().enumerate() {
        groups.entry(key).or_default().push(index);
    }
    groups.into_values().collect()
}

/// `range` cut into consecutive pieces of `size` (the last one shorter).
pub fn chunk_ranges(range: Range<u64>, size: u64) -> Vec<Range<u64>> {
    (range.start..range.end)
        .step_by(size as usize)
        .map(|start| start..(start + size).min(range.end))
        .collect()
}

/// Every run's `range` cut into pieces of `size`, run-major: the (run, piece) tasks of a batch.
pub fn run_chunks(runs: usize, range: Range<u64>, size: u64) -> Vec<(usize, Range<u64>)> {
    let pieces = chunk_ranges(range, size);
    (0..runs)
        .flat_map(|run| pieces.iter().map(move |piece| (run, piece.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_sum_in_order_and_in_pieces() {
        // Rows of 48 entries (32 + 16): exact small integers, so the sums are known.
        let entries = 48;
        let values: Vec<f64> = (0..5 * entries).map(|v| v as f64).collect();
        let mut whole = vec![0.0; entries];
        add_table_rows(&values, &[4, 1, 1], entries, &mut whole);
        let expected: Vec<f64> = (0..entries)
            .map(|j| (4 * entries + j) as f64 + 2.0 * (entries + j) as f64)
            .collect();
        assert_eq!(whole, expected);
        let mut pieces = vec![0.0; entries];
        add_table_rows(&values, &[4], entries, &mut pieces);
        add_table_rows(&values, &[1, 1], entries, &mut pieces);
        assert_eq!(pieces, whole);
    }

    #[test]
    fn groups_and_chunks() {
        assert_eq!(
            group_runs([(5, 'b'), (3, 'a'), (5, 'b')]),
            vec![vec![1], vec![0, 2]]
        );
        assert_eq!(chunk_ranges(3..10, 4), vec![3..7, 7..10]);
        assert!(chunk_ranges(4..4, 4).is_empty());
        assert_eq!(
            run_chunks(2, 3..10, 4),
            vec![(0, 3..7), (0, 7..10), (1, 3..7), (1, 7..10)]
        );
    }
}
