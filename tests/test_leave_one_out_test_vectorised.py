"""``leave_one_out_test`` over all pairs at once equals the per-pair loop it replaced (issue 27)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gengen.stats.influence import _directional_p, _half_width, leave_one_out_test


def per_pair(
    r: np.ndarray, deleted: np.ndarray, se: np.ndarray, dof: np.ndarray, fisher: np.ndarray, share: float, level: float
) -> tuple[np.ndarray, ...]:
    """The loop of ``leave_one_out_test`` before issue 27 (p_max, worst, influence, r_worst, ci_low, ci_high)."""
    sign = np.where(r < 0, -1.0, 1.0)
    z_full = np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15))
    with np.errstate(divide="ignore", invalid="ignore"):
        se_deleted = np.where(fisher > 1.0, se * np.sqrt(fisher / (fisher - 1.0)), np.nan)
        df_deleted = 1.0 / se_deleted**2 + 1.0
    z_deleted = np.arctanh(np.clip(deleted, -1 + 1e-15, 1 - 1e-15))
    directional = np.where(np.isfinite(z_deleted), sign * z_deleted, -np.inf)
    pairs = r.size
    p_max, influence, r_worst = np.full(pairs, np.nan), np.full(pairs, np.nan), np.full(pairs, np.nan)
    worst = np.full(pairs, -1, dtype=np.int64)
    low, high = np.full(pairs, np.nan), np.full(pairs, np.nan)
    for j in range(pairs):
        half_full = _half_width(float(se[j]), float(dof[j]), level)
        half_deleted = _half_width(float(se_deleted[j]), float(df_deleted[j]), level)
        if not (math.isfinite(half_full) and math.isfinite(half_deleted)):
            continue
        magnitude = abs(float(z_full[j]))
        p_max[j] = _directional_p(magnitude / float(se[j]), float(dof[j]))
        low[j], high[j] = z_full[j] - half_full, z_full[j] + half_full
        if magnitude <= 1e-12:
            continue
        with np.errstate(invalid="ignore"):
            removed = 1.0 - np.minimum(directional[:, j], 1e300) / magnitude
        worst[j] = int(np.argmax(removed))
        influence[j] = float(removed[worst[j]]) if np.isfinite(directional[worst[j], j]) else 1.0
        r_worst[j] = deleted[worst[j], j]
        with np.errstate(invalid="ignore"):
            carrying = removed > share
        if not carrying.any():
            continue
        weakest = float(directional[carrying, j].min())
        p_max[j] = max(p_max[j], _directional_p(weakest / float(se_deleted[j]), float(df_deleted[j])))
        kept = z_deleted[carrying, j]
        finite = kept[np.isfinite(kept)]
        if finite.size:
            low[j] = min(low[j], float(finite.min()) - half_deleted)
            high[j] = max(high[j], float(finite.max()) + half_deleted)
        if finite.size < kept.size:
            low[j], high[j] = min(low[j], 0.0), max(high[j], 0.0)
    return p_max, worst, influence, r_worst, np.tanh(low), np.tanh(high)


@pytest.mark.parametrize("seed", range(8))
def test_vectorised_equals_the_per_pair_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, pairs = int(rng.integers(6, 40)), int(rng.integers(1, 300))
    r = np.tanh(rng.normal(0, 0.5, pairs))
    r[rng.random(pairs) < 0.05] = np.nan
    r[rng.random(pairs) < 0.03] = 0.0
    deleted = np.clip(r + rng.normal(0, 0.3, (n, pairs)), -0.999, 0.999)
    deleted[rng.random((n, pairs)) < 0.03] = np.nan
    se = rng.uniform(0.05, 0.5, pairs)
    se[rng.random(pairs) < 0.05] = np.nan
    df = np.where(rng.random(pairs) < 0.05, np.inf, rng.uniform(2, 40, pairs))
    fisher = rng.uniform(0.5, 40, pairs)
    share, level = (0.5, 0.95) if seed % 2 else (0.3, 0.9)
    got = leave_one_out_test(r, deleted, se, df, fisher_df=fisher, share=share, ci_level=level)
    expected = per_pair(r, deleted, se, df, fisher, share, level)
    fields = (got.p_max, got.worst, got.influence, got.r_worst, got.ci_low, got.ci_high)
    for name, value, reference in zip(
        ("p_max", "worst", "influence", "r_worst", "low", "high"), fields, expected, strict=True
    ):
        np.testing.assert_array_equal(value, reference, err_msg=name)
