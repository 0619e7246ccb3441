//! Seeded random streams and the index arrays of permutations and bootstrap resamples.
//!
//! Every permutation or resample has its own stream, derived from `(seed, purpose, index)` by SplitMix64, so
//! the i-th permutation is the same whichever thread draws it and however the work is split: results depend
//! on the seed alone, never on the thread count. The generator is xoshiro256++ (Blackman & Vigna, 2021);
//! bounded integers use Lemire's (2019) unbiased multiply-and-reject method.

use crate::choice::Choice;
use crate::error::{Result, StatsError};

/// What a stream is for, so that permutation i and bootstrap replicate i never share random numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Permutation = 1,
    Bootstrap = 2,
    Simulation = 3,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256++ with a SplitMix64-expanded seed.
#[derive(Debug, Clone)]
pub struct Xoshiro256pp {
    s: [u64; 4],
}

impl Xoshiro256pp {
    pub fn seed_from_u64(seed: u64) -> Self {
        let mut state = seed;
        let s = [
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
        ];
        Xoshiro256pp { s }
    }

    /// The stream of the `index`-th draw for `purpose` under `seed`.
    pub fn stream(seed: u64, purpose: Purpose, index: u64) -> Self {
        let mut state = seed;
        let base = splitmix64(&mut state);
        let mut mixed = base ^ (purpose as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let tag = splitmix64(&mut mixed) ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Self::seed_from_u64(tag)
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = (self.s[0].wrapping_add(self.s[3]))
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, bound), bound > 0, without modulo bias.
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        let mut product = (self.next_u64() as u128) * (bound as u128);
        let mut low = product as u64;
        if low < bound {
            let threshold = bound.wrapping_neg() % bound;
            while low < threshold {
                product = (self.next_u64() as u128) * (bound as u128);
                low = product as u64;
            }
        }
        (product >> 64) as u64
    }

    /// Standard normal draw (Box–Muller; one of the pair is discarded to keep streams simple).
    pub fn next_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Fisher–Yates shuffle in place.
    pub fn shuffle<T>(&mut self, values: &mut [T]) {
        for i in (1..values.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            values.swap(i, j);
        }
    }
}

/// The permutation scheme an option names: [`PermutationScheme`] before its block length is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermutationKind {
    Free,
    Block,
    Circular,
}

impl Choice for PermutationKind {
    const OPTION: &'static str = "scheme";
    const WHAT: &'static str = "permutation scheme";
    const NAMES: &'static [(&'static str, Self)] = &[
        ("free", PermutationKind::Free),
        ("block", PermutationKind::Block),
        ("circular", PermutationKind::Circular),
    ];
}

/// The bootstrap scheme an option names: [`BootstrapScheme`] before its block length is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapKind {
    Iid,
    MovingBlock,
    CircularBlock,
}

impl Choice for BootstrapKind {
    const OPTION: &'static str = "scheme";
    const WHAT: &'static str = "bootstrap scheme";
    const NAMES: &'static [(&'static str, Self)] = &[
        ("iid", BootstrapKind::Iid),
        ("block", BootstrapKind::MovingBlock),
        ("circular", BootstrapKind::CircularBlock),
    ];
    const ALIASES: &'static [(&'static str, Self)] = &[("moving", BootstrapKind::MovingBlock)];
}

/// How checkpoints are permuted. Trajectories are autocorrelated, so exchanging single checkpoints (free)
/// breaks the dependence the null distribution should keep; blocks and circular shifts preserve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermutationScheme {
    /// Any permutation of the n checkpoints.
    Free,
    /// Contiguous blocks of `length` checkpoints (the last may be shorter) put in random order.
    Block { length: usize },
    /// A random circular shift; with `mirror`, also reversed with probability ½.
    Circular { mirror: bool },
}

/// How checkpoints are resampled for the bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapScheme {
    /// n checkpoints drawn with replacement.
    Iid,
    /// Moving blocks (Künsch, 1989): blocks of `length` consecutive checkpoints starting anywhere in
    /// [0, n − length], concatenated and cut to n.
    MovingBlock { length: usize },
    /// Circular blocks (Politis & Romano, 1992): like moving blocks, but a block may wrap around the end.
    CircularBlock { length: usize },
}

/// The default block length, ⌈n^{1/3}⌉, the rate-optimal order for block resampling (Hall, Horowitz & Jing,
/// 1995).
pub fn default_block_length(n: usize) -> usize {
    ((n as f64).cbrt().ceil() as usize).clamp(1, n.max(1))
}

pub fn check_block_length(length: usize, n: usize) -> Result<()> {
    if length == 0 || length > n {
        return Err(StatsError::invalid(
            "block_length",
            format!("must be between 1 and the number of checkpoints ({n}), got {length}"),
        ));
    }
    Ok(())
}

/// Refuses a block as long as the series: a single block leaves nothing to resample, so a test or an interval
/// would come out degenerate (p = 1, a zero-width interval) without saying why.
fn check_several_blocks(length: usize, n: usize, consequence: &str) -> Result<()> {
    if n > 1 && length >= n {
        return Err(StatsError::invalid(
            "block_length",
            format!(
                "{length} makes one block of all {n} checkpoints, so {consequence}; use a block length below \
                 {n} (default {})",
                default_block_length(n)
            ),
        ));
    }
    Ok(())
}

impl PermutationScheme {
    /// The scheme `kind` for `n` checkpoints: blocks of `block_length` (None: the default for n), circular
    /// shifts mirrored with `mirror`.
    pub fn new(kind: PermutationKind, block_length: Option<usize>, mirror: bool, n: usize) -> Result<Self> {
        match kind {
            PermutationKind::Free => Ok(PermutationScheme::Free),
            PermutationKind::Block => {
                let length = block_length.unwrap_or_else(|| default_block_length(n));
                check_block_length(length, n)?;
                check_several_blocks(length, n, "every permutation is the identity and p = 1")?;
                Ok(PermutationScheme::Block { length })
            }
            PermutationKind::Circular => Ok(PermutationScheme::Circular { mirror }),
        }
    }

    pub fn block_length(&self) -> Option<usize> {
        match self {
            PermutationScheme::Block { length } => Some(*length),
            _ => None,
        }
    }
}

impl BootstrapScheme {
    /// The scheme `kind` for `n` checkpoints, with blocks of `block_length` (None: the default for n).
    pub fn new(kind: BootstrapKind, block_length: Option<usize>, n: usize) -> Result<Self> {
        let length = || -> Result<usize> {
            let length = block_length.unwrap_or_else(|| default_block_length(n));
            check_block_length(length, n)?;
            check_several_blocks(
                length,
                n,
                "every replicate is the data itself (or a rotation of it)",
            )?;
            Ok(length)
        };
        match kind {
            BootstrapKind::Iid => Ok(BootstrapScheme::Iid),
            BootstrapKind::MovingBlock => Ok(BootstrapScheme::MovingBlock { length: length()? }),
            BootstrapKind::CircularBlock => Ok(BootstrapScheme::CircularBlock { length: length()? }),
        }
    }

    pub fn block_length(&self) -> Option<usize> {
        match self {
            BootstrapScheme::Iid => None,
            BootstrapScheme::MovingBlock { length } | BootstrapScheme::CircularBlock { length } => {
                Some(*length)
            }
        }
    }
}

/// The `index`-th permutation of `0..n` under `scheme` and `seed`, written into `out` (length n).
pub fn permutation_into(n: usize, scheme: PermutationScheme, seed: u64, index: u64, out: &mut [usize]) {
    let mut rng = Xoshiro256pp::stream(seed, Purpose::Permutation, index);
    match scheme {
        PermutationScheme::Free => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = i;
            }
            rng.shuffle(out);
        }
        PermutationScheme::Block { length } => {
            let blocks = n.div_ceil(length);
            let mut order: Vec<usize> = (0..blocks).collect();
            rng.shuffle(&mut order);
            let mut position = 0;
            for block in order {
                let start = block * length;
                let end = (start + length).min(n);
                for i in start..end {
                    out[position] = i;
                    position += 1;
                }
            }
        }
        PermutationScheme::Circular { mirror } => {
            let shift = rng.below(n as u64) as usize;
            let reverse = mirror && rng.below(2) == 1;
            for (j, o) in out.iter_mut().enumerate() {
                *o = if reverse {
                    (shift + n - j) % n
                } else {
                    (shift + j) % n
                };
            }
        }
    }
}

/// The `index`-th bootstrap resample of row indices under `scheme` and `seed`, written into `out` (length n).
pub fn bootstrap_into(n: usize, scheme: BootstrapScheme, seed: u64, index: u64, out: &mut [usize]) {
    let mut rng = Xoshiro256pp::stream(seed, Purpose::Bootstrap, index);
    match scheme {
        BootstrapScheme::Iid => {
            for o in out.iter_mut() {
                *o = rng.below(n as u64) as usize;
            }
        }
        BootstrapScheme::MovingBlock { length } => {
            let starts = (n - length + 1) as u64;
            let mut position = 0;
            while position < n {
                let start = rng.below(starts) as usize;
                for offset in 0..length.min(n - position) {
                    out[position] = start + offset;
                    position += 1;
                }
            }
        }
        BootstrapScheme::CircularBlock { length } => {
            let mut position = 0;
            while position < n {
                let start = rng.below(n as u64) as usize;
                for offset in 0..length.min(n - position) {
                    out[position] = (start + offset) % n;
                    position += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xoshiro_reference_output() {
        // Reference: xoshiro256plusplus.c with s = {1, 2, 3, 4}: first output 41943041.
        let mut rng = Xoshiro256pp { s: [1, 2, 3, 4] };
        assert_eq!(rng.next_u64(), 41_943_041);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut rng = Xoshiro256pp::seed_from_u64(7);
        let mut counts = [0usize; 6];
        for _ in 0..60_000 {
            counts[rng.below(6) as usize] += 1;
        }
        for c in counts {
            assert!((9_400..10_600).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn permutations_are_permutations_and_reproducible() {
        let n = 10;
        for scheme in [
            PermutationScheme::Free,
            PermutationScheme::Block { length: 3 },
            PermutationScheme::Circular { mirror: true },
        ] {
            let mut a = vec![0; n];
            let mut b = vec![0; n];
            permutation_into(n, scheme, 42, 5, &mut a);
            permutation_into(n, scheme, 42, 5, &mut b);
            assert_eq!(a, b);
            let mut sorted = a.clone();
            sorted.sort();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn block_permutation_keeps_blocks_contiguous() {
        let mut out = vec![0; 7];
        permutation_into(7, PermutationScheme::Block { length: 3 }, 1, 0, &mut out);
        // blocks {0,1,2}, {3,4,5}, {6}: every block appears as a run of consecutive indices
        let mut i = 0;
        while i < 7 {
            let start = out[i];
            let len = if start == 6 { 1 } else { 3 };
            assert_eq!(start % 3, 0);
            for off in 0..len {
                assert_eq!(out[i + off], start + off);
            }
            i += len;
        }
    }

    #[test]
    fn bootstrap_blocks_are_consecutive() {
        let mut out = vec![0; 9];
        bootstrap_into(9, BootstrapScheme::MovingBlock { length: 3 }, 3, 2, &mut out);
        for block in out.chunks(3) {
            assert!(block[0] <= 6);
            assert_eq!(block[1], block[0] + 1);
            assert_eq!(block[2], block[0] + 2);
        }
    }

    /// Realistic series lengths with ⌈n^⅓⌉ worked out by hand: cubes (where a cube root that came out a hair
    /// above the integer would round the block length up by one) and lengths whose cube root lies just above an
    /// integer (where rounding to nearest would round down).
    const SIZES: [(usize, usize); 11] = [
        (27, 3),
        (30, 4),
        (50, 4),
        (64, 4),
        (100, 5),
        (130, 6),
        (200, 6),
        (343, 7),
        (500, 8),
        (730, 10),
        (1000, 10),
    ];

    /// Each size with the default block length and with the default + 2, so that a generator that ignores
    /// the length it is given (and uses the default) fails.
    fn sizes_and_lengths() -> Vec<(usize, usize)> {
        SIZES
            .iter()
            .flat_map(|&(n, length)| [(n, length), (n, length + 2)])
            .collect()
    }

    /// Pearson's χ² of `counts` against cells of probability ∝ `weights` must stay below df + 6·√(2 df) (about
    /// 6 standard deviations of the statistic): loose enough for any honest seed, tight enough for a cell that
    /// is never or always hit; and every cell must be hit.
    fn assert_fits(counts: &[u64], weights: &[u64], what: &str) {
        let total = counts.iter().sum::<u64>() as f64;
        let weight = weights.iter().sum::<u64>() as f64;
        let mut chi2 = 0.0;
        for (&c, &w) in counts.iter().zip(weights) {
            let expected = total * w as f64 / weight;
            assert!(expected >= 10.0, "{what}: too few draws for the χ² check");
            chi2 += (c as f64 - expected).powi(2) / expected;
        }
        let df = (counts.len() - 1) as f64;
        assert!(
            chi2 < df + 6.0 * (2.0 * df).sqrt(),
            "{what}: χ² = {chi2:.1} on {df} df"
        );
        assert!(
            counts.iter().all(|&c| c > 0),
            "{what}: a cell is never drawn: {counts:?}"
        );
    }

    fn assert_uniform(counts: &[u64], what: &str) {
        assert_fits(counts, &vec![1; counts.len()], what);
    }

    fn assert_within(count: f64, expected: f64, sd: f64, what: &str) {
        assert!(
            (count - expected).abs() <= 5.0 * sd,
            "{what}: {count} vs {expected:.1} ± {sd:.1}"
        );
    }

    #[test]
    fn default_block_length_is_the_rounded_up_cube_root() {
        for (n, length) in SIZES {
            assert_eq!(default_block_length(n), length, "n = {n}");
        }
    }

    #[test]
    fn free_permutations_at_realistic_sizes() {
        // A uniform permutation has one fixed point on average (variance 1); out[0] and out[n − 1] are uniform
        // (checked in 20 bins of near-equal size, ⌊20 i / n⌋).
        let draws = 2000u64;
        for (n, _) in SIZES {
            let bin = |i: usize| 20 * i / n;
            let mut bin_sizes = vec![0u64; 20];
            (0..n).for_each(|i| bin_sizes[bin(i)] += 1);
            let mut out = vec![0; n];
            let mut fixed_points = 0u64;
            let mut first = vec![0u64; 20];
            let mut last = vec![0u64; 20];
            let mut seen = vec![false; n];
            for index in 0..draws {
                permutation_into(n, PermutationScheme::Free, 5, index, &mut out);
                seen.iter_mut().for_each(|s| *s = false);
                for &i in &out {
                    assert!(i < n && !seen[i], "n = {n}: not a permutation");
                    seen[i] = true;
                }
                fixed_points += out.iter().enumerate().filter(|&(j, &i)| i == j).count() as u64;
                first[bin(out[0])] += 1;
                last[bin(out[n - 1])] += 1;
            }
            let expected = draws as f64;
            assert_within(fixed_points as f64, expected, expected.sqrt(), "fixed points");
            assert_fits(&first, &bin_sizes, &format!("free, n = {n}: out[0]"));
            assert_fits(&last, &bin_sizes, &format!("free, n = {n}: out[n - 1]"));
        }
    }

    #[test]
    fn block_permutations_keep_every_block_whole_at_realistic_sizes() {
        for (n, length) in sizes_and_lengths() {
            let blocks = n.div_ceil(length);
            let mut out = vec![0; n];
            let mut first_block = vec![0u64; blocks];
            let mut identity = 0u64;
            for index in 0..(20 * blocks as u64) {
                permutation_into(n, PermutationScheme::Block { length }, 6, index, &mut out);
                // Walk the output block by block: each starts at a multiple of the length, runs on
                // consecutively to its end (the last block of the series is the short one), and appears once.
                let mut used = vec![false; blocks];
                let mut position = 0;
                while position < n {
                    let start = out[position];
                    assert_eq!(
                        start % length,
                        0,
                        "n = {n}, L = {length}: block starts at {start}"
                    );
                    let block = start / length;
                    assert!(block < blocks && !used[block], "n = {n}: block {block} twice");
                    used[block] = true;
                    let end = (start + length).min(n);
                    assert!(
                        (start..end).zip(&out[position..]).all(|(want, &got)| want == got),
                        "n = {n}, L = {length}: block {block} broken"
                    );
                    position += end - start;
                }
                assert!(used.iter().all(|&u| u));
                first_block[out[0] / length] += 1;
                identity += u64::from(out.iter().enumerate().all(|(j, &i)| i == j));
            }
            assert_uniform(
                &first_block,
                &format!("block, n = {n}, L = {length}: first block"),
            );
            assert_eq!(identity, 0, "n = {n}: {blocks} blocks left in place");
        }
    }

    #[test]
    fn circular_permutations_are_rotations_at_realistic_sizes() {
        for (n, _) in SIZES {
            for mirror in [false, true] {
                // Ten draws per shift: every one of the n shifts must come up.
                let draws = 10 * n as u64;
                let mut shifts = vec![0u64; n];
                let mut reversed = 0u64;
                let mut out = vec![0; n];
                for index in 0..draws {
                    permutation_into(n, PermutationScheme::Circular { mirror }, 7, index, &mut out);
                    let shift = out[0];
                    // out[1] tells a rotation from a reflection; the whole array is checked on the first 100.
                    let rotation = out[1] == (shift + 1) % n;
                    if index < 100 {
                        let forward = (0..n).all(|j| out[j] == (shift + j) % n);
                        let backward = (0..n).all(|j| out[j] == (shift + n - j) % n);
                        assert!(
                            forward == rotation && (forward || backward),
                            "n = {n}: {out:?} is no rotation"
                        );
                    }
                    reversed += u64::from(!rotation);
                    shifts[shift] += 1;
                }
                assert_uniform(&shifts, &format!("circular, n = {n}, mirror = {mirror}: shift"));
                if mirror {
                    let half = draws as f64 / 2.0;
                    assert_within(reversed as f64, half, (half / 2.0).sqrt(), "reversed");
                } else {
                    assert_eq!(reversed, 0);
                }
            }
        }
    }

    #[test]
    fn iid_bootstrap_at_realistic_sizes() {
        // Each index is drawn R times in all over R resamples, and is missing from a resample with
        // probability (1 − 1/n)^n ≈ e⁻¹.
        let draws = 100u64;
        for (n, _) in SIZES {
            let mut out = vec![0; n];
            let mut counts = vec![0u64; n];
            let mut here = vec![0u64; n];
            let mut missing = 0u64;
            for index in 0..draws {
                bootstrap_into(n, BootstrapScheme::Iid, 8, index, &mut out);
                here.iter_mut().for_each(|c| *c = 0);
                for &i in &out {
                    assert!(i < n);
                    here[i] += 1;
                }
                missing += here.iter().filter(|&&c| c == 0).count() as u64;
                for (total, c) in counts.iter_mut().zip(&here) {
                    *total += c;
                }
            }
            assert_uniform(&counts, &format!("iid, n = {n}"));
            let q = (1.0 - 1.0 / n as f64).powi(n as i32);
            let cells = (draws * n as u64) as f64;
            // Missing indices of one resample are negatively correlated, so the binomial sd is an upper bound.
            assert_within(
                missing as f64,
                cells * q,
                (cells * q * (1.0 - q)).sqrt(),
                "missing",
            );
        }
    }

    #[test]
    fn moving_blocks_at_realistic_sizes() {
        for (n, length) in sizes_and_lengths() {
            let starts = n - length + 1;
            let blocks = n.div_ceil(length);
            let mut start_counts = vec![0u64; starts];
            let mut out = vec![0; n];
            for index in 0..(20 * starts as u64).div_ceil(blocks as u64) {
                bootstrap_into(n, BootstrapScheme::MovingBlock { length }, 9, index, &mut out);
                // Blocks sit at positions 0, L, 2L, …; each is L consecutive checkpoints (the last one cut at
                // n) starting anywhere in [0, n − L].
                assert_eq!(out.chunks(length).count(), blocks);
                for chunk in out.chunks(length) {
                    let start = chunk[0];
                    assert!(start < starts, "n = {n}, L = {length}: start {start}");
                    for (offset, &i) in chunk.iter().enumerate() {
                        assert_eq!(i, start + offset, "n = {n}, L = {length}: {chunk:?}");
                    }
                    start_counts[start] += 1;
                }
            }
            assert_uniform(
                &start_counts,
                &format!("moving blocks, n = {n}, L = {length}: starts"),
            );
        }
    }

    #[test]
    fn circular_blocks_at_realistic_sizes() {
        for (n, length) in sizes_and_lengths() {
            let blocks = n.div_ceil(length);
            let mut start_counts = vec![0u64; n];
            let mut wrapped = 0u64;
            // A block of c checkpoints wraps when it starts in the last c − 1 positions: probability (c − 1)/n.
            let (mut expected_wraps, mut variance) = (0.0, 0.0);
            let mut out = vec![0; n];
            for index in 0..(20 * n as u64).div_ceil(blocks as u64) {
                bootstrap_into(n, BootstrapScheme::CircularBlock { length }, 10, index, &mut out);
                // Blocks may start anywhere and wrap from n − 1 to 0.
                for chunk in out.chunks(length) {
                    let start = chunk[0];
                    assert!(start < n);
                    for (offset, &i) in chunk.iter().enumerate() {
                        assert_eq!(i, (start + offset) % n, "n = {n}, L = {length}: {chunk:?}");
                    }
                    start_counts[start] += 1;
                    wrapped += u64::from(start + chunk.len() > n);
                    let share = (chunk.len() - 1) as f64 / n as f64;
                    expected_wraps += share;
                    variance += share * (1.0 - share);
                }
            }
            assert_uniform(
                &start_counts,
                &format!("circular blocks, n = {n}, L = {length}: starts"),
            );
            assert_within(wrapped as f64, expected_wraps, variance.sqrt(), "wrapped");
        }
    }
}
