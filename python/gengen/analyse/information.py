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
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Values closer than this (relative to their size) are taken as equal: scores stored as decimals.
EQUAL_RELATIVE = 1e-12


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
    """

    informative: int
    reason: str


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
    values = table.to_numpy(dtype=float)
    same = np.all(np.abs(np.diff(values, axis=0)) <= _equal_tolerance(values), axis=1)
    repeat = np.concatenate([[False], same])
    return table[~repeat], list(table.index[repeat])


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
    """``(start, stop)`` of the longest run of consecutive values whose range is at most ``tolerance``.

    A sliding window with monotone queues of its maxima and minima: O(n).
    """
    best = (0, 1 if values.size else 0)
    highs: deque[int] = deque()
    lows: deque[int] = deque()
    start = 0
    for stop, value in enumerate(values):
        while highs and values[highs[-1]] <= value:
            highs.pop()
        highs.append(stop)
        while lows and values[lows[-1]] >= value:
            lows.pop()
        lows.append(stop)
        while values[highs[0]] - values[lows[0]] > tolerance:
            start += 1
            if highs[0] < start:
                highs.popleft()
            if lows[0] < start:
                lows.popleft()
        if stop + 1 - start > best[1] - best[0]:
            best = (start, stop + 1)
    return best


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
    out: dict[str, ColumnInformation] = {}
    for name in scores.columns:
        values = scores[name].to_numpy(dtype=float)
        sign = (signs or {}).get(name, 1.0)
        shown = values * sign
        noise = measurement_noise(shown, (n_examples or {}).get(name))
        tolerance = max(noise, _equal_tolerance(values))
        start, stop = longest_plateau(values, tolerance)
        informative = n - (stop - start) + 1
        reason = ""
        if informative < minimum:
            within = f" within measurement noise (±{noise:.2g})" if noise > 0 else ""
            level = float(np.median(shown[start:stop]))
            reason = (
                f"{name}: {level:.3f} on {_span(steps, start, stop)}, {stop - start} of {n}{within}; "
                "nothing left to correlate"
            )
        distinct = np.unique(np.round(values / _equal_tolerance(values))).size
        if not reason and distinct < 3:
            informative = min(informative, distinct)
            shown_values = ", ".join(f"{value:.3f}" for value in sorted(set(np.round(shown, 6)))[:2])
            reason = f"{name}: takes only {distinct} distinct values ({shown_values}) over {n} checkpoints"
        if not reason and distinct_id < n and _function_of(values, id_values, tolerance):
            informative = min(informative, distinct_id)
            if informative < minimum:
                reason = (
                    f"{name}: a function of the ID score, which takes {distinct_id} distinct values over {n} "
                    "checkpoints; nothing left to correlate"
                )
        out[name] = ColumnInformation(informative=int(informative), reason=reason)
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
