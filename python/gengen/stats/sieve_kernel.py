"""The AR-sieve's residual operators in factored form, and its replicate loop in the Rust core.

Every residual operator of the sieve is :math:`I - H_j`, where :math:`H_j` is the control's fit of test set j:
least squares on :math:`[1, z]` (one shared projection) or a penalised spline of the control, whose smoothers
all map into the span of the same basis. With :math:`U` an orthonormal basis of the span of every
:math:`H_j`, :math:`H_j = U M_j U^\\top` with :math:`M_j = U^\\top H_j U` (r × r), so that applying the
operator costs :math:`O(n r)` instead of :math:`O(n^2)`, and the replicates need no n × n matrix at all. The
factorisation is checked against the operators; where it does not reproduce them (no common low-rank span),
:math:`U = I` and :math:`M_j = H_j`, which is exact and only slower.

:func:`replicate_moments` runs one chunk of sieve replicates (AR generation, residualisation, correlations,
Fisher's z) in ``gengen._core.sieve_moments``, from the random draws the caller makes, and returns only the
sums of z and z² it needs; :func:`bias_refit_sums` runs the simulation of the AR coefficients' small-sample
bias (generation, residualisation, refit) in ``gengen._core.sieve_bias_refit`` the same way.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from gengen import _core

# A factorisation is kept when it reproduces every operator to this many times the operators' scale.
FACTOR_TOLERANCE = 1e-10
# Directions of the fits' span weighted below this share of the largest are left out of the basis.
RANK_TOLERANCE = 1e-12


class FactoredOperators(NamedTuple):
    """Residual operators ``I − basis @ mix[j] @ basis.T`` of m test sets: basis (n, r), mix (m, r, r)."""

    basis: NDArray[np.float64]
    mix: NDArray[np.float64]


def factor_operators(operators: NDArray[np.float64], m: int) -> FactoredOperators:
    """Factor the residual operators I − H (one shared (n, n) or per column (m, n, n)) of m test sets.

    Parameters
    ----------
    operators : ndarray of shape (n, n) or (m, n, n)
        The residual operators, as the sieve builds them.
    m : int
        Number of test sets (the shared operator is repeated for each).

    Returns
    -------
    FactoredOperators
        ``basis`` (n, r) with orthonormal columns spanning every fit, and ``mix`` (m, r, r), such that operator
        j is ``I − basis @ mix[j] @ basis.T`` to :data:`FACTOR_TOLERANCE`; ``basis`` is the identity when no
        smaller span reproduces them.
    """
    n = operators.shape[-1]
    hat = np.eye(n) - operators
    stacked = hat if hat.ndim == 3 else hat[None]
    # The fits are symmetric and positive semi-definite (projections, penalised smoothers), so the span of all
    # of them is the column space of their sum; directions it weighs below RANK_TOLERANCE are left out, and the
    # check below says whether that reproduced every operator.
    values, vectors = np.linalg.eigh(stacked.sum(axis=0))
    scale = max(float(np.abs(values).max()), 1e-300)
    basis = np.ascontiguousarray(vectors[:, values > RANK_TOLERANCE * scale])
    mix = basis.T @ stacked @ basis
    error = np.abs(basis @ mix @ basis.T - stacked).max() if basis.shape[1] else np.abs(stacked).max()
    if basis.shape[1] >= n or not error <= FACTOR_TOLERANCE * max(1.0, float(np.abs(stacked).max())):
        basis, mix = np.eye(n), stacked.copy()
    if mix.shape[0] != m:
        mix = np.repeat(mix, m, axis=0)
    return FactoredOperators(basis, np.ascontiguousarray(mix))


def residualise_factored(series: NDArray[np.float64], operators: FactoredOperators) -> NDArray[np.float64]:
    """Apply each test set's factored residual operator to series (..., m, n).

    Parameters
    ----------
    series : ndarray of shape (..., m, n)
        Series of the m test sets, time on the last axis.
    operators : FactoredOperators
        From :func:`factor_operators`.

    Returns
    -------
    ndarray of shape (..., m, n)
        The residual series.
    """
    coords = series @ operators.basis  # (..., m, r)
    mixed = np.einsum("mrq,...mq->...mr", operators.mix, coords)
    return series - mixed @ operators.basis.T


def replicate_moments(
    coef: NDArray[np.float64],
    pool: NDArray[np.float64],
    picks: NDArray[np.int64],
    spread_path: NDArray[np.float64],
    start: NDArray[np.float64] | None,
    operators: FactoredOperators,
) -> NDArray[np.float64]:
    """Sums of Fisher's z (and z²) over a chunk of sieve replicates and their white twins.

    Parameters
    ----------
    coef : ndarray of shape (m, p)
        AR coefficients of each test set's residuals.
    pool : ndarray of shape (m, P)
        Standardised innovations; replicate b's shock at step s is column ``picks[b, s]`` for every test set.
    picks : ndarray of shape (b, steps)
        Drawn columns of ``pool``, burn-in included.
    spread_path : ndarray of shape (m, steps)
        The spread each step's shock is given (the white twins use the shocks as drawn).
    start : ndarray of shape (b, m, p), optional
        The p values before each replicate's first shock, oldest first (zeros when omitted).
    operators : FactoredOperators
        The control's residual operators (:func:`factor_operators`), n × n: the last n steps are kept.

    Returns
    -------
    ndarray of shape (4, m, m)
        Σ z and Σ z² over the AR replicates, then over the white twins, of every pair's
        z = artanh(corr(residual_a, residual_b)).
    """
    return _core.sieve_moments(
        np.ascontiguousarray(coef, dtype=np.float64),
        np.ascontiguousarray(pool, dtype=np.float64),
        np.ascontiguousarray(picks, dtype=np.int64),
        np.ascontiguousarray(spread_path, dtype=np.float64),
        *_start_and_operators(coef, start, operators),
    )


def bias_refit_sums(
    coef: NDArray[np.float64],
    order: NDArray[np.int64],
    shocks: NDArray[np.float64],
    start: NDArray[np.float64] | None,
    operators: FactoredOperators,
    exogenous: tuple[NDArray[np.float64], NDArray[np.int64]],
) -> NDArray[np.float64]:
    """Sums over replicates of the AR coefficients refitted to simulated, residualised series.

    Parameters
    ----------
    coef : ndarray of shape (m, p)
        AR coefficients that generate (zero past each series' order).
    order : ndarray of int, shape (m,)
        Order of each series' refit (0: not refitted).
    shocks : ndarray of shape (b, m, steps)
        Innovations of b replicates, burn-in included.
    start : ndarray of shape (b, m, p), optional
        The p values before each replicate's first shock, oldest first (zeros when omitted).
    operators : FactoredOperators
        The control's residual operators (:func:`factor_operators`), n × n: the last n steps are kept,
        residualised and refitted.
    exogenous : tuple of ndarray
        The orthonormal bases (p, n − p, q) of each order's exogenous terms [1, z_t, …, z_{t−o}] on rows
        t = p … n − 1, zero-padded, and their ranks (p,).

    Returns
    -------
    ndarray of shape (m, p)
        Σ over replicates of the coefficients of AR(``order[j]``) fitted by least squares in the dynamic
        regression on series j's residuals (zero past the order).
    """
    return _core.sieve_bias_refit(
        np.ascontiguousarray(coef, dtype=np.float64),
        np.ascontiguousarray(order, dtype=np.int64),
        np.ascontiguousarray(shocks, dtype=np.float64),
        *_start_and_operators(coef, start, operators),
        np.ascontiguousarray(exogenous[0], dtype=np.float64),
        np.ascontiguousarray(exogenous[1], dtype=np.int64),
    )


def _start_and_operators(
    coef: NDArray[np.float64], start: NDArray[np.float64] | None, operators: FactoredOperators
) -> tuple[NDArray[np.float64], int, NDArray[np.float64], NDArray[np.float64]]:
    """The arguments both Rust kernels take after their own arrays: the start values ((0, 0, 0) for zeros), the
    steps kept (the operators' length n), and the operators' basis and mix."""
    initial = np.zeros((0, 0, 0)) if start is None or coef.shape[1] == 0 else np.ascontiguousarray(start)
    basis = np.ascontiguousarray(operators.basis, dtype=np.float64)
    return initial, basis.shape[0], basis, np.ascontiguousarray(operators.mix, dtype=np.float64)
