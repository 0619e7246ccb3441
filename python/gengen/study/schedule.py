"""A run's schedule, a pure function of the study's settings: its steps, the batches of each step, the
learning rate of each step, and the steps at which it is scored.

Both ``gengen plan`` (before anything loads) and the trainer read it from here, so a plan counts exactly the
steps and evaluations a run will take. Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from gengen.errors import ConfigError
from gengen.study.training_config import MAX_EVALUATIONS, MAX_STEPS

if TYPE_CHECKING:
    from gengen.study.tables import EvaluationConfig
    from gengen.study.training_config import TrainingConfig

__all__ = [
    "epoch_steps",
    "evaluation_steps",
    "fewer_evaluations_note",
    "learning_rate_factor",
    "planned_steps",
    "steps_per_epoch",
    "update_batches",
    "update_indices",
]


def epoch_steps(n_train: int, batch_size: int, grad_accum: int = 1) -> int:
    """Optimiser steps of one pass over ``n_train`` examples in micro-batches of ``batch_size``.

    An epoch is ceil(n_train / batch_size) micro-batches (the last one smaller), and an optimiser step takes
    ``grad_accum`` of them (the epoch's last step takes what is left), so a batch never spans two epochs.

    Examples
    --------
    >>> epoch_steps(16, 32)  # 16 shots with batch 32: one step of 16 examples per epoch
    1
    >>> epoch_steps(100, 8, grad_accum=4)  # 13 micro-batches, four per step
    4
    """
    return max(1, math.ceil(math.ceil(n_train / batch_size) / grad_accum))


def steps_per_epoch(training: TrainingConfig, n_train: int) -> int:
    """Optimiser steps of one pass over the training data, as in Hugging Face's Trainer (:func:`epoch_steps`
    with the study's ``batch_size`` and ``grad_accum``)."""
    return epoch_steps(n_train, training.batch_size, training.grad_accum)


def planned_steps(training: TrainingConfig, n_train: int) -> int:
    """Optimiser steps of a run: ``max_steps``, or ceil(``epochs`` × :func:`steps_per_epoch`).

    Raises
    ------
    ConfigError
        More than :data:`gengen.study.training_config.MAX_STEPS` steps, naming ``training.epochs`` and what would fit.
    """
    if training.max_steps is not None:
        return training.max_steps
    assert training.epochs is not None
    per_epoch = steps_per_epoch(training, n_train)
    total = training.epochs * per_epoch
    if total > MAX_STEPS:
        raise ConfigError(
            f"training.epochs: {training.epochs:g} epochs of {per_epoch:,} steps ({n_train:,} examples) are "
            f"{total:,.0f} optimiser steps per run, above the limit of {MAX_STEPS:,}; set epochs to at most "
            f"{MAX_STEPS / per_epoch:g} (or max_steps)"
        )
    return max(1, math.ceil(total))


def evaluation_steps(evaluation: EvaluationConfig, total: int) -> list[int]:
    """The steps at which a run is scored: 0, the last step, and those the evaluation settings ask for.

    ``every`` adds multiples of N; ``log_points`` adds that many steps spaced evenly in log(step) between 1
    and ``total`` (rounded, duplicates removed); explicit ``steps`` beyond ``total`` are ignored.

    Raises
    ------
    ConfigError
        The settings could ask for more than :data:`gengen.study.training_config.MAX_EVALUATIONS` evaluations of a run
        (checked before any step is listed), naming the setting and what would fit.
    """
    _check_evaluation_count(evaluation, total)
    steps = {0, total}
    steps.update(s for s in evaluation.steps if s <= total)
    if evaluation.every is not None:
        steps.update(range(evaluation.every, total + 1, evaluation.every))
    if evaluation.log_points is not None and total > 1:
        points = np.geomspace(1, total, evaluation.log_points)
        steps.update(round(float(p)) for p in points)
    return sorted(steps)


def fewer_evaluations_note(evaluation: EvaluationConfig, total: int) -> str | None:
    """Why a run of ``total`` steps is scored fewer times than ``log_points`` asks, or None when it is not.

    ``log_points = K`` spaces K steps evenly in log(step) between 1 and ``total``; in a short run several of
    them round to the same step, which is scored once (``gengen plan`` and ``gengen run --dry-run`` print this
    beside a run's evaluation count).

    Parameters
    ----------
    evaluation : EvaluationConfig
        The study's ``[evaluation]`` settings.
    total : int
        Optimiser steps of the run.

    Returns
    -------
    str or None
        One sentence with the count asked for, the duplicates, the step below which they lie and the count
        scored; None without ``log_points``, when no two of its steps coincide, or when other settings
        (``every``, ``steps``) make up the count.

    Examples
    --------
    >>> from gengen.study.config import EvaluationConfig
    >>> fewer_evaluations_note(EvaluationConfig(every=None, log_points=40), 60)  # doctest: +NORMALIZE_WHITESPACE
    'evaluation.log_points = 40 asks for 40 log-spaced steps plus step 0, but in a run of 60 steps 13 of them
    round to a step already taken (all at or below step 7), each scored once: 28 evaluations'
    """
    if evaluation.log_points is None or total <= 1:
        return None
    rounded = [round(float(p)) for p in np.geomspace(1, total, evaluation.log_points)]
    distinct = set(rounded)
    duplicates = len(rounded) - len(distinct)
    if not duplicates:
        return None
    asked = evaluation.log_points
    scored = len(evaluation_steps(evaluation, total))
    if scored >= asked + 1:
        return None
    crowded = max(step for step in distinct if rounded.count(step) > 1)
    return (
        f"evaluation.log_points = {asked} asks for {asked} log-spaced steps plus step 0, but in a run of {total:,} "
        f"steps {duplicates} of them round to a step already taken (all at or below step {crowded:,}), each scored "
        f"once: {scored} evaluations"
    )


def _check_evaluation_count(evaluation: EvaluationConfig, total: int) -> None:
    """Refuse, before listing them, settings that could give a run more than MAX_EVALUATIONS evaluations."""
    others = 2 + len(evaluation.steps) + (evaluation.log_points or 0)
    periodic = total // evaluation.every if evaluation.every is not None else 0
    if others + periodic <= MAX_EVALUATIONS:
        return
    if periodic >= others:
        assert evaluation.every is not None
        needed = math.ceil(total / max(1, MAX_EVALUATIONS - others))
        raise ConfigError(
            f"evaluation.every: every {evaluation.every:,} steps of {total:,} is {periodic:,} evaluations per run, "
            f"above the limit of {MAX_EVALUATIONS:,}; set every to at least {needed:,} (or fewer steps)"
        )
    raise ConfigError(
        f"evaluation: steps and log_points ask for {others:,} evaluations per run, above the limit of "
        f"{MAX_EVALUATIONS:,}; ask for fewer"
    )


def update_batches(step: int, n_train: int, batch_size: int, seed: int, grad_accum: int = 1) -> list[np.ndarray]:
    """The micro-batches (training-example indices) of optimiser step ``step`` (1-based).

    Epoch ``e`` reads a permutation of ``range(n_train)`` drawn from ``(seed, e)`` in consecutive micro-batches
    of ``batch_size`` (the last one smaller); step ``s`` takes ``grad_accum`` of them, the epoch's last step
    what is left (see :func:`steps_per_epoch`). Being a function of the step alone, the order survives a
    restart.
    """
    micro_batches = math.ceil(n_train / batch_size)
    per_epoch = epoch_steps(n_train, batch_size, grad_accum)
    epoch, within = divmod(step - 1, per_epoch)
    permutation = np.random.default_rng([seed, int(epoch)]).permutation(n_train)
    first = within * grad_accum
    return [
        permutation[b * batch_size : (b + 1) * batch_size] for b in range(first, min(first + grad_accum, micro_batches))
    ]


def update_indices(step: int, n_train: int, batch_size: int, seed: int, grad_accum: int = 1) -> np.ndarray:
    """All training-example indices of optimiser step ``step``: :func:`update_batches` concatenated."""
    return np.concatenate(update_batches(step, n_train, batch_size, seed, grad_accum))


def learning_rate_factor(total: int, training: TrainingConfig) -> Callable[[int], float]:
    """The learning-rate factor of ``LambdaLR``, called with the optimiser steps taken so far (0 for step 1).

    W warmup steps (``warmup_steps``, or the ``warmup_ratio`` of the total: rounded by the "gengen" rule,
    rounded up by the "transformers" one), then a linear decay: step s (1-based) gets s / W ("gengen") or
    (s - 1) / W ("transformers", ``get_linear_schedule_with_warmup``) while in the warmup, and
    (total - s + 1) / (total - W) after it.
    """
    hf = training.warmup_rule == "transformers"
    from_ratio = math.ceil(training.warmup_ratio * total) if hf else round(training.warmup_ratio * total)
    warmup = max(training.warmup_steps, from_ratio)

    def factor(taken: int) -> float:
        if warmup and taken < warmup:
            return (taken if hf else taken + 1) / warmup
        return max(0.0, (total - taken) / max(1, total - warmup))

    return factor
