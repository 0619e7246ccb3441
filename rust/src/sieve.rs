//! Autoregressive series for the AR-sieve bootstrap of `gengen.sieve`.
//!
//! The sieve generates thousands of replicate residual series per analysis, each a short AR(p) recursion driven
//! by resampled innovations. Python would run the recursion one time step at a time; here every series runs its
//! own loop, in parallel. The result does not depend on the thread count: each series is computed alone.

use rayon::prelude::*;

use crate::error::StatsError;
use crate::fast_kernel::{lanes, outer_add, with_avx2, TILE_A, TILE_B};

/// Runs `x_t = shock_t + Σ_i coef_i x_{t−i}` for every replicate × series and keeps the last `keep` values.
///
/// * `coef`: `m × p` row-major, the AR coefficients of series `j` in `coef[j p .. (j + 1) p]`;
/// * `shocks`: `b × m × t` row-major;
/// * `start`: `b × m × p` row-major, the `p` values before the first shock, oldest first; empty for zeros.
///
/// Returns `b × m × keep`, row-major.
#[allow(clippy::too_many_arguments)]
pub fn ar_generate(
    coef: &[f64],
    m: usize,
    p: usize,
    shocks: &[f64],
    b: usize,
    t: usize,
    start: &[f64],
    keep: usize,
) -> Result<Vec<f64>, StatsError> {
    if coef.len() != m * p {
        return Err(StatsError::invalid(
            "coef",
            format!("needs {m} × {p} values, got {}", coef.len()),
        ));
    }
    if shocks.len() != b * m * t {
        return Err(StatsError::invalid(
            "shocks",
            format!("needs {b} × {m} × {t} values, got {}", shocks.len()),
        ));
    }
    if !start.is_empty() && start.len() != b * m * p {
        return Err(StatsError::invalid(
            "start",
            format!("needs {b} × {m} × {p} values or none, got {}", start.len()),
        ));
    }
    if keep > t {
        return Err(StatsError::invalid(
            "keep",
            format!("at most the {t} generated steps, got {keep}"),
        ));
    }
    if coef
        .iter()
        .chain(shocks)
        .chain(start)
        .any(|value| !value.is_finite())
    {
        return Err(StatsError::invalid("coef, shocks, start", "must be finite"));
    }
    let mut out = vec![0.0; b * m * keep];
    if keep == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(keep).enumerate().for_each(|(series, kept)| {
        let column = series % m;
        let phi = &coef[column * p..(column + 1) * p];
        let mut state = vec![0.0; p + t];
        if !start.is_empty() {
            state[..p].copy_from_slice(&start[series * p..(series + 1) * p]);
        }
        let driving = &shocks[series * t..(series + 1) * t];
        for step in 0..t {
            let mut value = driving[step];
            for (lag, weight) in phi.iter().enumerate() {
                value += weight * state[p + step - 1 - lag];
            }
            state[p + step] = value;
        }
        kept.copy_from_slice(&state[p + t - keep..]);
    });
    Ok(out)
}

/// What both sieve kernels share: the AR models that generate the replicates and the control's residual
/// operators in factored form.
///
/// Series `j`'s residual operator is `I − U M_j Uᵀ`, with `U` an `n × r` basis of the span every control
/// fit lies in (`r = q + 1` for least squares on `[1, z]`, the spline basis' dimension for a GAM; `U = I`
/// and `M_j = H_j` in general), so applying it costs `O(n r)` instead of `O(n²)`.
#[derive(Debug, Clone, Copy)]
pub struct ArControl<'a> {
    /// Series (test sets).
    pub m: usize,
    /// Kept steps (checkpoints).
    pub n: usize,
    /// Largest AR order: the coefficients' width (coefficients past a series' own order are zero).
    pub p: usize,
    /// Generated steps per replicate, burn-in included (at least `n`).
    pub steps: usize,
    /// `m × p` row-major AR coefficients.
    pub coef: &'a [f64],
    /// `n × r` row-major basis `U`.
    pub basis: &'a [f64],
    /// Columns of `basis`.
    pub r: usize,
    /// `m × r × r` row-major: `M_j`.
    pub mix: &'a [f64],
}

impl ArControl<'_> {
    /// The shapes of `coef`, `basis` and `mix`, then those of `more` (name, length, wanted length), then
    /// the chunk's `start` (`replicates × m × p` values, or none).
    pub(crate) fn check_shapes<T>(
        &self,
        more: &[(&str, usize, usize)],
        chunk: Chunk<'_, T>,
    ) -> Result<(), StatsError> {
        let (m, n, p, r) = (self.m, self.n, self.p, self.r);
        let (start, replicates) = (chunk.start, chunk.replicates);
        let own = [
            ("coef", self.coef.len(), m * p),
            ("basis", self.basis.len(), n * r),
            ("mix", self.mix.len(), m * r * r),
        ];
        for &(name, got, want) in own.iter().chain(more) {
            if got != want {
                return Err(StatsError::invalid(
                    name,
                    format!("needs {want} values, got {got}"),
                ));
            }
        }
        if !start.is_empty() && start.len() != replicates * m * p {
            return Err(StatsError::invalid(
                "start",
                format!(
                    "needs {replicates} × {m} × {p} values or none, got {}",
                    start.len()
                ),
            ));
        }
        Ok(())
    }

    /// An error naming `names` unless `coef`, `basis`, `mix` and every slice of `more` are finite.
    pub(crate) fn check_finite(&self, more: &[&[f64]], names: &str) -> Result<(), StatsError> {
        let own = [self.coef, self.basis, self.mix];
        if own
            .iter()
            .chain(more)
            .any(|part| part.iter().any(|v| !v.is_finite()))
        {
            return Err(StatsError::invalid(names, "must be finite"));
        }
        Ok(())
    }
}

/// A chunk of replicates as the caller drew them (`gengen.stats.sieve` draws with numpy): `replicates`
/// replicates' draws (the pool's columns each step picks, or each step's shocks) and their starts (the `p`
/// values of every series before the first step, oldest first; none for zeros).
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a, T> {
    pub draws: &'a [T],
    pub start: &'a [f64],
    pub replicates: usize,
}

impl<'a, T> Chunk<'a, T> {
    pub fn new(draws: &'a [T], start: &'a [f64], replicates: usize) -> Self {
        Chunk {
            draws,
            start,
            replicates,
        }
    }
}

/// What every replicate of a sieve chunk shares: the AR models and the control's operators, the pool of
/// standardised innovations and the innovations' spread along the run.
#[derive(Debug, Clone, Copy)]
pub struct SieveModel<'a> {
    /// The AR models and the control's residual operators.
    pub ar: ArControl<'a>,
    /// `m × pool_len` row-major standardised innovations; replicate shocks are drawn from its columns.
    pub pool: &'a [f64],
    /// Columns of `pool`.
    pub pool_len: usize,
    /// `m × steps` row-major: the spread each generated step's shock is given.
    pub spread: &'a [f64],
}

/// Replicates per task of [`sieve_moments`]: tasks are fixed blocks of replicates, summed in block order,
/// so the moments do not depend on the thread count.
const REPLICATE_BLOCK: usize = 8;

/// Sums of Fisher's z of the residual correlations over a chunk of AR-sieve replicates and their white twins.
///
/// Replicate `b` draws, at each generated step `s`, the pool's column `picks[b · steps + s]` for every
/// series at once; series `j` is `x_s = pool[j, pick] · spread[j, s] + Σ_l coef[j, l] x_{s−1−l}`, started
/// from `start[b, j, ·]` (the `p` values before the first shock, oldest first; all zero when `start` is
/// empty), and its last `n` steps are kept; its white twin is the last `n` drawn pool values themselves.
/// Each is residualised (`(I − U M_j Uᵀ) x`) and centred, and every pair's `z = artanh(r)` of the
/// residuals' correlation (r clipped to ±(1 − 1e-15), r = 1 on the diagonal; NaN for a series of zero
/// length) is summed. The correlations come from the series' cross-products, corrected for the
/// residualisation and the centring in r × r terms, so no residual series is formed: see
/// `correlation_sums`; the white twins' cross-products sum each distinct pool column once, times its count.
///
/// Returns `4 × m × m` row-major: Σ z and Σ z² of the AR replicates, then of the white twins (symmetric).
/// The same numbers whatever the thread count.
pub fn sieve_moments(model: &SieveModel<'_>, chunk: Chunk<'_, i64>) -> Result<Vec<f64>, StatsError> {
    check(model, chunk)?;
    let (picks, start, replicates) = (chunk.draws, chunk.start, chunk.replicates);
    let (m, p, steps) = (model.ar.m, model.ar.p, model.ar.steps);
    let layout = Layout::new(model);
    let blocks: Vec<Vec<f64>> = (0..replicates.div_ceil(REPLICATE_BLOCK))
        .into_par_iter()
        .map(|block| {
            let mut scratch = Scratch::new(&layout);
            let mut sums = vec![0.0; 4 * m * m];
            let first = block * REPLICATE_BLOCK;
            for b in first..(first + REPLICATE_BLOCK).min(replicates) {
                let own_start = if start.is_empty() {
                    &start[..0]
                } else {
                    &start[b * m * p..(b + 1) * m * p]
                };
                replicate(
                    &layout,
                    &picks[b * steps..(b + 1) * steps],
                    own_start,
                    &mut scratch,
                    &mut sums,
                );
            }
            sums
        })
        .collect();
    let mut total = vec![0.0; 4 * m * m];
    for sums in &blocks {
        for (out, value) in total.iter_mut().zip(sums) {
            *out += value;
        }
    }
    for slot in 0..4 {
        let matrix = &mut total[slot * m * m..(slot + 1) * m * m];
        for a in 0..m {
            for b in 0..a {
                matrix[a * m + b] = matrix[b * m + a];
            }
        }
    }
    Ok(total)
}

fn check(model: &SieveModel<'_>, chunk: Chunk<'_, i64>) -> Result<(), StatsError> {
    let ar = &model.ar;
    let (m, n, steps) = (ar.m, ar.n, ar.steps);
    let more = [
        ("pool", model.pool.len(), m * model.pool_len),
        ("spread", model.spread.len(), m * steps),
    ];
    ar.check_shapes(&more, chunk)?;
    let (picks, start, replicates) = (chunk.draws, chunk.start, chunk.replicates);
    if n < 2 || steps < n || model.pool_len == 0 {
        return Err(StatsError::invalid(
            "steps",
            format!("need n ≥ 2 kept of {steps} generated steps and a non-empty pool, got n = {n}"),
        ));
    }
    ar.check_finite(&[model.pool, model.spread], "coef, pool, spread, basis, mix")?;
    if picks.len() != replicates * steps {
        return Err(StatsError::invalid(
            "picks",
            format!("needs {replicates} × {steps} values, got {}", picks.len()),
        ));
    }
    if picks
        .iter()
        .any(|&pick| pick < 0 || pick as usize >= model.pool_len)
    {
        return Err(StatsError::invalid(
            "picks",
            format!("must index the pool's {} columns", model.pool_len),
        ));
    }
    if start.iter().any(|value| !value.is_finite()) {
        return Err(StatsError::invalid("start", "must be finite"));
    }
    Ok(())
}

/// Correlations are clipped to ±(1 − [`CLIP`]) before Fisher's z.
const CLIP: f64 = 1e-15;

/// Rows of the pool or kept series summed per L1-resident chunk of the Gram tiles.
const ROW_CHUNK: usize = 32;

/// The model rearranged time-major (one row of `width` values per step, series across), padded with zero
/// series to a multiple of the register tile, so that every step's work runs along contiguous rows.
struct Layout {
    m: usize,
    n: usize,
    p: usize,
    r: usize,
    steps: usize,
    width: usize,
    /// `p × width`: coefficient of lag l for every series.
    coef: Vec<f64>,
    /// `pool_len × width`: pool column c for every series.
    pool: Vec<f64>,
    pool_len: usize,
    /// `steps × width`.
    spread: Vec<f64>,
    /// `n × r`.
    basis: Vec<f64>,
    /// `r`: the column sums of `U`, `Uᵀ 1`.
    basis_sums: Vec<f64>,
    /// `r × r`: `Uᵀ U` (the identity for an orthonormal basis).
    basis_gram: Vec<f64>,
    /// `r × r × width`: `M_j[i, k]` at `(i r + k) width + j`.
    mix: Vec<f64>,
}

impl Layout {
    fn new(model: &SieveModel<'_>) -> Self {
        let ar = &model.ar;
        let (m, n, p, r, steps) = (ar.m, ar.n, ar.p, ar.r, ar.steps);
        let width = m.div_ceil(TILE_B) * TILE_B;
        let transpose = |values: &[f64], rows: usize| {
            let mut out = vec![0.0; rows * width];
            for j in 0..m {
                for row in 0..rows {
                    out[row * width + j] = values[j * rows + row];
                }
            }
            out
        };
        let basis = ar.basis.to_vec();
        let mut basis_sums = vec![0.0; r];
        let mut basis_gram = vec![0.0; r * r];
        for row in basis.chunks_exact(r.max(1)).take(n) {
            for i in 0..r {
                basis_sums[i] += row[i];
                for k in 0..r {
                    basis_gram[i * r + k] += row[i] * row[k];
                }
            }
        }
        Layout {
            m,
            n,
            p,
            r,
            steps,
            width,
            coef: transpose(ar.coef, p),
            pool: transpose(model.pool, model.pool_len),
            pool_len: model.pool_len,
            spread: transpose(model.spread, steps),
            basis,
            basis_sums,
            basis_gram,
            mix: transpose(ar.mix, r * r),
        }
    }
}

/// One task's working memory.
struct Scratch {
    /// `(p + steps) × width`: the AR recursion's values, the start first.
    series: Vec<f64>,
    /// `3 r × width`: `Uᵀ x`, `M_j Uᵀ x` and `Uᵀ U M_j Uᵀ x`.
    projection: Vec<f64>,
    /// `width`: column sums of the series.
    sums: Vec<f64>,
    /// `width × width`: the series' cross-products, then their residuals' centred ones.
    gram: Vec<f64>,
    /// `width`: reciprocal norms of the residuals.
    scale: Vec<f64>,
    /// `width`: one row of correlations, then of Fisher's z.
    z: Vec<f64>,
    /// `pool_len`: how often each pool column drives a kept step (the white twins).
    counts: Vec<u32>,
    /// The pool columns that do, in order (`width` values each), and the same times their counts.
    rows: Vec<f64>,
    weighted: Vec<f64>,
}

impl Scratch {
    fn new(layout: &Layout) -> Self {
        let width = layout.width;
        Scratch {
            series: vec![0.0; (layout.p + layout.steps) * width],
            projection: vec![0.0; 3 * layout.r * width],
            sums: vec![0.0; width],
            gram: vec![0.0; width * width],
            scale: vec![0.0; width],
            z: vec![0.0; width],
            counts: vec![0; layout.pool_len],
            rows: Vec::with_capacity(layout.n * width),
            weighted: Vec::with_capacity(layout.n * width),
        }
    }
}

with_avx2! {
    fn replicate(
        layout: &Layout,
        picks: &[i64],
        start: &[f64],
        scratch: &mut Scratch,
        sums: &mut [f64],
    ) => replicate_generic;
}

#[inline(always)]
fn replicate_generic(layout: &Layout, picks: &[i64], start: &[f64], scratch: &mut Scratch, sums: &mut [f64]) {
    let (m, n, p, steps, width) = (layout.m, layout.n, layout.p, layout.steps, layout.width);
    let series = &mut scratch.series;
    series[..p * width].fill(0.0);
    if !start.is_empty() {
        for j in 0..m {
            for lag in 0..p {
                series[lag * width + j] = start[j * p + lag];
            }
        }
    }
    for step in 0..steps {
        let (before, rest) = series.split_at_mut((p + step) * width);
        let shock = &layout.pool[picks[step] as usize * width..][..width];
        let spread = &layout.spread[step * width..][..width];
        // TILE_B series at a time, in registers (the lags are earlier rows of the same buffer).
        for c0 in (0..width).step_by(TILE_B) {
            let (s, g): ([f64; TILE_B], [f64; TILE_B]) = (lanes(&shock[c0..]), lanes(&spread[c0..]));
            let mut value = [0.0; TILE_B];
            for i in 0..TILE_B {
                value[i] = s[i] * g[i];
            }
            for lag in 0..p {
                let w: [f64; TILE_B] = lanes(&layout.coef[lag * width + c0..]);
                let x: [f64; TILE_B] = lanes(&before[(p + step - 1 - lag) * width + c0..]);
                for i in 0..TILE_B {
                    value[i] += w[i] * x[i];
                }
            }
            rest[c0..c0 + TILE_B].copy_from_slice(&value);
        }
    }
    // The AR replicates: the kept steps' rows of the recursion.
    let kept = &scratch.series[(p + steps - n) * width..(p + steps) * width];
    let rows = |t: usize| &kept[t * width..(t + 1) * width];
    project(layout, rows, &mut scratch.projection, &mut scratch.sums);
    scratch.gram.fill(0.0);
    for rows in kept.chunks(ROW_CHUNK * width) {
        gram_rows(layout, &mut scratch.gram, rows, rows);
    }
    correlation_sums(layout, scratch_view(scratch), &mut sums[..2 * m * m]);
    // Their white twins: the kept steps' pool columns, each distinct column once with its count.
    let tail = &picks[steps - n..];
    let pool_row = |c: usize| &layout.pool[c * width..(c + 1) * width];
    project(
        layout,
        |t| pool_row(tail[t] as usize),
        &mut scratch.projection,
        &mut scratch.sums,
    );
    scratch.counts.fill(0);
    for &pick in tail {
        scratch.counts[pick as usize] += 1;
    }
    // Each distinct column once, and once more times its count: Σ_t x_t x_tᵀ = Σ_c count_c p_c p_cᵀ.
    scratch.rows.clear();
    scratch.weighted.clear();
    for (c, &count) in scratch.counts.iter().enumerate() {
        if count > 0 {
            let row = pool_row(c);
            scratch.rows.extend_from_slice(row);
            scratch.weighted.extend(row.iter().map(|&x| f64::from(count) * x));
        }
    }
    scratch.gram.fill(0.0);
    for (left, right) in scratch
        .weighted
        .chunks(ROW_CHUNK * width)
        .zip(scratch.rows.chunks(ROW_CHUNK * width))
    {
        gram_rows(layout, &mut scratch.gram, left, right);
    }
    correlation_sums(layout, scratch_view(scratch), &mut sums[2 * m * m..]);
}

/// The parts of [`Scratch`] that [`correlation_sums`] works in.
struct GramView<'s> {
    projection: &'s mut [f64],
    sums: &'s [f64],
    gram: &'s mut [f64],
    scale: &'s mut [f64],
    z: &'s mut [f64],
}

fn scratch_view(scratch: &mut Scratch) -> GramView<'_> {
    GramView {
        projection: &mut scratch.projection,
        sums: &scratch.sums,
        gram: &mut scratch.gram,
        scale: &mut scratch.scale,
        z: &mut scratch.z,
    }
}

/// `Uᵀ x` (the first `r` rows of `projection`) and the column sums of the `n` rows `rows(t)`.
#[inline(always)]
fn project<'a>(layout: &Layout, rows: impl Fn(usize) -> &'a [f64], projection: &mut [f64], sums: &mut [f64]) {
    let (r, width) = (layout.r, layout.width);
    let coords = &mut projection[..r * width];
    coords.fill(0.0);
    sums.fill(0.0);
    for t in 0..layout.n {
        let (row, basis) = (rows(t), &layout.basis[t * r..(t + 1) * r]);
        for c0 in (0..width).step_by(TILE_B) {
            let x: [f64; TILE_B] = lanes(&row[c0..]);
            for (i, &u) in basis.iter().enumerate().take(r) {
                let coord = &mut coords[i * width + c0..][..TILE_B];
                for (c, &x) in coord.iter_mut().zip(&x) {
                    *c += u * x;
                }
            }
            for (s, &x) in sums[c0..c0 + TILE_B].iter_mut().zip(&x) {
                *s += x;
            }
        }
    }
}

/// `gram += Σ_k left_k ⊗ right_k` over the upper triangle's register tiles, for chunks of rows (`width`
/// values each) small enough to stay in the L1 cache while every tile passes over them.
#[inline(always)]
fn gram_rows(layout: &Layout, gram: &mut [f64], left: &[f64], right: &[f64]) {
    let (m, width) = (layout.m, layout.width);
    for a0 in (0..m).step_by(TILE_A) {
        for b0 in ((a0 / TILE_B) * TILE_B..m).step_by(TILE_B) {
            let mut acc = [[0.0; TILE_B]; TILE_A];
            for (a, values) in acc.iter_mut().enumerate() {
                *values = lanes(&gram[(a0 + a) * width + b0..]);
            }
            for (l, g) in left.chunks_exact(width).zip(right.chunks_exact(width)) {
                let l: [f64; TILE_A] = lanes(&l[a0..]);
                let g: [f64; TILE_B] = lanes(&g[b0..]);
                outer_add(&mut acc, &l, &g);
            }
            for (a, values) in acc.iter().enumerate() {
                gram[(a0 + a) * width + b0..][..TILE_B].copy_from_slice(values);
            }
        }
    }
}

/// From the cross-products of the series (`gram`), their exogenous coordinates `A = Uᵀ X` and column sums,
/// the correlations of the residuals `(I − U M_j Uᵀ) x_j`, centred: with `D_j = M_j A_j` and `F = Uᵀ U D`,
/// `C_ab = G_ab − A_a·D_b − D_a·A_b + D_a·F_b − s_a s_b / n`, `s = sums − (Uᵀ 1)ᵀ D`; `r_ab = C_ab /
/// √(C_aa C_bb)`, and every pair's z and z² are added to `sums` (`2 × m × m`, upper triangle and diagonal).
#[inline(always)]
fn correlation_sums(layout: &Layout, view: GramView<'_>, sums: &mut [f64]) {
    let (m, n, r, width) = (layout.m, layout.n, layout.r, layout.width);
    let (coords, rest) = view.projection.split_at_mut(r * width);
    let (mixed, weighted) = rest.split_at_mut(r * width);
    mixed.fill(0.0);
    for i in 0..r {
        for k in 0..r {
            let weights = &layout.mix[(i * r + k) * width..][..width];
            let source = &coords[k * width..][..width];
            for ((d, &w), &c) in mixed[i * width..][..width].iter_mut().zip(weights).zip(source) {
                *d += w * c;
            }
        }
    }
    weighted.fill(0.0);
    for i in 0..r {
        for k in 0..r {
            let w = layout.basis_gram[i * r + k];
            for (f, &d) in weighted[i * width..][..width]
                .iter_mut()
                .zip(&mixed[k * width..][..width])
            {
                *f += w * d;
            }
        }
    }
    // Column sums of the residuals, kept in `scale` for now.
    let centre = &mut *view.scale;
    centre.copy_from_slice(view.sums);
    for i in 0..r {
        let u = layout.basis_sums[i];
        for (s, &d) in centre.iter_mut().zip(&mixed[i * width..][..width]) {
            *s -= u * d;
        }
    }
    let gram = &mut *view.gram;
    for a in 0..m {
        // Row a of C, for b ≥ a (the diagonal included).
        let row = &mut gram[a * width..(a + 1) * width];
        for i in 0..r {
            let (ai, di) = (coords[i * width + a], mixed[i * width + a]);
            let (ab, db, fb) = (
                &coords[i * width..][..width],
                &mixed[i * width..][..width],
                &weighted[i * width..][..width],
            );
            for b in a..m {
                row[b] -= ai * db[b] + di * ab[b] - di * fb[b];
            }
        }
        let sa = centre[a] / n as f64;
        for b in a..m {
            row[b] -= sa * centre[b];
        }
    }
    fisher_z_sums(layout, gram, view.scale, view.z, sums);
}

/// `r_ab = C_ab / √(C_aa C_bb)` from the centred residual cross-products `gram` (upper triangle), and each
/// pair's z and z² added to `sums` (`2 × m × m`); `scale` and `row_z` (`width` each) are working memory.
#[inline(always)]
fn fisher_z_sums(layout: &Layout, gram: &[f64], scale: &mut [f64], row_z: &mut [f64], sums: &mut [f64]) {
    let (m, width) = (layout.m, layout.width);
    for (j, s) in scale.iter_mut().enumerate().take(m) {
        let c = gram[j * width + j];
        *s = if c > 0.0 { 1.0 / c.sqrt() } else { f64::NAN };
    }
    let (z_sums, z2_sums) = sums.split_at_mut(m * m);
    for a in 0..m {
        let row = &gram[a * width..(a + 1) * width];
        let sa = scale[a];
        // r_aa = 1 by definition (clipped as every r is).
        row_z[a] = if sa.is_nan() {
            f64::NAN
        } else {
            0.5 * ((2.0 - CLIP) / (1.0 - (1.0 - CLIP))).ln()
        };
        for b in a + 1..m {
            let r_ab = (row[b] * sa * scale[b]).clamp(-1.0 + CLIP, 1.0 - CLIP);
            row_z[b] = 0.5 * ln((1.0 + r_ab) / (1.0 - r_ab));
        }
        for ((s, s2), &z) in z_sums[a * m + a..(a + 1) * m]
            .iter_mut()
            .zip(&mut z2_sums[a * m + a..(a + 1) * m])
            .zip(&row_z[a..m])
        {
            *s += z;
            *s2 += z * z;
        }
    }
}

/// Natural logarithm of a positive, normal `x` (NaN stays NaN), without branches so that it vectorises: the
/// reduction and polynomial of FreeBSD's `e_log.c` (as musl and the `libm` crate), under one ulp.
// The constants as fdlibm prints them (to more digits than an f64 holds; they round to its bits).
#[allow(clippy::excessive_precision)]
#[inline(always)]
fn ln(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
    const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
    const LG1: f64 = 6.666_666_666_666_735_130e-01;
    const LG2: f64 = 3.999_999_999_940_941_908e-01;
    const LG3: f64 = 2.857_142_874_366_239_149e-01;
    const LG4: f64 = 2.222_219_843_214_978_396e-01;
    const LG5: f64 = 1.818_357_216_161_805_012e-01;
    const LG6: f64 = 1.531_383_769_920_937_332e-01;
    const LG7: f64 = 1.479_819_860_511_658_591e-01;
    let bits = x.to_bits();
    // x = 2^k (1 + f) with 1 + f in [√2/2, √2).
    let high = (bits >> 32) + (0x3ff0_0000 - 0x3fe6_a09e);
    let biased = high >> 20;
    let reduced = f64::from_bits((((high & 0x000f_ffff) + 0x3fe6_a09e) << 32) | (bits & 0xffff_ffff));
    // k exactly, from the biased exponent (2^52 + biased − 2^52 − 1023).
    let k = f64::from_bits(0x4330_0000_0000_0000 | biased) - (4_503_599_627_370_496.0 + 1023.0);
    let f = reduced - 1.0;
    let hfsq = 0.5 * f * f;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG2 + w * (LG4 + w * LG6));
    let t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
    let value = s * (hfsq + t1 + t2) + k * LN2_LO - hfsq + f + k * LN2_HI;
    if x.is_nan() {
        x
    } else {
        value
    }
}

#[cfg(test)]
#[path = "sieve_tests.rs"]
mod tests;
