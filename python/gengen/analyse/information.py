"""How much information a run's checkpoints hold: repeated rows, stuck test sets, too few distinct points.

Fine-tuning trajectories are not the stationary noise that textbook tests assume. Two evaluations can see the
same weights (Pythia's steps 0 and 1 score identically on every task); an OOD test set can sit at chance from
the first evaluation on (a model answering "Yes" to everything scores 0.500 on HANS), so that all of its
residual is one spike at step 0; a test set can flip between two values; the ID score can take only a few
values. Counted as independent checkpoints, such rows give ``r = ±1``, ``p = 0`` and variance ratios of 1e15.
This module counts what is there, so that every row of the pairs table rests on the checkpoints that carry
information and says why when too few do (statsmodels' ``nobs``/``df_resid`` and R's ``cor.test`` refusing
fewer than 3 complete pairs are the models).

- :func:`collapse_repeats`: consecutive checkpoints whose scores are identical on every test set (ID included)
  are one checkpoint.
- :func:`column_information`: per test set, the longest stretch within measurement noise (a plateau counts as
  one checkpoint), the distinct values, and whether it is a function of a discrete ID score.
- :func:`pair_distinct_rows`: per pair, the distinct (ID, a, b) rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class ColumnInformation:
    """What one OOD test set's trajectory can tell within one run.

    Attributes
    ----------
    informative : int
        Checkpoints that carry information: the checkpoints less the longest plateau within measurement noise
        plus one, at most the distinct values, and at most the distinct ID values when the test set is a
        function of the ID score.
    reason : str
        Why the test set cannot support a test (empty when it can), in one line naming it.
    on_priors : int
        Checkpoints at which the score sits on the test set's class priors (:func:`class_prior_checkpoints`),
        counted as carrying no information.
    note : str
        One line naming those checkpoints (empty when there are none).
    """

    informative: int
    reason: str
    on_priors: int = 0
    note: str = ""


#: Values closer than this (relative to their size) are taken as equal: scores stored as decimals.
EQUAL_RELATIVE = 1e-12


def _equal_tolerance(values: np.ndarray) -> float:
    """Absolute tolerance under which two of ``values`` are the same number."""
    scale = float(np.nanmax(np.abs(values))) if values.size else 0.0
    return EQUAL_RELATIVE * max(1.0, scale)


def collapse_repeats(table: pd.DataFrame) -> tuple[pd.DataFrame, list[object]]:
    """Drop each row equal to the row before it in every column; return the rest and the dropped index labels.

    Two consecutive evaluations with identical scores on every test set (ID included) saw the same model, or
    nothing the test sets can resolve changed between them: they are one checkpoint, not two independent ones.

    Parameters
    ----------
    table : DataFrame
        Rows in training order (checkpoints), one column per test set, no missing values.

    Returns
    -------
    table : DataFrame
        The rows that differ from the row before them (the first row always stays).
    dropped : list
        Index labels (steps) of the rows left out.
    """
    if len(table) < 2:
        return table, []
    repeat = repeated_rows(table.to_numpy(dtype=float))
    return table[~repeat], list(table.index[repeat])


def repeated_rows(values: np.ndarray) -> np.ndarray:
    """Which rows of ``values`` (n, m; n ≥ 1) equal the row before them in every column (the first never does):
    the rows :func:`collapse_repeats` drops."""
    same = np.all(np.abs(np.diff(values, axis=0)) <= _equal_tolerance(values), axis=1)
    return np.concatenate([[False], same])


def measurement_noise(values: np.ndarray, n_examples: float | None) -> float:
    r"""Standard deviation of an accuracy measured on ``n_examples`` examples: :math:`\sqrt{p(1-p)/N}`.

    ``p`` is the median of ``values``; 0 when ``n_examples`` is unknown or the values are not proportions
    (then only exactly equal values count as the same).
    """
    if n_examples is None or not math.isfinite(n_examples) or n_examples < 1 or values.size == 0:
        return 0.0
    if np.nanmin(values) < 0 or np.nanmax(values) > 1:
        return 0.0
    p = float(np.median(values))
    return math.sqrt(max(p * (1 - p), 0.0) / n_examples)


def longest_plateau(values: np.ndarray, tolerance: float) -> tuple[int, int]:
    """``(start, stop)`` of the longest run of consecutive values whose range is at most ``tolerance`` (the
    earliest of the longest); :func:`longest_plateaus` of one column."""
    if values.size == 0:
        return 0, 0
    starts, stops = longest_plateaus(np.asarray(values, dtype=float)[:, None], np.array([tolerance], dtype=float))
    return int(starts[0]), int(stops[0])


def longest_plateaus(values: np.ndarray, tolerances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``values`` (n, m), ``(start, stop)`` of the earliest longest run of consecutive rows whose
    range is at most that column's tolerance.

    The windows grow one row at a time for all columns and starts at once (the running maximum and minimum of
    every window of the current length), and stop growing as soon as no column has a window of that length
    within its tolerance: a plateau of length L holds plateaus of every shorter length, so the cost is
    O(n·m·L) for the longest plateau L found (noisy trajectories: a few rows).
    """
    n, m = values.shape
    starts = np.zeros(m, dtype=np.int64)
    lengths = np.full(m, 1 if n else 0, dtype=np.int64)
    highs, lows = values.copy(), values.copy()
    for length in range(2, n + 1):
        # Windows [s, s + length) for s = 0 … n − length: extend the windows of one row fewer by row s + length − 1.
        highs = np.maximum(highs[:-1], values[length - 1 :])
        lows = np.minimum(lows[:-1], values[length - 1 :])
        within = highs - lows <= tolerances
        found = within.any(axis=0)
        if not found.any():
            break
        lengths[found] = length
        starts[found] = np.argmax(within[:, found], axis=0)
    return starts, starts + lengths


#: A pair of complementary scores k/N and 1 − k/N is taken for a binary task's class priors only when it lies
#: beyond this many binomial standard deviations of chance (√(0.25/N)) from 0.5: nearer, "always one answer"
#: cannot be told from guessing.
PRIOR_DISTANCE_SD = 2.0
#: Fewest checkpoints on a pair of complementary scores for them to be read as class priors (two could meet by
#: chance).
PRIOR_MINIMUM = 3


def class_prior_checkpoints(values: np.ndarray, n_examples: float | None) -> tuple[np.ndarray, tuple[float, float]]:
    """The checkpoints at which an accuracy on ``n_examples`` examples sits on the class priors of a binary task.

    A model that gives every example of a two-class test set the same answer scores exactly the share of that
    class, k/N, or of the other, 1 − k/N. A test set whose scores are whole counts out of N and take both
    complementary values k/N and (N − k)/N at :data:`PRIOR_MINIMUM` or more checkpoints in all, with k/N more
    than :data:`PRIOR_DISTANCE_SD` binomial standard deviations of chance from 0.5, is read as sitting on its
    priors there (Pythia's 104-example wsc: 38/104 = 0.365 and 66/104 = 0.635): those checkpoints say which
    answer the model prefers, not how well it reads. The most frequent such pair is taken.

    Parameters
    ----------
    values : ndarray, shape (n,)
        The test set's accuracies as stored (in [0, 1]).
    n_examples : float, optional
        Examples it was scored on (None or NaN: nothing is detected).

    Returns
    -------
    on_priors : ndarray of bool, shape (n,)
        The checkpoints on the priors.
    priors : tuple of float
        The two prior scores (NaN when none were found).

    Examples
    --------
    >>> wsc = np.array([38, 66, 38, 66, 52, 38, 38, 60, 66, 38]) / 104
    >>> on, priors = class_prior_checkpoints(wsc, 104)
    >>> int(on.sum()), tuple(round(p, 3) for p in priors)
    (8, (0.365, 0.635))
    """
    none = (np.zeros(values.shape, dtype=bool), (math.nan, math.nan))
    if n_examples is None or not math.isfinite(n_examples) or n_examples < 2 or values.size == 0:
        return none
    if not np.isfinite(values).all() or values.min() < 0 or values.max() > 1:
        return none
    n = float(round(n_examples))
    counts = values * n
    whole = np.round(counts)
    if np.abs(counts - whole).max() > 1e-6 * n:  # not whole counts out of N: not a plain accuracy on N examples
        return none
    found, size = np.unique(whole, return_counts=True)
    frequency = dict(zip(found.tolist(), size.tolist(), strict=True))
    far = PRIOR_DISTANCE_SD * math.sqrt(0.25 / n)
    best, best_count = None, 0
    for low in found.tolist():
        high = n - low
        if low < high and high in frequency and abs(low / n - 0.5) > far:
            together = frequency[low] + frequency[high]
            if together >= PRIOR_MINIMUM and together > best_count:
                best, best_count = (low, high), together
    if best is None:
        return none
    return np.isin(whole, best), (best[0] / n, best[1] / n)


def _span(steps: np.ndarray, start: int, stop: int) -> str:
    """'checkpoints 4–11 (steps 300–3000)' in 1-based checkpoint numbers."""
    first, last = steps[start], steps[stop - 1]
    return f"checkpoints {start + 1}–{stop} (steps {first}–{last})"


def column_information(
    scores: pd.DataFrame,
    id_values: np.ndarray,
    steps: np.ndarray,
    *,
    minimum: int,
    n_examples: dict[str, float] | None = None,
    signs: dict[str, float] | None = None,
) -> dict[str, ColumnInformation]:
    """What each OOD test set's trajectory in one run can tell (see :class:`ColumnInformation`).

    Parameters
    ----------
    scores : DataFrame, shape (n, m)
        OOD scores of the run's checkpoints (sign-adjusted), in training order.
    id_values : ndarray, shape (n,)
        The ID score of each checkpoint.
    steps : ndarray, shape (n,)
        The checkpoints' steps (for the messages).
    minimum : int
        Fewest informative checkpoints a test set needs to be tested.
    n_examples : dict, optional
        Test set → examples it was scored on (its accuracies are then compared within their binomial
        measurement noise, :func:`measurement_noise`).
    signs : dict, optional
        Test set → the sign applied to its scores (to print values as stored).

    Returns
    -------
    dict
        Test set → :class:`ColumnInformation`.
    """
    n = len(scores)
    distinct_id = np.unique(np.round(id_values / _equal_tolerance(id_values))).size
    names = list(scores.columns)
    values = scores.to_numpy(dtype=float).reshape(n, len(names))
    signs_of = np.array([(signs or {}).get(name, 1.0) for name in names], dtype=float)
    shown = values * signs_of
    noise = np.array([measurement_noise(shown[:, j], (n_examples or {}).get(name)) for j, name in enumerate(names)])
    equal = EQUAL_RELATIVE * np.maximum(1.0, np.abs(values).max(axis=0, initial=0.0))  # _equal_tolerance per column
    tolerance = np.maximum(noise, equal)
    starts, stops = longest_plateaus(values, tolerance)
    keys = np.sort(np.round(values / equal), axis=0)
    distinct = (1 + np.count_nonzero(np.diff(keys, axis=0), axis=0)) if n else np.zeros(len(names), dtype=np.int64)
    out: dict[str, ColumnInformation] = {}
    for j, name in enumerate(names):
        start, stop = int(starts[j]), int(stops[j])
        informative = n - (stop - start) + 1
        reason = ""
        if informative < minimum:
            within = f" within measurement noise (±{noise[j]:.2g})" if noise[j] > 0 else ""
            level = float(np.median(shown[start:stop, j]))
            reason = (
                f"{name}: {level:.3f} on {_span(steps, start, stop)}, {stop - start} of {n}{within}; "
                "nothing left to correlate"
            )
        on_priors, priors = class_prior_checkpoints(shown[:, j], (n_examples or {}).get(name))
        prior_count = int(on_priors.sum())
        note = ""
        if prior_count:
            informative = min(informative, n - prior_count)
            note = (
                f"{name}: on its class priors ({priors[0]:.3f} / {priors[1]:.3f}: one answer to every example) at "
                f"{prior_count} of {n} checkpoints; counted as no information there"
            )
            if not reason and informative < minimum:
                reason = f"{note}, which leaves {informative}: nothing left to correlate"
        if not reason and distinct[j] < 3:
            informative = min(informative, int(distinct[j]))
            shown_values = ", ".join(f"{value:.3f}" for value in sorted(set(np.round(shown[:, j], 6)))[:2])
            reason = f"{name}: takes only {distinct[j]} distinct values ({shown_values}) over {n} checkpoints"
        if not reason and distinct_id < n and _function_of(values[:, j], id_values, float(tolerance[j])):
            informative = min(informative, distinct_id)
            if informative < minimum:
                reason = (
                    f"{name}: a function of the ID score, which takes {distinct_id} distinct values over {n} "
                    "checkpoints; nothing left to correlate"
                )
        out[name] = ColumnInformation(informative=int(informative), reason=reason, on_priors=prior_count, note=note)
    return out


def _function_of(values: np.ndarray, id_values: np.ndarray, tolerance: float) -> bool:
    """Whether ``values`` are the same (within ``tolerance``) wherever the ID score is."""
    order = np.argsort(id_values, kind="stable")
    keys = np.round(id_values[order] / _equal_tolerance(id_values))
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    sorted_values = values[order]
    spread = np.maximum.reduceat(sorted_values, starts) - np.minimum.reduceat(sorted_values, starts)
    return bool((spread <= tolerance).all())


def pair_distinct_rows(scores: np.ndarray, id_values: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """For each pair (a, b), the number of distinct (ID, a, b) rows: repeats carry no new information.

    Only checkpoints that share their ID score with an earlier one can repeat a row; for each such checkpoint
    a pair loses it when both of its test sets equal those of one of the earlier ones.
    """
    n, m = scores.shape
    keys = np.round(id_values / _equal_tolerance(id_values))
    tolerance = np.array([_equal_tolerance(scores[:, j]) for j in range(m)])
    repeated = np.zeros((m, m), dtype=int)
    first_seen: dict[float, list[int]] = {}
    for t in range(n):
        earlier = first_seen.setdefault(float(keys[t]), [])
        if earlier:
            same = np.abs(scores[earlier] - scores[t]) <= tolerance  # (earlier, m)
            both = np.zeros((m, m), dtype=bool)
            for row in same:
                both |= np.outer(row, row)
            repeated += both
        earlier.append(t)
    return n - repeated[rows, cols]
