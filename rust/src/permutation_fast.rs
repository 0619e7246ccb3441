//! GEMM-form Freedman–Lane counting for the linear control (prototype of a replacement for the inner loop of
//! [`crate::permutation::count_exceedances_batch`]).
//!
//! For a permutation P, every number the count needs is an entry of one small matrix product:
//! with L = [Q E] (n × (k + m): the orthonormal covariate basis, then the unit residuals) and G = P E (the
//! rows of E in permuted order), C = Lᵀ G holds ⟨q_j, P e_b⟩ in its first k rows and ⟨e_a, P e_b⟩ below, so
//! r*_ab = C[k + a, b] / √(1 − Σ_j C[j, b]²) — the same formula as the scalar kernel's projection shortcut.
//! C is accumulated one row of G at a time, in 4 × 8 register tiles, reading row π(i) of E straight from a
//! row-major copy (no gathered copy is written), and tiles below the diagonal that no pair needs are skipped.
//! Each permutation is drawn once and serves every run of the same length and scheme.
//!
//! What differs from the scalar kernel: only the order of the additions in the dot products (one running sum
//! per entry over i instead of four interleaved ones), so r* agrees to rounding (~1e-16) and the counts are
//! identical (the comparison allows a relative slack of 1e-10). No fused multiply-add is used, so the results
//! are the same bit for bit with and without AVX2.

use std::collections::BTreeMap;
use std::ops::Range;

use rayon::prelude::*;

use crate::matrix::Mat;
use crate::permutation::{Control, ExceedanceCounts, PreparedRun, TIE_TOLERANCE};
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
    /// |r_ab| for a < b (row-major a·m + b), the observed values the permuted ones are compared with.
    observed: Vec<f64>,
    scheme: PermutationScheme,
}

impl FastRun {
    /// The tiled layout of a prepared run; `None` unless its control is linear (a projection).
    pub fn from_prepared(run: &PreparedRun) -> Option<Self> {
        let Control::Linear(residualiser) = &run.control else {
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
        let mut observed = vec![0.0; m * m];
        for a in 0..m {
            for b in (a + 1)..m {
                observed[a * m + b] = run.r.get(a, b).abs();
            }
        }
        Some(FastRun {
            n,
            m,
            k,
            stride,
            rows,
            width,
            left,
            observed,
            scheme: run.scheme,
        })
    }

    /// Whether the tile of L rows `a0..a0 + TILE_A` and G columns `b0..b0 + TILE_B` holds anything needed:
    /// covariate rows pair with every column, residual row a only with columns b > a.
    fn tile_needed(&self, a0: usize, b0: usize) -> bool {
        let b_end = (b0 + TILE_B).min(self.m);
        b0 < self.m && (a0 < self.k || a0 - self.k + 1 < b_end)
    }
}

/// Σ_i left[i, a0..a0+4] ⊗ rows[order[i], b0..b0+8]: one register tile of C = Lᵀ P E.
#[inline(always)]
fn tile(run: &FastRun, order: &[u32], a0: usize, b0: usize) -> [[f64; TILE_B]; TILE_A] {
    let mut acc = [[0.0; TILE_B]; TILE_A];
    for (i, &source) in order.iter().enumerate() {
        let l: &[f64; TILE_A] = run.left[i * run.width + a0..][..TILE_A].try_into().unwrap();
        let start = source as usize * run.stride + b0;
        let g: &[f64; TILE_B] = run.rows[start..][..TILE_B].try_into().unwrap();
        for a in 0..TILE_A {
            for b in 0..TILE_B {
                acc[a][b] += l[a] * g[b];
            }
        }
    }
    acc
}

/// C = Lᵀ P E into `product` (width × stride, row-major); tiles no pair needs are left untouched.
#[inline(always)]
fn products_generic(run: &FastRun, order: &[u32], product: &mut [f64]) {
    for a0 in (0..run.width).step_by(TILE_A) {
        for b0 in (0..run.stride).step_by(TILE_B) {
            if !run.tile_needed(a0, b0) {
                continue;
            }
            let acc = tile(run, order, a0, b0);
            for (a, row) in acc.iter().enumerate() {
                product[(a0 + a) * run.stride + b0..][..TILE_B].copy_from_slice(row);
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

/// Adds one permutation's exceedances, from its product matrix, to `counts`.
fn count_one(run: &FastRun, product: &[f64], r_star: &mut [f64], counts: &mut ExceedanceCounts) {
    let (m, k, stride) = (run.m, run.k, run.stride);
    let mut largest: f64 = 0.0;
    for b in 1..m {
        let explained: f64 = (0..k).map(|j| product[j * stride + b].powi(2)).sum();
        let length = (1.0 - explained).max(0.0).sqrt();
        for a in 0..b {
            let value = if length > 0.0 {
                product[(k + a) * stride + b] / length
            } else {
                0.0
            };
            r_star[a * m + b] = value;
            largest = largest.max(value.abs());
        }
    }
    for a in 0..m {
        for b in (a + 1)..m {
            let limit = run.observed[a * m + b] * (1.0 - TIE_TOLERANCE);
            if r_star[a * m + b].abs() >= limit {
                counts.pairwise[a * m + b] += 1;
            }
            if largest >= limit {
                counts.family_wise[a * m + b] += 1;
            }
        }
    }
    counts.permutations += 1;
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
    members
        .iter()
        .map(|&r| {
            let run = &runs[r];
            let mut counts = zeros(run.m);
            let mut product = vec![0.0; run.width * run.stride];
            let mut r_star = vec![0.0; run.m * run.m];
            for permuted in orders.chunks_exact(n) {
                products(run, permuted, &mut product);
                count_one(run, &product, &mut r_star, &mut counts);
            }
            counts
        })
        .collect()
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
        let Control::Linear(residualiser) = &run.control else {
            unreachable!()
        };
        let general = PreparedRun::from_residuals(
            run.unit_residuals.clone(),
            Control::General(Box::new(residualiser.clone())),
            PermutationScheme::Free,
        );
        assert!(FastRun::from_prepared(&general).is_none());
    }
}
