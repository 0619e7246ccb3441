"""Scoring a checkpoint series: the backend protocol and the one loop that every backend runs through.

A scoring backend (:class:`ScoringBackend`) knows what to score a checkpoint on and how: gengen's own scorer
(:class:`gengen.scoring.score.GengenBackend`: the study's test sets, accuracy and log-probability of the answers) and
lm-evaluation-harness (:class:`gengen.scoring.lm_eval.LmEvalBackend`: any lm-eval task). :func:`score_series`
does the rest, once for all of them:

1. refuse an empty series and damaged weights (:func:`~gengen.scoring.checkpoints.check_weights`) before the
   store is opened;
2. open the store, let the backend check the run (e.g. settings that must match a resumed run's);
3. skip the checkpoints whose every unit (test set, task) is already in the store, so a killed series resumes
   where it stopped, without duplicates;
4. load each remaining checkpoint (a LoRA base once for a series of adapters), score it, write each batch of
   rows the backend yields in one transaction, and log one line per checkpoint and one for the series.

A model being trained is scored by the same backends without any checkpoint: :class:`gengen.scoring.hook.EvaluationHook`
(``attach`` instead of ``prepare``), the one code path of gengen's trainer and of :mod:`gengen.integrations`.

Backends are chosen by name from :data:`gengen.scoring.registry.REGISTRY` (:func:`backend_class`); the CLI
passes the name and the options it was given (:class:`ScoreRequest`) and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.stats._lazy import lazy_names

if TYPE_CHECKING:
    from gengen.scoring.registry import BACKENDS
    from gengen.scoring.series import (
        ModelLoader,
        ScoredSeries,
        ScoreRequest,
        ScoringBackend,
        SeriesLabels,
        backend_class,
        check_trainable,
        open_backend,
        refuse_options,
        resolve_backend,
        score_after_training,
        score_request,
        score_series,
        training_backend,
    )

# Public name -> the module defining it, imported on first use (PEP 562): the backends' own modules
# (gengen.scoring.score, gengen.scoring.lm_eval) and the registry load without the series loop.
_MODULE_OF: dict[str, str] = {
    "BACKENDS": "gengen.scoring.registry",
    "ModelLoader": "gengen.scoring.series",
    "ScoreRequest": "gengen.scoring.series",
    "ScoredSeries": "gengen.scoring.series",
    "ScoringBackend": "gengen.scoring.series",
    "SeriesLabels": "gengen.scoring.series",
    "backend_class": "gengen.scoring.series",
    "check_trainable": "gengen.scoring.series",
    "open_backend": "gengen.scoring.series",
    "refuse_options": "gengen.scoring.series",
    "resolve_backend": "gengen.scoring.series",
    "score_after_training": "gengen.scoring.series",
    "score_request": "gengen.scoring.series",
    "score_series": "gengen.scoring.series",
    "training_backend": "gengen.scoring.series",
}

__all__ = [
    "BACKENDS",
    "ModelLoader",
    "ScoreRequest",
    "ScoredSeries",
    "ScoringBackend",
    "SeriesLabels",
    "backend_class",
    "check_trainable",
    "open_backend",
    "refuse_options",
    "resolve_backend",
    "score_after_training",
    "score_request",
    "score_series",
    "training_backend",
]

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals(), __all__)
