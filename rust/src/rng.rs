//! Seeded random streams and the index arrays of permutations and bootstrap resamples.
//!
//! Every permutation or resample has its own stream, derived from `(seed, purpose, index)` by SplitMix64, so
//! the i-th permutation is the same whichever thread draws it and however the work is split: results depend
//! on the seed alone, never on the thread count. The generator is xoshiro256++ (Blackman & Vigna, 2021);
//! bounded integers use Lemire's (2019) unbiased multiply-and-reject method.

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
    pub fn parse(name: &str, block_length: Option<usize>, mirror: bool, n: usize) -> Result<Self> {
        match name {
            "free" => Ok(PermutationScheme::Free),
            "block" => {
                let length = block_length.unwrap_or_else(|| default_block_length(n));
                check_block_length(length, n)?;
                check_several_blocks(length, n, "every permutation is the identity and p = 1")?;
                Ok(PermutationScheme::Block { length })
            }
            "circular" => Ok(PermutationScheme::Circular { mirror }),
            other => Err(StatsError::invalid(
                "scheme",
                format!("unknown permutation scheme {other:?}; expected \"free\", \"block\" or \"circular\""),
            )),
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
    pub fn parse(name: &str, block_length: Option<usize>, n: usize) -> Result<Self> {
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
        match name {
            "iid" => Ok(BootstrapScheme::Iid),
            "block" | "moving" => Ok(BootstrapScheme::MovingBlock { length: length()? }),
            "circular" => Ok(BootstrapScheme::CircularBlock { length: length()? }),
            other => Err(StatsError::invalid(
                "scheme",
                format!("unknown bootstrap scheme {other:?}; expected \"iid\", \"block\" or \"circular\""),
            )),
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
}
