//! Tests of [`crate::sieve`]: the AR recursion by hand, and the replicate kernel against a dense reference for
//! any thread count.

use super::*;

#[test]
fn ar1_recursion_by_hand() {
    // x_1 = 1 + 0.5·2 = 2, x_2 = 0 + 0.5·2 = 1, x_3 = −1 + 0.5·1 = −0.5 (start 2).
    let out = ar_generate(&[0.5], 1, 1, &[1.0, 0.0, -1.0], 1, 3, &[2.0], 2).unwrap();
    assert_eq!(out, vec![1.0, -0.5]);
}

#[test]
fn ar2_per_series_coefficients_and_zero_start() {
    // series 0: AR(2) (1, −0.5) from zero; series 1: white (0, 0).
    let shocks = [1.0, 0.0, 0.0, 0.0, 3.0, 4.0, 5.0, 6.0];
    let out = ar_generate(&[1.0, -0.5, 0.0, 0.0], 2, 2, &shocks, 1, 4, &[], 4).unwrap();
    // x = 1, 1, 0.5, 0 for series 0.
    assert_eq!(out, vec![1.0, 1.0, 0.5, 0.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn shapes_are_checked() {
    assert!(ar_generate(&[0.5], 1, 1, &[1.0, 2.0], 1, 3, &[], 2).is_err());
    assert!(ar_generate(&[0.5], 1, 1, &[1.0, 2.0, 3.0], 1, 3, &[], 4).is_err());
    assert!(ar_generate(&[f64::NAN], 1, 1, &[1.0, 2.0, 3.0], 1, 3, &[], 2).is_err());
}

/// A small deterministic generator for test data (xorshift64*, uniform in (−1, 1)).
fn values(count: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let bits = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
            bits as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// The moments as the Python reference computes them: dense operators `I − U M_j Uᵀ`, one replicate at
/// a time, through `ar_generate`.
// The dense reference, written index by index on purpose (it mirrors the formula, not the kernel).
#[allow(clippy::needless_range_loop)]
fn reference(model: &SieveModel<'_>, picks: &[i64], start: &[f64], replicates: usize) -> Vec<f64> {
    let (m, n, p, r, steps) = (model.ar.m, model.ar.n, model.ar.p, model.ar.r, model.ar.steps);
    let mut shocks = vec![0.0; replicates * m * steps];
    let mut white = vec![0.0; replicates * m * n];
    for b in 0..replicates {
        for j in 0..m {
            for s in 0..steps {
                let value = model.pool[j * model.pool_len + picks[b * steps + s] as usize];
                shocks[(b * m + j) * steps + s] = value * model.spread[j * steps + s];
                if s >= steps - n {
                    white[(b * m + j) * n + s - (steps - n)] = value;
                }
            }
        }
    }
    let generated = ar_generate(model.ar.coef, m, p, &shocks, replicates, steps, start, n).unwrap();
    let mut out = vec![0.0; 4 * m * m];
    for (slot, data) in [(0, &generated), (2, &white)] {
        for b in 0..replicates {
            let mut units = vec![vec![0.0; n]; m];
            for j in 0..m {
                let x = &data[(b * m + j) * n..(b * m + j + 1) * n];
                let mix = &model.ar.mix[j * r * r..(j + 1) * r * r];
                let mut e = x.to_vec();
                for s in 0..n {
                    for t in 0..n {
                        let mut h = 0.0;
                        for i in 0..r {
                            for k in 0..r {
                                h += model.ar.basis[s * r + i] * mix[i * r + k] * model.ar.basis[t * r + k];
                            }
                        }
                        e[s] -= h * x[t];
                    }
                }
                let mean = e.iter().sum::<f64>() / n as f64;
                let norm = e.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>().sqrt();
                units[j] = e.iter().map(|v| (v - mean) / norm).collect();
            }
            for a in 0..m {
                for c in 0..m {
                    // r = 1 on the diagonal by definition (the kernel does not sum it).
                    let r_ac: f64 = if a == c {
                        1.0
                    } else {
                        units[a].iter().zip(&units[c]).map(|(x, y)| x * y).sum()
                    };
                    let z = r_ac.clamp(-1.0 + 1e-15, 1.0 - 1e-15).atanh();
                    out[slot * m * m + a * m + c] += z;
                    out[(slot + 1) * m * m + a * m + c] += z * z;
                }
            }
        }
    }
    out
}

#[test]
fn sieve_moments_equal_the_dense_reference_and_ignore_the_thread_count() {
    let (m, n, p, r, steps, pool_len, replicates) = (11, 13, 2, 3, 20, 9, 19);
    let coef: Vec<f64> = values(m * p, 1).iter().map(|v| 0.4 * v).collect();
    let pool = values(m * pool_len, 2);
    let spread: Vec<f64> = values(m * steps, 3).iter().map(|v| 1.0 + 0.5 * v).collect();
    let basis = values(n * r, 4);
    let mix: Vec<f64> = values(m * r * r, 5).iter().map(|v| 0.1 * v).collect();
    let start = values(replicates * m * p, 6);
    let picks: Vec<i64> = values(replicates * steps, 7)
        .iter()
        .map(|v| {
            ((v + 1.0) * 0.5 * pool_len as f64)
                .floor()
                .min(pool_len as f64 - 1.0) as i64
        })
        .collect();
    let model = SieveModel {
        ar: ArControl {
            m,
            n,
            p,
            steps,
            coef: &coef,
            basis: &basis,
            r,
            mix: &mix,
        },
        pool: &pool,
        pool_len,
        spread: &spread,
    };
    let expected = reference(&model, &picks, &start, replicates);
    let got = sieve_moments(&model, Chunk::new(&picks, &start, replicates)).unwrap();
    for (index, (a, b)) in got.iter().zip(&expected).enumerate() {
        assert!(
            (a - b).abs() <= 1e-11 * (1.0 + b.abs()),
            "entry {index}: {a} vs {b}"
        );
    }
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let again = pool.install(|| sieve_moments(&model, Chunk::new(&picks, &start, replicates)).unwrap());
        assert_eq!(again, got, "{threads} threads");
    }
    // Without a start the recursion starts from zeros, as ar_generate's does.
    let zero_start = reference(&model, &picks, &[], replicates);
    let got = sieve_moments(&model, Chunk::new(&picks, &[], replicates)).unwrap();
    for (a, b) in got.iter().zip(&zero_start) {
        assert!((a - b).abs() <= 1e-11 * (1.0 + b.abs()));
    }
}

#[test]
fn sieve_moments_check_their_inputs() {
    let (coef, pool, spread, basis, mix) = ([0.5], [1.0, -1.0, 0.5], [1.0; 4], [0.5; 3], [0.0]);
    let model = SieveModel {
        ar: ArControl {
            m: 1,
            n: 3,
            p: 1,
            steps: 4,
            coef: &coef,
            basis: &basis,
            r: 1,
            mix: &mix,
        },
        pool: &pool,
        pool_len: 3,
        spread: &spread,
    };
    assert!(sieve_moments(&model, Chunk::new(&[0, 1, 2, 0], &[], 1)).is_ok());
    assert!(sieve_moments(&model, Chunk::new(&[0, 1, 3, 0], &[], 1)).is_err());
    assert!(sieve_moments(&model, Chunk::new(&[0, 1, 2], &[], 1)).is_err());
    assert!(sieve_moments(&model, Chunk::new(&[0, 1, 2, 0], &[f64::NAN], 1)).is_err());
    let short = SieveModel {
        ar: ArControl { n: 5, ..model.ar },
        ..model
    };
    assert!(sieve_moments(&short, Chunk::new(&[0, 1, 2, 0], &[], 1)).is_err());
}
