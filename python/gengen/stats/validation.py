"""Input checks shared by every statistic: arrays, option choices, counts, seeds, threads.

Each check raises :class:`gengen.errors.InvalidArgumentError` (a ``ValueError``) whose message starts with the
argument at fault, so a user sees which input to fix; none allocates more than the converted input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from gengen.errors import InvalidArgumentError
from gengen.stats import limits
from gengen.stats.options import RESIDUAL_METHODS


def column_names(labels: list[str] | None, m: int) -> list[str]:
    return labels if labels is not None else [str(i) for i in range(m)]


def as_float_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    if isinstance(value, pd.DataFrame | pd.Series):
        value = value.to_numpy()
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise InvalidArgumentError(f"{name}: must be numeric ({error})") from None
    return array


def as_vector(name: str, value: ArrayLike) -> NDArray[np.float64]:
    array = as_float_array(name, value)
    if array.ndim != 1:
        raise InvalidArgumentError(f"{name}: must be one-dimensional, got shape {array.shape}")
    return np.ascontiguousarray(array)


def as_covar(covar: ArrayLike | None, n: int) -> NDArray[np.float64]:
    if covar is None:
        return np.zeros((n, 0))
    array = as_float_array("covar", covar)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise InvalidArgumentError(f"covar: must be one- or two-dimensional, got shape {array.shape}")
    if array.shape[0] != n:
        raise InvalidArgumentError(f"covar: has {array.shape[0]} rows but the data have {n}")
    return array


def as_table(name: str, value: ArrayLike) -> tuple[NDArray[np.float64], list[str] | None]:
    labels = [str(c) for c in value.columns] if isinstance(value, pd.DataFrame) else None
    array = as_float_array(name, value)
    if array.ndim != 2:
        raise InvalidArgumentError(
            f"{name}: must be two-dimensional (observations × variables), got shape {array.shape}"
        )
    return array, labels


def labelled(matrix: NDArray[np.float64], labels: list[str] | None) -> NDArray[np.float64] | pd.DataFrame:
    return matrix if labels is None else pd.DataFrame(matrix, index=labels, columns=labels)


def as_runs(
    scores: Sequence[ArrayLike], covar: Sequence[ArrayLike | None] | None
) -> tuple[list[NDArray[np.float64]], list[NDArray[np.float64]], list[list[str] | None]]:
    if isinstance(scores, np.ndarray) and scores.ndim == 3:
        scores = list(scores)
    if isinstance(covar, np.ndarray) and covar.ndim == 3:
        covar = list(covar)
    if covar is None:
        covar = [None] * len(scores)
    if len(covar) != len(scores):
        raise InvalidArgumentError(f"covar: {len(covar)} covariate matrices for {len(scores)} runs of scores")
    tables, covars, labels = [], [], []
    for index, (run_scores, run_covar) in enumerate(zip(scores, covar, strict=True)):
        table, names = as_table(f"scores[{index}]", run_scores)
        tables.append(table)
        covars.append(as_covar(run_covar, table.shape[0]))
        labels.append(names)
    return tables, covars, labels


def one_run(batch: Callable[..., list[Any]], arguments: dict[str, Any]) -> Any:
    """A batch function's result for one run: ``arguments`` are the single-run function's ``locals()``.

    The single-run functions (:func:`~gengen.stats.permutation_test` …) take the batch function's options by
    name; ``scores`` and ``covar`` become one-run lists, ``gam_options`` is passed on as keywords.
    """
    options = dict(arguments)
    scores, covar, gam_options = options.pop("scores"), options.pop("covar"), options.pop("gam_options", {})
    return batch([scores], None if covar is None else [covar], **options, **gam_options)[0]


def trajectory_inputs(
    scores: ArrayLike, covar: ArrayLike | None, method: str
) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str] | None]:
    """Scores (checkpoints × test sets), the control and the column labels, checked for the tests of trajectories.

    The lagged, prewhitened and sieve tests correlate residual series, so they take the correlations that have
    a residual form only (``method`` in :data:`~gengen.stats.options.RESIDUAL_METHODS`).
    """
    check_choice("method", method, RESIDUAL_METHODS)
    data, labels = as_table("scores", scores)
    return data, as_covar(covar, data.shape[0]), labels


def check_choice(name: str, value: object, choices: Sequence[object]) -> None:
    if value not in choices:
        expected = ", ".join(repr(c) for c in choices)
        raise InvalidArgumentError(f"{name}: unknown value {value!r}; expected one of {expected}")


def check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= int(seed) < 2**64:
        raise InvalidArgumentError(f"seed: must be an integer in [0, 2**64), got {seed!r}")
    return int(seed)


def check_count(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < minimum:
        raise InvalidArgumentError(f"{name}: must be an integer ≥ {minimum}, got {value!r}")
    return int(value)


def check_threads(n_threads: int | None) -> int | None:
    if n_threads is None:
        return None
    return limits.check_threads(check_count("n_threads", n_threads, 1))


def check_block_length(block_length: int | None) -> int | None:
    return None if block_length is None else check_count("block_length", block_length, 1)
