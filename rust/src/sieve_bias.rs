//! The AR-sieve's small-sample bias of the AR coefficients, simulated in one pass (`gengen.stats.sieve`).
//!
//! The bias is that of the whole pipeline: generate AR(p) series from the current coefficients, residualise
//! them through the control's operator `I − U M_j Uᵀ`, refit AR(p) by least squares in the dynamic regression
//! `e_t ~ e_{t−1}, …, e_{t−p} + [1, z_t, …, z_{t−p}]`. Python draws the shocks and the stationary starts (so
//! the random numbers are numpy's); here each task runs [`LANES`] replicates of one series side by side,
//! time-major with one lane per replicate, so that every step of the recursion, the residualisation and the
//! regression vectorises across replicates. Only the sums of the refitted coefficients come back. Tasks are
//! fixed (series, block of replicates) pairs summed in block order, so the sums do not depend on the thread
//! count.

use rayon::prelude::*;

use crate::error::StatsError;
use crate::fast_kernel::with_avx2;
use crate::sieve::{ArControl, Chunk};

/// Replicates of one series processed side by side (two AVX2 registers).
const LANES: usize = 8;

type Lane = [f64; LANES];

/// The AR models, the control's residual operators and the bases of the regressions' exogenous terms.
#[derive(Debug, Clone, Copy)]
pub struct BiasModel<'a> {
    /// The AR models that generate (`p`: the largest order, and the first observation of every refit) and
    /// the control's residual operators.
    pub ar: ArControl<'a>,
    /// Order of each series' refit (0: not refitted).
    pub order: &'a [usize],
    /// `p × (n − p) × q` row-major: at `[o − 1]`, an orthonormal basis of `[1, z_t, …, z_{t−o}]` on rows
    /// `t = p … n − 1`, in its first `exogenous_rank[o − 1]` columns (the rest are ignored).
    pub exogenous: &'a [f64],
    /// Columns of each order's exogenous basis.
    pub q: usize,
    /// Rank of each order's exogenous basis (`p` values, each at most `q`).
    pub exogenous_rank: &'a [usize],
}

/// Sums over replicates of the refitted AR coefficients of every series, `m × p` row-major (zero past a
/// series' order, and for series of order 0).
///
/// Replicate `b` of series `j` is `x_s = shocks[b, j, s] + Σ_l coef[j, l] x_{s−1−l}` for `s < steps`,
/// started from `start[b, j, ·]` (the `p` values before the first shock, oldest first; zeros when `start` is
/// empty), exactly as [`crate::sieve::ar_generate`] runs it. Its last `n` values are residualised,
/// `e = (I − U M_j Uᵀ) x`, and AR(`order[j]`) is refitted on `t = p … n − 1`: the target `e_t` and its lags,
/// each with its component in the span of that order's exogenous basis removed, give the normal equations
/// (with a ridge of 1e-13 times their mean diagonal), solved with partial pivoting.
pub fn bias_refit_sums(model: &BiasModel<'_>, chunk: Chunk<'_, f64>) -> Result<Vec<f64>, StatsError> {
    check(model, chunk)?;
    let (shocks, start, replicates) = (chunk.draws, chunk.start, chunk.replicates);
    let (m, p) = (model.ar.m, model.ar.p);
    let blocks = replicates.div_ceil(LANES);
    let tasks: Vec<(usize, usize)> = (0..m)
        .filter(|&j| model.order[j] > 0)
        .flat_map(|j| (0..blocks).map(move |block| (j, block)))
        .collect();
    let draws = Draws { model, shocks, start };
    let mut partial = vec![0.0; tasks.len() * p];
    partial
        .par_chunks_mut(p.max(1))
        .zip(tasks.par_iter())
        .for_each_init(
            || Scratch::new(model),
            |scratch, (out, &(j, block))| {
                let task = Task {
                    series: j,
                    first: block * LANES,
                    count: LANES.min(replicates - block * LANES),
                };
                refit_block(&draws, task, scratch, out);
            },
        );
    let mut sums = vec![0.0; m * p];
    for (&(j, _), values) in tasks.iter().zip(partial.chunks_exact(p.max(1))) {
        for (total, value) in sums[j * p..(j + 1) * p].iter_mut().zip(values) {
            *total += value;
        }
    }
    if sums.iter().any(|value| !value.is_finite()) {
        return Err(StatsError::degenerate(
            "coef",
            "a simulated AR refit has singular normal equations",
        ));
    }
    Ok(sums)
}

fn check(model: &BiasModel<'_>, chunk: Chunk<'_, f64>) -> Result<(), StatsError> {
    let (shocks, start, replicates) = (chunk.draws, chunk.start, chunk.replicates);
    let ar = &model.ar;
    let (m, n, p, q, steps) = (ar.m, ar.n, ar.p, model.q, ar.steps);
    if n <= p + 1 || steps < n {
        return Err(StatsError::invalid(
            "keep",
            format!("need p + 1 < n ≤ steps, got p = {p}, n = {n}, steps = {steps}"),
        ));
    }
    let more = [
        ("order", model.order.len(), m),
        ("exogenous", model.exogenous.len(), p * (n - p) * q),
        ("exogenous_rank", model.exogenous_rank.len(), p),
        ("shocks", shocks.len(), replicates * m * steps),
    ];
    ar.check_shapes(&more, chunk)?;
    if model.order.iter().any(|&order| order > p) || model.exogenous_rank.iter().any(|&rank| rank > q) {
        return Err(StatsError::invalid(
            "order, exogenous_rank",
            format!("orders must be at most {p} and ranks at most {q}"),
        ));
    }
    ar.check_finite(
        &[model.exogenous, shocks, start],
        "coef, basis, mix, exogenous, shocks, start",
    )
}

/// One task: replicates `first .. first + count` of series `series`.
#[derive(Debug, Clone, Copy)]
struct Task {
    series: usize,
    first: usize,
    count: usize,
}

/// One worker's memory, reused across its tasks.
struct Scratch {
    /// `(p + steps)` rows: the recursion's values, the start first.
    series: Vec<Lane>,
    /// `2 r` rows: `Uᵀ x`, then `M_j Uᵀ x`.
    projection: Vec<Lane>,
    regression: Regression,
}

/// The refit's working memory.
struct Regression {
    /// `q × (p + 1)`: the exogenous coordinates of the target and its lags.
    exogenous: Vec<Lane>,
    /// `(p + 1)`: one time point's target and lags, exogenous part removed.
    cleaned: Vec<Lane>,
    /// `(p + 1) × (p + 1)`: their cross-products (upper triangle).
    gram: Vec<Lane>,
    /// `p × p` and `p`: one replicate's normal equations.
    matrix: Vec<f64>,
    rhs: Vec<f64>,
}

impl Scratch {
    fn new(model: &BiasModel<'_>) -> Self {
        let width = model.ar.p + 1;
        Scratch {
            series: vec![[0.0; LANES]; model.ar.p + model.ar.steps],
            projection: vec![[0.0; LANES]; 2 * model.ar.r],
            regression: Regression {
                exogenous: vec![[0.0; LANES]; model.q * width],
                cleaned: vec![[0.0; LANES]; width],
                gram: vec![[0.0; LANES]; width * width],
                matrix: vec![0.0; model.ar.p * model.ar.p],
                rhs: vec![0.0; model.ar.p],
            },
        }
    }
}

/// What a chunk's tasks read: the model and the drawn shocks and starts.
#[derive(Debug, Clone, Copy)]
struct Draws<'a> {
    model: &'a BiasModel<'a>,
    shocks: &'a [f64],
    start: &'a [f64],
}

with_avx2! {
    fn refit_block(draws: &Draws<'_>, task: Task, scratch: &mut Scratch, out: &mut [f64]) => refit_block_generic;
}

#[inline(always)]
fn refit_block_generic(draws: &Draws<'_>, task: Task, scratch: &mut Scratch, out: &mut [f64]) {
    let model = draws.model;
    generate(model, draws.shocks, draws.start, task, &mut scratch.series);
    let (p, steps, n) = (model.ar.p, model.ar.steps, model.ar.n);
    let kept = &mut scratch.series[p + steps - n..];
    residualise(model, task.series, kept, &mut scratch.projection);
    refit(model, task, kept, &mut scratch.regression, out);
}

/// The AR recursion of the task's replicates, in the order of [`crate::sieve::ar_generate`] (same bits).
#[inline(always)]
fn generate(model: &BiasModel<'_>, shocks: &[f64], start: &[f64], task: Task, series: &mut [Lane]) {
    let (m, p, steps) = (model.ar.m, model.ar.p, model.ar.steps);
    for row in series.iter_mut() {
        *row = [0.0; LANES];
    }
    for lane in 0..task.count {
        let replicate = task.first + lane;
        let own = (replicate * m + task.series) * p;
        if !start.is_empty() {
            for (row, &value) in series[..p].iter_mut().zip(&start[own..own + p]) {
                row[lane] = value;
            }
        }
        let driving = &shocks[(replicate * m + task.series) * steps..][..steps];
        for (row, &value) in series[p..].iter_mut().zip(driving) {
            row[lane] = value;
        }
    }
    let phi = &model.ar.coef[task.series * p..(task.series + 1) * p];
    for step in 0..steps {
        let (before, rest) = series.split_at_mut(p + step);
        let mut value = rest[0];
        for (lag, &weight) in phi.iter().enumerate() {
            value = add_scaled(value, weight, &before[p + step - 1 - lag]);
        }
        rest[0] = value;
    }
}

/// `kept ← (I − U M_j Uᵀ) kept` for the `n` kept rows.
#[inline(always)]
fn residualise(model: &BiasModel<'_>, series: usize, kept: &mut [Lane], projection: &mut [Lane]) {
    let r = model.ar.r;
    if r == 0 {
        return; // no control fit: the operator is the identity
    }
    let (coords, mixed) = projection.split_at_mut(r);
    for row in coords.iter_mut() {
        *row = [0.0; LANES];
    }
    for (row, basis) in kept.iter().zip(model.ar.basis.chunks_exact(r)) {
        for (coord, &u) in coords.iter_mut().zip(basis) {
            *coord = add_scaled(*coord, u, row);
        }
    }
    let mix = &model.ar.mix[series * r * r..(series + 1) * r * r];
    for (target, weights) in mixed.iter_mut().zip(mix.chunks_exact(r)) {
        let mut value = [0.0; LANES];
        for (coord, &w) in coords.iter().zip(weights) {
            value = add_scaled(value, w, coord);
        }
        *target = value;
    }
    for (row, basis) in kept.iter_mut().zip(model.ar.basis.chunks_exact(r)) {
        let mut fitted = [0.0; LANES];
        for (coord, &u) in mixed.iter().zip(basis) {
            fitted = add_scaled(fitted, u, coord);
        }
        *row = subtract(*row, &fitted);
    }
}

/// Refits AR(`order`) of the residual series in `kept` (`n` rows) and adds each replicate's coefficients to
/// `out`.
#[inline(always)]
fn refit(model: &BiasModel<'_>, task: Task, kept: &[Lane], scratch: &mut Regression, out: &mut [f64]) {
    let (n, p, q) = (model.ar.n, model.ar.p, model.q);
    let order = model.order[task.series];
    let width = order + 1;
    let count = n - p;
    let rank = model.exogenous_rank[order - 1];
    let basis = &model.exogenous[(order - 1) * count * q..order * count * q];
    // Exogenous coordinates of the target (column 0) and each lag: C[c, i] = Σ_t Q[t, c] e[p + t − i].
    let coords = &mut scratch.exogenous[..rank * width];
    for row in coords.iter_mut() {
        *row = [0.0; LANES];
    }
    for t in 0..count {
        let weights = &basis[t * q..t * q + rank];
        for (c, &w) in weights.iter().enumerate() {
            for i in 0..width {
                coords[c * width + i] = add_scaled(coords[c * width + i], w, &kept[p + t - i]);
            }
        }
    }
    let (cleaned, gram) = (&mut scratch.cleaned[..width], &mut scratch.gram[..width * width]);
    for row in gram.iter_mut() {
        *row = [0.0; LANES];
    }
    for t in 0..count {
        let weights = &basis[t * q..t * q + rank];
        for (i, clean) in cleaned.iter_mut().enumerate() {
            let mut fitted = [0.0; LANES];
            for (c, &w) in weights.iter().enumerate() {
                fitted = add_scaled(fitted, w, &coords[c * width + i]);
            }
            *clean = subtract(kept[p + t - i], &fitted);
        }
        for i in 0..width {
            for k in i.max(1)..width {
                gram[i * width + k] = add_product(gram[i * width + k], &cleaned[i], &cleaned[k]);
            }
        }
    }
    let matrix = &mut scratch.matrix[..order * order];
    let rhs = &mut scratch.rhs[..order];
    for lane in 0..task.count {
        normal_equations(gram, order, lane, matrix, rhs);
        if !solve(matrix, rhs, order) {
            rhs.fill(f64::NAN);
        }
        for (total, value) in out.iter_mut().zip(rhs.iter()) {
            *total += value;
        }
    }
}

/// One replicate's normal equations from the cross-products (`(order + 1)²`, upper triangle; row and column 0
/// the target): the lags' Gram matrix with a ridge of 1e-13 times its mean diagonal, and the lags' products
/// with the target.
fn normal_equations(gram: &[Lane], order: usize, lane: usize, matrix: &mut [f64], rhs: &mut [f64]) {
    let width = order + 1;
    let mut trace = 0.0;
    for (i, target) in rhs.iter_mut().enumerate() {
        *target = gram[i + 1][lane];
        for k in 0..order {
            let (a, b) = (i.min(k) + 1, i.max(k) + 1);
            matrix[i * order + k] = gram[a * width + b][lane];
        }
        trace += matrix[i * order + i];
    }
    let ridge = 1e-13 * (trace / order as f64 + 1e-300);
    for i in 0..order {
        matrix[i * order + i] += ridge;
    }
}

/// `acc + w · x`, lane by lane. The lanes pass by value, so that they stay in registers (the scratch rows they
/// come from all live in one task's memory, and the compiler could not otherwise vectorise across them).
#[inline(always)]
fn add_scaled(mut acc: Lane, w: f64, x: &Lane) -> Lane {
    for (a, &v) in acc.iter_mut().zip(x) {
        *a += w * v;
    }
    acc
}

/// `acc + x ∘ y`, lane by lane.
#[inline(always)]
fn add_product(mut acc: Lane, x: &Lane, y: &Lane) -> Lane {
    for ((a, &u), &v) in acc.iter_mut().zip(x).zip(y) {
        *a += u * v;
    }
    acc
}

/// `x − y`, lane by lane.
#[inline(always)]
fn subtract(mut x: Lane, y: &Lane) -> Lane {
    for (a, &v) in x.iter_mut().zip(y) {
        *a -= v;
    }
    x
}

/// Solves `matrix · x = rhs` (`k × k` row-major) in place by Gaussian elimination with partial pivoting;
/// `false` when a pivot is zero.
fn solve(matrix: &mut [f64], rhs: &mut [f64], k: usize) -> bool {
    for col in 0..k {
        // The first of the largest, as LAPACK's getrf picks it.
        let mut pivot = col;
        for row in col + 1..k {
            if matrix[row * k + col].abs() > matrix[pivot * k + col].abs() {
                pivot = row;
            }
        }
        if matrix[pivot * k + col] == 0.0 {
            return false;
        }
        if pivot != col {
            for j in 0..k {
                matrix.swap(pivot * k + j, col * k + j);
            }
            rhs.swap(pivot, col);
        }
        for row in col + 1..k {
            let factor = matrix[row * k + col] / matrix[col * k + col];
            for j in col..k {
                matrix[row * k + j] -= factor * matrix[col * k + j];
            }
            rhs[row] -= factor * rhs[col];
        }
    }
    for col in (0..k).rev() {
        let mut value = rhs[col];
        for j in col + 1..k {
            value -= matrix[col * k + j] * rhs[j];
        }
        rhs[col] = value / matrix[col * k + col];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ar1_refit_by_hand_and_the_same_sums_for_any_thread_count() {
        // n = 4 kept of 4 steps, p = 1, no control (U empty, the exogenous basis the constant): the refit of
        // e = x − mean is Σ ẽ_t ẽ_{t−1} / Σ ẽ_{t−1}², ẽ the lagged pairs centred on their own means.
        let shocks = [1.0, 2.0, 0.0, 3.0];
        let (coef, order) = ([0.5], [1_usize]);
        let constant = [1.0 / 3.0_f64.sqrt(); 3];
        let model = BiasModel {
            ar: ArControl {
                m: 1,
                n: 4,
                p: 1,
                steps: 4,
                coef: &coef,
                basis: &[],
                r: 0,
                mix: &[],
            },
            order: &order,
            exogenous: &constant,
            q: 1,
            exogenous_rank: &[1],
        };
        let got = bias_refit_sums(&model, Chunk::new(&shocks, &[], 1)).unwrap();
        // x = 1, 2.5, 1.25, 3.625; target (2.5, 1.25, 3.625), lag (1, 2.5, 1.25), each centred.
        let (target, lag) = ([2.5, 1.25, 3.625], [1.0, 2.5, 1.25]);
        let centre = |v: [f64; 3]| {
            let mean = v.iter().sum::<f64>() / 3.0;
            v.map(|x| x - mean)
        };
        let (y, x) = (centre(target), centre(lag));
        let expected =
            x.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>() / x.iter().map(|a| a * a).sum::<f64>();
        assert!((got[0] - expected).abs() < 1e-12, "{} vs {expected}", got[0]);

        let (m, n, p, steps, replicates) = (3, 12, 2, 15, 19);
        let shocks: Vec<f64> = (0..replicates * m * steps)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 29.0)
            .collect();
        let exogenous: Vec<f64> = (0..p * (n - p)).map(|_| 1.0 / ((n - p) as f64).sqrt()).collect();
        let (coef, order, rank) = ([0.3, 0.1, -0.2, 0.0, 0.6, -0.1], [2, 1, 2], [1, 1]);
        let model = BiasModel {
            ar: ArControl {
                m,
                n,
                p,
                steps,
                coef: &coef,
                basis: &[],
                r: 0,
                mix: &[],
            },
            order: &order,
            exogenous: &exogenous,
            q: 1,
            exogenous_rank: &rank,
        };
        let first = bias_refit_sums(&model, Chunk::new(&shocks, &[], replicates)).unwrap();
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let again =
                pool.install(|| bias_refit_sums(&model, Chunk::new(&shocks, &[], replicates)).unwrap());
            assert_eq!(again, first, "{threads} threads");
        }
        assert!(bias_refit_sums(&model, Chunk::new(&shocks[1..], &[], replicates)).is_err());
    }
}
