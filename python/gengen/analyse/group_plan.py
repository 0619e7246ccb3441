"""What a group of rows is and which tests it can have: the pairs table's columns, the size check, the plan.

A group's ``level`` (:data:`GroupMode`) decides the tests its rows get (:func:`plan_group`); every column
builder of :mod:`gengen.analyse.pairs` reads that plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from gengen import stats
from gengen.analyse.data import RUN_COLUMNS, Group
from gengen.analyse.options import Settings
from gengen.errors import GengenError

#: Column order of the pairs table (run-level columns absent from the score table are left out).
PAIR_COLUMNS = (
    "level",
    "model",
    "run",
    *RUN_COLUMNS,
    "runs",
    "id_testset",
    "id_metric",
    "testset_a",
    "testset_b",
    "related",
    "related_reason",
    "metric",
    "sign",
    "n",
    "n_steps",
    "n_informative",
    "k",
    "df",
    "edf_a",
    "edf_b",
    "r_raw",
    "r_partial",
    "ci_low",
    "ci_high",
    "ci_level",
    "ci_method",
    "p_deciding",
    "p_deciding_method",
    "p_adjusted",
    "p_adjusted_from",
    "adjust",
    "significant",
    "p_fdr",
    "r_detectable",
    "testable",
    "untestable_reason",
    "p_loo_max",
    "influential_step",
    "influence",
    "verdict_note",
    "estimand",
    "diagnostics",
    "se_z",
    "df_sieve",
    "p_sieve",
    "p_sieve_method",
    "ar_order_a",
    "ar_order_b",
    "p_null_above",
    "statistic",
    "p_value",
    "p_value_method",
    "p_perm",
    "p_perm_method",
    "boot_ci_low",
    "boot_ci_high",
    "boot_ci_method",
    "n_boot_valid",
    "r_innovation",
    "df_lagged",
    "p_lagged",
    "p_lagged_method",
    "ci_low_innovation",
    "ci_high_innovation",
    "fit",
    "fit_reason",
    "method",
    "inference",
    "scheme",
    "block_length",
    "acf1_a",
    "acf1_b",
    "autocorr_high",
)


def pair_values(matrix: Any, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The upper-triangle entries of a (m, m) result (scalars are broadcast)."""
    values = np.asarray(matrix, dtype=float)
    if values.ndim == 0:
        return np.full(rows.size, float(values))
    return values[rows, cols]


def minimum_rows(k: int) -> int:
    """Fewest observations for which the t-test has df = n - 2 - k ≥ 2 and the Fisher-z interval exists."""
    return k + 4


def check_size(group: Group, k: int) -> None:
    """Raise :class:`GengenError` when ``group`` has too few rows for the tests (df = n - 2 - k < 2)."""
    n = len(group.id_values)
    if n < minimum_rows(k):
        what = "runs" if group.level == "across_runs" else "checkpoints"
        raise GengenError(
            f"{group.label}: {n} {what} with every score present, too few for the tests "
            f"(df = n - 2 - k = {n - 2 - k} with k = {k}; need at least {minimum_rows(k)} {what})"
        )


#: What a group's rows are (its ``level``), which decides the tests it can have:
#:
#: - ``"run"``: one run's checkpoints in training order. Every test asked for; the sieve, the lagged test and
#:   the autocorrelation check need that order, and the permutation and the bootstrap use the chosen scheme.
#: - ``"across_runs"``: one score per run, in no order: the permutation is free and the bootstrap iid, and
#:   there is no sieve, lagged test or autocorrelation check.
#: - ``"pooled_residuals"``: the stacked within-run residuals of a cell's runs (:mod:`gengen.analyse.pooled`):
#:   the t-test only, on degrees of freedom that its ``p_value_method`` states.
GroupMode = Literal["run", "across_runs", "pooled_residuals"]
GROUP_MODES: tuple[GroupMode, ...] = get_args(GroupMode)


@dataclass(frozen=True)
class GroupPlan:
    """The tests one group gets, and the resampling they use (from its mode and the settings)."""

    mode: GroupMode
    sieve: bool
    lagged: bool
    permutation: bool
    bootstrap: bool
    permutation_scheme: str
    bootstrap_scheme: str
    block_length: int | None

    @property
    def ordered(self) -> bool:
        """Whether the rows are checkpoints in training order (the autocorrelation check needs it)."""
        return self.mode == "run"


def group_mode(group: Group) -> GroupMode:
    """A group's mode: its ``level``, checked."""
    for mode in GROUP_MODES:
        if group.level == mode:
            return mode
    raise GengenError(f"{group.label}: level {group.level!r} is not one of {', '.join(GROUP_MODES)}")


def plan_group(mode: GroupMode, settings: Settings, n: int) -> GroupPlan:
    """Which of the asked-for tests a group of ``n`` rows in ``mode`` can have, and their schemes."""
    ordered = mode == "run"
    resampled = mode != "pooled_residuals"
    across = mode == "across_runs"
    permutation_scheme = "free" if across else settings.permutation_scheme
    bootstrap_scheme = "iid" if across else settings.bootstrap_scheme
    block_length = None
    if permutation_scheme != "free" or bootstrap_scheme != "iid":
        block_length = settings.block_length or int(stats.default_block_length(n))
    return GroupPlan(
        mode=mode,
        sieve="sieve" in settings.inference and ordered,
        lagged="lagged" in settings.inference and ordered,
        permutation="permutation" in settings.inference and resampled,
        bootstrap="bootstrap" in settings.inference and resampled,
        permutation_scheme=permutation_scheme,
        bootstrap_scheme=bootstrap_scheme,
        block_length=block_length,
    )
