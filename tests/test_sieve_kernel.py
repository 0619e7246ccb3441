"""The AR-sieve's factored residual operators and its replicate kernel against dense numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from gengen.stats.controls import Gam
from gengen.stats.gam import fit_gam
from gengen.stats.sieve_kernel import factor_operators, replicate_moments, residualise_factored


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
    got = replicate_moments(coef, pool, picks, spread, start, n, factor_operators(operators, m))
    expected = _reference_moments(coef, pool, picks, spread, start, n, operators)
    assert got.shape == (4, m, m)
    assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_replicate_moments_refuse_picks_outside_the_pool() -> None:
    _, control = _data(n=20, m=2)
    factored = factor_operators(_linear_operator(control), 2)
    picks = np.full((3, 25), 7)
    with pytest.raises(Exception, match="picks"):
        replicate_moments(np.zeros((2, 1)), np.ones((2, 7)), picks, np.ones((2, 25)), None, 20, factored)
