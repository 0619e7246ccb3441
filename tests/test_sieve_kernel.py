"""The AR-sieve's factored residual operators and its replicate kernel against dense numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from gengen.stats.controls import Gam
from gengen.stats.gam import fit_gam
from gengen.stats.sieve_ar import _exogenous_bases
from gengen.stats.sieve_kernel import bias_refit_sums, factor_operators, replicate_moments, residualise_factored


def _linear_operator(control: np.ndarray) -> np.ndarray:
    design = np.column_stack([np.ones(len(control)), control])
    q, _ = np.linalg.qr(design)
    return np.eye(len(control)) - q @ q.T


def _gam_operators(scores: np.ndarray, control: np.ndarray) -> np.ndarray:
    """Per-column I − H_j of the GAM control at each column's own smoothing parameters (as the sieve builds them)."""
    n, m = scores.shape
    fit = fit_gam(scores, control[:, None], Gam())
    lam = np.atleast_2d(np.asarray(fit.lam, dtype=np.float64))
    return np.stack([np.eye(n) - fit_gam(np.eye(n), control[:, None], Gam(), lam=lam[j]).fitted for j in range(m)])


def _data(n: int = 40, m: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    control = np.sort(rng.uniform(0, 1, n))
    scores = np.sin(3 * control[:, None] + rng.uniform(0, 3, m)) + rng.normal(0, 0.2, (n, m))
    return scores, control


def test_linear_operator_factors_into_its_two_dimensional_projection() -> None:
    _, control = _data()
    operator = _linear_operator(control)
    factored = factor_operators(operator, 3)
    assert factored.basis.shape == (40, 2)
    assert factored.mix.shape == (3, 2, 2)
    rebuilt = np.eye(40) - factored.basis @ factored.mix[1] @ factored.basis.T
    assert_allclose(rebuilt, operator, atol=1e-13)


def test_gam_operators_share_the_spline_span_and_residualise_as_the_dense_ones() -> None:
    scores, control = _data()
    operators = _gam_operators(scores, control)
    factored = factor_operators(operators, scores.shape[1])
    assert factored.basis.shape[1] <= 10  # at most k = 10 basis functions
    series = np.random.default_rng(1).normal(size=(7, scores.shape[1], 40))
    dense = np.einsum("mst,...mt->...ms", operators, series)
    assert_allclose(residualise_factored(series, factored), dense, atol=1e-11)


def test_operators_without_a_common_small_span_stay_exact() -> None:
    rng = np.random.default_rng(2)
    operators = np.stack([np.eye(12) - np.diag(rng.uniform(0.1, 0.9, 12)) for _ in range(3)])
    factored = factor_operators(operators, 3)
    assert factored.basis.shape == (12, 12)
    series = rng.normal(size=(4, 3, 12))
    assert_allclose(residualise_factored(series, factored), np.einsum("mst,...mt->...ms", operators, series))


def _reference_moments(
    coef: np.ndarray,
    pool: np.ndarray,
    picks: np.ndarray,
    spread: np.ndarray,
    start: np.ndarray,
    n: int,
    operators: np.ndarray,
) -> np.ndarray:
    """Σ z, Σ z² the way the sieve computed them before the kernel: numpy AR loop, dense operators, artanh."""
    size, steps = picks.shape
    m, p = coef.shape
    shocks = pool[:, picks].transpose(1, 0, 2)
    driven = shocks * spread
    series = np.zeros((size, m, p + steps))
    series[:, :, :p] = start
    for s in range(steps):
        value = driven[:, :, s].copy()
        for lag in range(p):
            value += coef[:, lag] * series[:, :, p + s - 1 - lag]
        series[:, :, p + s] = value
    out = []
    for replicate in (series[:, :, -n:], shocks[:, :, -n:]):
        residual = np.einsum("mst,...mt->...ms", operators, replicate)
        centred = residual - residual.mean(axis=-1, keepdims=True)
        unit = centred / np.sqrt((centred**2).sum(axis=-1, keepdims=True))
        z = np.arctanh(np.clip(unit @ np.swapaxes(unit, -1, -2), -1 + 1e-15, 1 - 1e-15))
        out.extend([z.sum(axis=0), (z**2).sum(axis=0)])
    return np.stack(out)


@pytest.mark.parametrize("fit", ["linear", "gam"])
def test_replicate_moments_equal_the_numpy_pipeline(fit: str) -> None:
    scores, control = _data(n=30, m=6)
    n, m = scores.shape
    operators = _gam_operators(scores, control) if fit == "gam" else np.repeat(_linear_operator(control)[None], m, 0)
    rng = np.random.default_rng(3)
    coef = rng.uniform(-0.4, 0.4, (m, 2))
    pool = rng.normal(size=(m, 25))
    steps = n + 15
    picks = rng.integers(0, 25, size=(33, steps))
    spread = rng.uniform(0.5, 1.5, (m, steps))
    start = rng.normal(size=(33, m, 2))
    got = replicate_moments(coef, pool, picks, spread, start, factor_operators(operators, m))
    expected = _reference_moments(coef, pool, picks, spread, start, n, operators)
    assert got.shape == (4, m, m)
    assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_replicate_moments_refuse_picks_outside_the_pool() -> None:
    _, control = _data(n=20, m=2)
    factored = factor_operators(_linear_operator(control), 2)
    picks = np.full((3, 25), 7)
    with pytest.raises(Exception, match="picks"):
        replicate_moments(np.zeros((2, 1)), np.ones((2, 7)), picks, np.ones((2, 25)), None, factored)


def _reference_refit_sums(
    coef: np.ndarray,
    order: np.ndarray,
    shocks: np.ndarray,
    start: np.ndarray,
    n: int,
    operators: np.ndarray,
    control: np.ndarray | None,
) -> np.ndarray:
    """Σ over replicates of the refitted AR coefficients, written out: numpy AR loop, dense operators, and each
    replicate's dynamic regression e_t ~ [e_{t−1}, …, e_{t−p}, 1, z_t, …, z_{t−p}] by ``np.linalg.lstsq``."""
    size, m, steps = shocks.shape
    p = coef.shape[1]
    series = np.zeros((size, m, p + steps))
    series[:, :, :p] = start
    for s in range(steps):
        value = shocks[:, :, s].copy()
        for lag in range(p):
            value += coef[:, lag] * series[:, :, p + s - 1 - lag]
        series[:, :, p + s] = value
    residual = np.einsum("mst,...mt->...ms", operators, series[:, :, -n:])
    sums = np.zeros((m, p))
    for j in range(m):
        k = int(order[j])
        if k == 0:
            continue
        rows = np.arange(p, n)
        exogenous = [np.ones(n - p)]
        if control is not None:
            exogenous += [control[rows - i] for i in range(k + 1)]
        for b in range(size):
            e = residual[b, j]
            design = np.column_stack([e[rows - i] for i in range(1, k + 1)] + exogenous)
            sums[j, :k] += np.linalg.lstsq(design, e[rows], rcond=None)[0][:k]
    return sums


@pytest.mark.parametrize("fit", ["linear", "gam", "none"])
def test_bias_refit_sums_equal_the_numpy_pipeline(fit: str) -> None:
    """The bias simulation's kernel (generate, residualise, refit) against the pipeline written out in numpy."""
    scores, control = _data(n=40, m=5)
    n, m = scores.shape
    if fit == "gam":
        operators = _gam_operators(scores, control)
    else:
        design = np.column_stack([np.ones(n), control]) if fit == "linear" else np.ones((n, 1))
        q, _ = np.linalg.qr(design)
        operators = np.repeat((np.eye(n) - q @ q.T)[None], m, 0)
    exogenous_control = None if fit == "none" else control[:, None]
    rng = np.random.default_rng(4)
    p = 3
    order = np.array([1, 3, 0, 2, 3])
    coef = np.where(np.arange(p)[None, :] < order[:, None], rng.uniform(-0.3, 0.3, (m, p)), 0.0)
    coef[1, 0] = 0.9
    steps = n + 17
    shocks = rng.normal(size=(21, m, steps))
    start = rng.normal(size=(21, m, p))
    got = bias_refit_sums(
        coef, order, shocks, start, factor_operators(operators, m), _exogenous_bases(exogenous_control, n, p)
    )
    expected = _reference_refit_sums(coef, order, shocks, start, n, operators, exogenous_control)
    assert got.shape == (m, p)
    assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert not got[2].any() and not got[0, 1:].any()  # order 0, and past each order, nothing is refitted


def test_bias_refit_sums_ignore_the_thread_count_and_check_their_inputs() -> None:
    _, control = _data(n=30, m=3)
    operators = factor_operators(_linear_operator(control), 3)
    rng = np.random.default_rng(5)
    coef, order = np.full((3, 2), 0.2), np.array([2, 1, 2])
    shocks, start = rng.normal(size=(19, 3, 40)), rng.normal(size=(19, 3, 2))
    exogenous = _exogenous_bases(control[:, None], 30, 2)
    first = bias_refit_sums(coef, order, shocks, start, operators, exogenous)
    for _ in range(3):
        assert np.array_equal(bias_refit_sums(coef, order, shocks, start, operators, exogenous), first)
    with pytest.raises(Exception, match="order"):
        bias_refit_sums(coef, np.array([3, 1, 2]), shocks, start, operators, exogenous)
    with pytest.raises(Exception, match="finite"):
        bias_refit_sums(coef, order, np.where(shocks > 2, np.nan, shocks), start, operators, exogenous)


def test_t_tail_arrays_equal_the_scalar_tails() -> None:
    from gengen import _core

    rng = np.random.default_rng(6)
    t, df = rng.normal(0, 3, 50), rng.uniform(0.5, 300, 50)
    p = _core.t_two_sided_array(t, df)
    q = _core.t_quantile_array(0.975, df)
    assert np.array_equal(p, [_core.t_two_sided(float(a), float(b)) for a, b in zip(t, df, strict=True)])
    assert np.array_equal(q, [_core.t_quantile(0.975, float(b)) for b in df])
    from scipy import stats

    assert_allclose(p, 2 * stats.t.sf(np.abs(t), df), rtol=1e-10)
    assert_allclose(q, stats.t.ppf(0.975, df), rtol=1e-10)
