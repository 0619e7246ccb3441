//! Freedman–Lane permutation tests of partial correlations, for every pair of test sets of a run at once.
//!
//! For a pair (a, b) with a < b and residual-maker M (least squares on [1, covar]): the residuals e_b = M y_b
//! of the reduced model are permuted, the permuted copy ŷ_b + P e_b is residualised again (M P e_b, since
//! M ŷ_b = 0), and correlated with e_a. The two-sided p-value is (b + 1)/(m + 1) with b the number of the m
//! permutations whose |r*| reaches the observed |r| (Freedman & Lane, 1983; Anderson & Legendre, 1999;
//! Winkler et al., 2014). One permutation serves every pair of the run, which is what makes the max-|r|
//! family-wise p-values (Westfall & Young, 1993) possible: p_fwer(a, b) = (#{max_pairs |r*| ≥ |r_ab|} + 1)/(m + 1).
//!
//! Under a GAM control the residual-maker M_b of column b (its smoother fixed at the smoothing parameters
//! chosen on the observed data) is not a projection, so the permuted copy is residualised in full:
//! M_b(ŷ_b + P e_b) = M_b ŷ_b + M_b P e_b. Reusing the fixed smoother keeps the residual-maker fixed exactly as
//! in the linear scheme and costs O(n·p) per column and permutation; re-selecting λ on every permuted copy
//! would also propagate the selection step, at several times the cost, and is not done.
//!
//! "Reaches" allows a relative slack of [`TIE_TOLERANCE`] so that the identity permutation, whose r* equals
//! r up to rounding, always counts.

use std::ops::Range;

use rayon::prelude::*;

use crate::control::{residualise_run, ColumnMaker, Control, RunResiduals};
use crate::error::Result;
use crate::fast_kernel::run_chunks;
use crate::matrix::{dot, norm, Mat};
use crate::method::Method;
use crate::residualise::LinearResidualiser;
use crate::rng::{permutation_into, PermutationScheme};

/// Relative slack when comparing |r*| with |r|.
pub const TIE_TOLERANCE: f64 = 1e-10;

/// Permutations handled by one task; small enough to balance work across threads, large enough to amortise
/// the allocation of the scratch buffers.
const CHUNK: u64 = 64;

/// One run made ready for permutation: unit-length residuals of every column and the residual-makers.
pub struct PreparedRun {
    pub n: usize,
    pub m: usize,
    /// Column j is e_j / ‖e_j‖.
    pub unit_residuals: Mat,
    /// Observed partial correlations (m × m, unit diagonal).
    pub r: Mat,
    /// The linear projection when the control is linear (shortcut below), else None.
    pub linear: Option<LinearResidualiser>,
    /// One Freedman–Lane residual-maker per column when the control is not a projection (GAM).
    pub columns: Vec<ColumnMaker>,
    pub scheme: PermutationScheme,
}

impl PreparedRun {
    /// Prepares a run with the linear control (Spearman: everything ranked first).
    pub fn linear(scores: &Mat, covar: &Mat, method: Method, scheme: PermutationScheme) -> Result<Self> {
        Self::new(scores, covar, method, &Control::Linear, scheme)
    }

    /// Prepares a run under `control`; under a GAM control each column's smoother is fixed at the smoothing
    /// parameters chosen on the observed data.
    pub fn new(
        scores: &Mat,
        covar: &Mat,
        method: Method,
        control: &Control,
        scheme: PermutationScheme,
    ) -> Result<Self> {
        crate::pcor::check_pairable("scores", scores.ncols())?;
        Ok(Self::from_residuals(
            residualise_run(scores, covar, method, control)?,
            scheme,
        ))
    }

    /// Prepares a run from its residuals.
    pub fn from_residuals(run: RunResiduals, scheme: PermutationScheme) -> Self {
        let unit_residuals = run.unit_residuals;
        let n = unit_residuals.nrows();
        let m = unit_residuals.ncols();
        let mut r = Mat::filled(m, m, 1.0);
        for a in 0..m {
            for b in (a + 1)..m {
                let value = dot(unit_residuals.col(a), unit_residuals.col(b)).clamp(-1.0, 1.0);
                r.set(a, b, value);
                r.set(b, a, value);
            }
        }
        PreparedRun {
            n,
            m,
            unit_residuals,
            r,
            linear: run.linear,
            columns: run.columns,
            scheme,
        }
    }
}

/// How many permutations reached each pair's observed |r| (entries a < b of an m × m grid, row-major a·m + b),
/// and how many had a max over pairs that reached it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceedanceCounts {
    pub pairwise: Vec<u64>,
    pub family_wise: Vec<u64>,
    pub permutations: u64,
}

impl ExceedanceCounts {
    fn zeros(m: usize) -> Self {
        ExceedanceCounts {
            pairwise: vec![0; m * m],
            family_wise: vec![0; m * m],
            permutations: 0,
        }
    }

    /// Adds the counts of another range of permutations of the same run.
    pub fn merge(&mut self, other: &ExceedanceCounts) {
        for (a, b) in self.pairwise.iter_mut().zip(&other.pairwise) {
            *a += b;
        }
        for (a, b) in self.family_wise.iter_mut().zip(&other.family_wise) {
            *a += b;
        }
        self.permutations += other.permutations;
    }
}

fn reaches(candidate: f64, observed_abs: f64) -> bool {
    candidate.abs() >= observed_abs * (1.0 - TIE_TOLERANCE)
}

/// Counts exceedances over permutations `range` (indices into the seeded sequence) for one run.
///
/// With the linear control the residual-maker M = I − 11ᵀ/n − QQᵀ is a projection and e_a = M e_a, so
/// ⟨e_a, M P e_b⟩ = ⟨e_a, P e_b⟩ and ‖M P e_b‖² = ‖e_b‖² − ‖Qᵀ P e_b‖² (P e_b keeps a zero mean): each
/// permuted column costs k dot products instead of a full re-residualisation.
pub fn count_exceedances(run: &PreparedRun, seed: u64, range: Range<u64>) -> ExceedanceCounts {
    let (n, m) = (run.n, run.m);
    let mut counts = ExceedanceCounts::zeros(m);
    let mut order = vec![0usize; n];
    let mut permuted = vec![0.0; n];
    let mut r_star = vec![0.0; m * m];
    for index in range {
        permutation_into(n, run.scheme, seed, index, &mut order);
        let mut largest: f64 = 0.0;
        for b in 1..m {
            let residual = run.unit_residuals.col(b);
            for (p, &i) in permuted.iter_mut().zip(&order) {
                *p = residual[i];
            }
            let length = match &run.linear {
                Some(residualiser) => {
                    let basis = residualiser.basis();
                    let explained: f64 = (0..basis.ncols())
                        .map(|j| dot(basis.col(j), &permuted).powi(2))
                        .sum();
                    (1.0 - explained).max(0.0).sqrt()
                }
                None => {
                    let column = &run.columns[b];
                    column.maker.apply_in_place(&mut permuted);
                    for (p, o) in permuted.iter_mut().zip(&column.offset) {
                        *p += o;
                    }
                    norm(&permuted)
                }
            };
            for a in 0..b {
                let value = if length > 0.0 {
                    dot(run.unit_residuals.col(a), &permuted) / length
                } else {
                    0.0
                };
                r_star[a * m + b] = value;
                largest = largest.max(value.abs());
            }
        }
        for a in 0..m {
            for b in (a + 1)..m {
                let observed = run.r.get(a, b).abs();
                if reaches(r_star[a * m + b], observed) {
                    counts.pairwise[a * m + b] += 1;
                }
                if reaches(largest, observed) {
                    counts.family_wise[a * m + b] += 1;
                }
            }
        }
        counts.permutations += 1;
    }
    counts
}

/// Exceedance counts for permutations `range` of every run, in parallel over runs and chunks of permutations.
/// The result does not depend on how rayon schedules the work.
pub fn count_exceedances_batch(runs: &[PreparedRun], seed: u64, range: Range<u64>) -> Vec<ExceedanceCounts> {
    let tasks = run_chunks(runs.len(), range, CHUNK);
    let partial: Vec<(usize, ExceedanceCounts)> = tasks
        .into_par_iter()
        .map(|(run, chunk)| (run, count_exceedances(&runs[run], seed, chunk)))
        .collect();
    let mut totals: Vec<ExceedanceCounts> = runs.iter().map(|run| ExceedanceCounts::zeros(run.m)).collect();
    for (run, counts) in &partial {
        totals[*run].merge(counts);
    }
    totals
}

/// p-values (b + 1)/(m + 1) from counts: (pairwise, family-wise), symmetric m × m with zero diagonal.
pub fn p_values(counts: &ExceedanceCounts, m: usize) -> (Mat, Mat) {
    let denominator = counts.permutations as f64 + 1.0;
    let mut pairwise = Mat::zeros(m, m);
    let mut family_wise = Mat::zeros(m, m);
    for a in 0..m {
        for b in (a + 1)..m {
            let p = (counts.pairwise[a * m + b] as f64 + 1.0) / denominator;
            let p_fwer = (counts.family_wise[a * m + b] as f64 + 1.0) / denominator;
            pairwise.set(a, b, p);
            pairwise.set(b, a, p);
            family_wise.set(a, b, p_fwer);
            family_wise.set(b, a, p_fwer);
        }
    }
    (pairwise, family_wise)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256pp;

    /// Pair `(a, b)`'s pairwise and family-wise p-values are `want` within `tolerance`.
    fn assert_p_values(
        p: &Mat,
        p_fwer: &Mat,
        (a, b): (usize, usize),
        want: (f64, f64),
        tolerance: f64,
        what: &str,
    ) {
        for (name, got, want) in [("p", p.get(a, b), want.0), ("p_fwer", p_fwer.get(a, b), want.1)] {
            assert!(
                (got - want).abs() < tolerance,
                "{what}{name}({a}, {b}) = {got} vs {want}"
            );
        }
    }

    fn noise(n: usize, m: usize, seed: u64) -> Mat {
        let mut rng = Xoshiro256pp::seed_from_u64(seed);
        Mat::from_col_major(n, m, (0..n * m).map(|_| rng.next_normal()).collect()).unwrap()
    }

    #[test]
    fn identity_permutation_always_counts() {
        // With n = 3 and free permutations, some of the 3! orderings are the identity; every count ≥ 1
        // once enough permutations are drawn, and p ≥ 1/(m+1) always.
        let scores = noise(12, 3, 1);
        let covar = noise(12, 1, 2);
        let run = PreparedRun::linear(&scores, &covar, Method::Pearson, PermutationScheme::Free).unwrap();
        let counts = count_exceedances(&run, 9, 0..199);
        let (p, p_fwer) = p_values(&counts, 3);
        for a in 0..3 {
            for b in 0..3 {
                if a != b {
                    assert!(p.get(a, b) >= 1.0 / 200.0);
                    assert!(p_fwer.get(a, b) >= p.get(a, b));
                }
            }
        }
    }

    #[test]
    fn batch_equals_single_and_is_schedule_independent() {
        let runs: Vec<PreparedRun> = (0..3)
            .map(|s| {
                PreparedRun::linear(
                    &noise(20, 4, s),
                    &noise(20, 2, 100 + s),
                    Method::Pearson,
                    PermutationScheme::Block { length: 3 },
                )
                .unwrap()
            })
            .collect();
        let batch = count_exceedances_batch(&runs, 5, 0..300);
        for (run, counts) in runs.iter().zip(&batch) {
            assert_eq!(&count_exceedances(run, 5, 0..300), counts);
        }
        let split = {
            let mut first = count_exceedances(&runs[1], 5, 0..123);
            first.merge(&count_exceedances(&runs[1], 5, 123..300));
            first
        };
        assert_eq!(split, batch[1]);
    }

    #[test]
    fn freedman_lane_matches_explicit_refit() {
        // r* computed by refitting the permuted response from scratch equals the shortcut used above.
        let n = 15;
        let scores = noise(n, 2, 11);
        let covar = noise(n, 2, 12);
        let run = PreparedRun::linear(&scores, &covar, Method::Pearson, PermutationScheme::Free).unwrap();
        let residualiser = LinearResidualiser::new(&covar, "covar").unwrap();
        let mut order = vec![0; n];
        permutation_into(n, PermutationScheme::Free, 3, 0, &mut order);
        let mut e_b = vec![0.0; n];
        residualiser.residualise_into(scores.col(1), &mut e_b);
        let fitted: Vec<f64> = scores.col(1).iter().zip(&e_b).map(|(y, e)| y - e).collect();
        let y_star: Vec<f64> = (0..n).map(|i| fitted[i] + e_b[order[i]]).collect();
        let mut e_star = vec![0.0; n];
        residualiser.residualise_into(&y_star, &mut e_star);
        let mut e_a = vec![0.0; n];
        residualiser.residualise_into(scores.col(0), &mut e_a);
        let expected = crate::pcor::correlation_of_centred(&e_a, &e_star);
        let mut permuted: Vec<f64> = order.iter().map(|&i| run.unit_residuals.col(1)[i]).collect();
        residualiser.apply_in_place(&mut permuted);
        let full = dot(run.unit_residuals.col(0), &permuted) / norm(&permuted);
        assert!((expected - full).abs() < 1e-12, "{expected} vs {full}");
        // The counting kernel's shortcut gives the same r*: the general path (full re-residualisation)
        // and the linear path must count identically.
        let general = PreparedRun::from_residuals(
            RunResiduals {
                unit_residuals: run.unit_residuals.clone(),
                control_df: vec![2.0; 2],
                linear: None,
                columns: (0..2)
                    .map(|_| ColumnMaker {
                        maker: Box::new(residualiser.clone()),
                        offset: vec![0.0; n],
                    })
                    .collect(),
            },
            PermutationScheme::Free,
        );
        assert_eq!(
            count_exceedances(&general, 3, 0..500),
            count_exceedances(&run, 3, 0..500)
        );
    }
    #[test]
    fn p_is_b_plus_one_over_permutations_plus_one() {
        // Counts made by hand: 4 of 99 permutations reach pair (0, 1), none reach (0, 2), all reach (1, 2).
        // (b + 1)/(B + 1) = 0.05, 0.01, 1; b/B would give 0.0404, 0, 1 and (b + 1)/B 0.0505, 0.0101, 1.0101.
        let m = 3;
        let mut counts = ExceedanceCounts::zeros(m);
        counts.permutations = 99;
        counts.pairwise[1] = 4;
        counts.pairwise[m + 2] = 99;
        counts.family_wise[1] = 9;
        counts.family_wise[2] = 19;
        counts.family_wise[m + 2] = 99;
        let (p, p_fwer) = p_values(&counts, m);
        for (a, b, want, want_fwer) in [(0, 1, 0.05, 0.1), (0, 2, 0.01, 0.2), (1, 2, 1.0, 1.0)] {
            for (x, y) in [(a, b), (b, a)] {
                assert_p_values(&p, &p_fwer, (x, y), (want, want_fwer), 1e-15, "");
            }
        }
        for i in 0..m {
            assert_eq!(p.get(i, i), 0.0);
        }
    }

    #[test]
    fn p_values_match_counts_from_explicit_refits() {
        // Every permuted response ŷ_b + P e_b is refitted from scratch and correlated with e_a; b counts
        // |r*| ≥ |r| per pair and for the max over pairs. With B = 39 the rules (b + 1)/(B + 1), b/B and
        // (b + 1)/B differ by at least 1/1560 whenever b < B, far above the 1e-12 tolerance.
        let n = 24;
        let m = 3;
        let base = noise(n, m, 21);
        // Moderate dependence on column 0 so that the counts are neither 0 nor B.
        let mix = |j: usize, weight: f64| -> Vec<f64> {
            base.col(j)
                .iter()
                .zip(base.col(0))
                .map(|(y, x)| y + weight * x)
                .collect()
        };
        let (second, third) = (mix(1, 0.25), mix(2, 0.4));
        let scores = Mat::from_columns(n, &[base.col(0), &second, &third]).unwrap();
        let covar = noise(n, 2, 22);
        let permutations = 39u64;
        let seed = 17;
        let residualiser = LinearResidualiser::new(&covar, "covar").unwrap();
        let residuals: Vec<Vec<f64>> = (0..m)
            .map(|j| {
                let mut e = vec![0.0; n];
                residualiser.residualise_into(scores.col(j), &mut e);
                e
            })
            .collect();
        let observed =
            |a: usize, b: usize| crate::pcor::correlation_of_centred(&residuals[a], &residuals[b]).abs();
        // Two blocks of 12 and circular shifts draw the identity often (1/2, 1/48): its r* equals r up to
        // rounding and must count, which the tie tolerance guarantees.
        for scheme in [
            PermutationScheme::Free,
            PermutationScheme::Block { length: 5 },
            PermutationScheme::Block { length: 12 },
            PermutationScheme::Circular { mirror: true },
        ] {
            let mut pairwise = vec![0u64; m * m];
            let mut family_wise = vec![0u64; m * m];
            let mut order = vec![0; n];
            for index in 0..permutations {
                permutation_into(n, scheme, seed, index, &mut order);
                let mut r_star = vec![0.0; m * m];
                for b in 1..m {
                    let fitted: Vec<f64> = scores
                        .col(b)
                        .iter()
                        .zip(&residuals[b])
                        .map(|(y, e)| y - e)
                        .collect();
                    let y_star: Vec<f64> = (0..n).map(|i| fitted[i] + residuals[b][order[i]]).collect();
                    let mut e_star = vec![0.0; n];
                    residualiser.residualise_into(&y_star, &mut e_star);
                    for a in 0..b {
                        r_star[a * m + b] = crate::pcor::correlation_of_centred(&residuals[a], &e_star).abs();
                    }
                }
                let largest = r_star.iter().copied().fold(0.0, f64::max);
                for a in 0..m {
                    for b in (a + 1)..m {
                        let threshold = observed(a, b) * (1.0 - TIE_TOLERANCE);
                        pairwise[a * m + b] += u64::from(r_star[a * m + b] >= threshold);
                        family_wise[a * m + b] += u64::from(largest >= threshold);
                    }
                }
            }
            // The data must make the rules distinguishable: some count strictly between 0 and B.
            assert!(
                pairwise.iter().any(|&c| c > 0 && c < permutations),
                "{scheme:?}: {pairwise:?}"
            );
            let run = PreparedRun::linear(&scores, &covar, Method::Pearson, scheme).unwrap();
            let (p, p_fwer) = p_values(&count_exceedances(&run, seed, 0..permutations), m);
            let denominator = permutations as f64 + 1.0;
            for a in 0..m {
                for b in (a + 1)..m {
                    let want = (pairwise[a * m + b] as f64 + 1.0) / denominator;
                    let want_fwer = (family_wise[a * m + b] as f64 + 1.0) / denominator;
                    let what = format!("{scheme:?}: ");
                    assert_p_values(&p, &p_fwer, (a, b), (want, want_fwer), 1e-12, &what);
                }
            }
        }
    }

    #[test]
    fn block_length_sets_the_p_value_of_a_perfect_correlation() {
        // Two identical columns (r = 1): a permutation reaches |r| only when it is the identity. Blocks of
        // length L in n = 12 make 12/L blocks put in random order, so the identity has probability 1/(12/L)!
        // and p ≈ 1/2, 1/6, 1/24, 1/720 for L = 6, 4, 3, 2; a free permutation is the identity with
        // probability 1/12!, a circular shift 1/12, a mirrored circular shift 1/24. Each count is checked
        // within 4.5 binomial standard deviations (deterministic for the seed), so using another block
        // length than the one asked for (the default ⌈12^⅓⌉ = 3, or free) fails.
        let n = 12;
        let permutations = 2400u64;
        let x = noise(n, 1, 31);
        let scores = Mat::from_columns(n, &[x.col(0), x.col(0)]).unwrap();
        let covar = noise(n, 1, 32);
        let cases = [
            (PermutationScheme::Block { length: 6 }, 1.0 / 2.0),
            (PermutationScheme::Block { length: 4 }, 1.0 / 6.0),
            (PermutationScheme::Block { length: 3 }, 1.0 / 24.0),
            (PermutationScheme::Block { length: 2 }, 1.0 / 720.0),
            (PermutationScheme::Free, 1.0 / 479_001_600.0),
            (PermutationScheme::Circular { mirror: false }, 1.0 / 12.0),
            (PermutationScheme::Circular { mirror: true }, 1.0 / 24.0),
        ];
        for (scheme, identity) in cases {
            let run = PreparedRun::linear(&scores, &covar, Method::Pearson, scheme).unwrap();
            let counts = count_exceedances(&run, 8, 0..permutations);
            let (p, _) = p_values(&counts, 2);
            let b = counts.pairwise[1] as f64;
            let expected = permutations as f64 * identity;
            let sd = (permutations as f64 * identity * (1.0 - identity)).sqrt();
            assert!(
                (b - expected).abs() <= 4.5 * sd + 1.0,
                "{scheme:?}: {b} of {permutations} reached r = 1, expected {expected:.1} ± {sd:.1}"
            );
            assert!((p.get(0, 1) - (b + 1.0) / (permutations as f64 + 1.0)).abs() < 1e-15);
        }
    }
}
