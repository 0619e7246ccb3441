"""Seeded random and adversarial data sets for the R cross-validation tests.

Each case is a matrix whose columns are x, y, z1, ..., zk. It is generated in numpy from the case's own seed,
so a failing case id reproduces alone: ``make_case("offset-003").data()``.

Kinds (counts in ``KIND_COUNTS``):

- ``random``: n log-uniform in 5..1000, k in 1..3, correlated covariates, x and y linked through the
  covariates and directly;
- ``ties``: every column rounded to a few distinct values (accuracy-like grids and small integers);
- ``collinear``: z2 = z1 + delta * noise with delta from 1e-2 down to 1e-6 (and z3 likewise when k = 3);
- ``scale``: each column multiplied by 10**u, u uniform in [-3, 6];
- ``offset``: each column shifted by 1e8 (after a scale in 1e-3..1e5). R receives the same numbers shifted
  back by exactly 1e8 (``r_data``; exact by Sterbenz's lemma, asserted), so R's own loss of digits on offset data
  (``lm`` does not centre) does not enter the reference, while gengen gets the offset data;
- ``strong``: y = x + small noise, |r| close to 1, p-values far in the tail (down to underflow);
- ``small``: n = 5..7 with the largest k the degrees of freedom allow (df = n - 2 - k >= 1);
- ``nocovar``: k = 0, plain correlations;
- ``large``: n = 1000, k = 3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OFFSET = 1e8

KIND_COUNTS: dict[str, int] = {
    "random": 100,
    "ties": 25,
    "collinear": 20,
    "scale": 20,
    "offset": 20,
    "strong": 12,
    "small": 15,
    "nocovar": 15,
    "large": 5,
}

_KIND_SEED = {kind: 1000 * (i + 1) for i, kind in enumerate(KIND_COUNTS)}


@dataclass(frozen=True)
class Case:
    """One data set: gengen gets ``data``, R gets ``r_data`` (equal except for ``offset`` cases)."""

    case_id: str
    kind: str
    seed: int

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def data(self) -> np.ndarray:
        """The (n, 2 + k) matrix passed to gengen."""
        return _GENERATORS[self.kind](self._rng())

    def r_data(self) -> np.ndarray:
        """The matrix passed to R: ``data`` with any 1e8 offset removed exactly."""
        data = self.data()
        if self.kind != "offset":
            return data
        shifted = data - OFFSET
        if not np.array_equal(shifted + OFFSET, data):
            raise AssertionError(f"{self.case_id}: removing the offset was not exact")
        return shifted

    @property
    def n(self) -> int:
        return self.data().shape[0]

    @property
    def k(self) -> int:
        return self.data().shape[1] - 2


def _linked(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Correlated covariates, x and y depending on them and on each other."""
    mixing = np.eye(k) + rng.uniform(-0.6, 0.6, size=(k, k)) if k else np.zeros((0, 0))
    z = rng.standard_normal((n, k)) @ mixing
    x = z @ rng.uniform(-1.5, 1.5, size=k) + rng.standard_normal(n)
    y = z @ rng.uniform(-1.5, 1.5, size=k) + rng.uniform(-0.8, 0.8) * x + rng.standard_normal(n)
    return np.column_stack([x, y, z])


def _random(rng: np.random.Generator) -> np.ndarray:
    n = round(float(np.exp(rng.uniform(np.log(5), np.log(1000)))))
    k = int(rng.integers(1, 4))
    return _linked(rng, max(n, k + 3), k)


def _ties(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(8, 300))
    k = int(rng.integers(1, 4))
    data = _linked(rng, n, k)
    grid = rng.choice([2.0, 4.0, 0.5, 20.0])
    data = np.round(data * grid) / grid
    for j in range(data.shape[1]):
        if np.unique(data[:, j]).size < 2:
            data[0, j] += 1.0
    return data


def _collinear(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(20, 400))
    k = int(rng.integers(2, 4))
    delta = 10.0 ** -rng.integers(2, 7)
    data = _linked(rng, n, k)
    for j in range(3, 2 + k):
        data[:, j] = data[:, 2] + delta * rng.standard_normal(n)
    return data


def _scale(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(6, 500))
    k = int(rng.integers(1, 4))
    data = _linked(rng, max(n, k + 4), k)
    return data * 10.0 ** rng.uniform(-3, 6, size=data.shape[1])


def _offset(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(6, 500))
    k = int(rng.integers(1, 4))
    data = _linked(rng, max(n, k + 4), k)
    return data * 10.0 ** rng.uniform(-3, 5, size=data.shape[1]) + OFFSET


def _strong(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(10, 800))
    k = int(rng.integers(1, 4))
    data = _linked(rng, n, k)
    noise = 10.0 ** -rng.uniform(0.5, 4)
    data[:, 1] = rng.choice([-1.0, 1.0]) * data[:, 0] + noise * rng.standard_normal(n)
    return data


def _small(rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(5, 8))
    k = min(3, n - 3)
    return _linked(rng, n, k)


def _nocovar(rng: np.random.Generator) -> np.ndarray:
    n = round(float(np.exp(rng.uniform(np.log(5), np.log(1000)))))
    data = _linked(rng, n, 0)
    if rng.random() < 0.4:
        data = np.round(data * 2) / 2
    return data


def _large(rng: np.random.Generator) -> np.ndarray:
    return _linked(rng, 1000, 3)


_GENERATORS = {
    "random": _random,
    "ties": _ties,
    "collinear": _collinear,
    "scale": _scale,
    "offset": _offset,
    "strong": _strong,
    "small": _small,
    "nocovar": _nocovar,
    "large": _large,
}


def make_case(case_id: str) -> Case:
    """The case named ``case_id`` (``kind-NNN``)."""
    kind, number = case_id.rsplit("-", 1)
    return Case(case_id=case_id, kind=kind, seed=_KIND_SEED[kind] + int(number))


CASES: list[Case] = [make_case(f"{kind}-{i:03d}") for kind, count in KIND_COUNTS.items() for i in range(count)]


def p_value_vectors(seed: int = 7, count: int = 40) -> list[np.ndarray]:
    """P-value vectors for p.adjust: uniform, tiny, tied, exact 0 and 1, NaN, lengths 1..300."""
    rng = np.random.default_rng(seed)
    vectors = [np.array([0.03]), np.array([np.nan]), np.array([0.0, 1.0]), np.array([0.5, 0.5, 0.5])]
    while len(vectors) < count:
        m = int(rng.integers(1, 300))
        p = rng.uniform(size=m) ** rng.uniform(0.3, 6)
        if rng.random() < 0.3:
            p = np.round(p, 2)
        if rng.random() < 0.3:
            p[rng.random(m) < 0.2] = np.nan
        if rng.random() < 0.2:
            p[rng.integers(0, m)] = 1.0
        if rng.random() < 0.2:
            p = p * 1e-12
        vectors.append(p)
    return vectors
