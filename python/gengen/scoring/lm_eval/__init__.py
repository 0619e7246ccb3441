"""Scoring checkpoint series with lm-evaluation-harness: any lm-eval task as a test set, straight into the store.

:class:`LmEvalBackend` is lm-eval as a scoring backend (:mod:`gengen.scoring`), and :func:`score_with_lm_eval` runs
it through the series loop: it loads each checkpoint of a series the way ``gengen score`` does (local folders, LoRA
adapters swapped on one base, hub revisions; dtypes from :func:`gengen.scoring.models.precision_for`), wraps the model
in lm-eval's ``HFLM`` and runs ``lm_eval.simple_evaluate`` on each task. Every task × metric lands in the
store under the checkpoint's step, with its standard error and number of examples, read from lm-eval's result
by the same code that ingests lm-eval's output files (:func:`gengen.ingest.lm_eval.parse_v04`), so scoring
here and ingesting lm-eval's own files give the same rows.

Resumable: the scores of one checkpoint on one task are written in one transaction, and a checkpoint × task
whose scores are all in the store is skipped; a killed series resumes where it stopped, without duplicates.
The run's manifest records lm-eval's version, the tasks' versions and the settings (few-shot, limit); a later
call with other settings is refused rather than mixed into the same run.

``tasks/gengen_nli/`` holds the reference NLI protocol as lm-eval tasks (``gengen_mnli`` ... ``gengen_paws``,
tag ``gengen_nli``); they are always on the task path. :data:`TASKS_DIR` is the folder to give lm-eval's own
``--include_path`` to run them without gengen's CLI.

lm-eval is an optional dependency (``pip install 'gengen[lm-eval]'``), imported only when a function here
runs; importing this module imports neither lm-eval nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.stats._lazy import lazy_names

if TYPE_CHECKING:
    from gengen.scoring.lm_eval.backend import (
        LmEvalBackend,
        LmEvalOptions,
        check_trainable_with_lm_eval,
        request_backend,
        request_settings,
        score_trained_runs,
        score_with_lm_eval,
        study_settings,
    )
    from gengen.scoring.lm_eval.catalogue import (
        EXTRA,
        TASKS_DIR,
        LmEvalSettings,
        TaskCatalogue,
        parse_batch_size,
        parse_limit,
        require_lm_eval,
    )

# Public name -> the module defining it, imported on first use (PEP 562): the NLI task builders and the trust
# check (gengen.scoring.lm_eval.nli, .trust) load without the backend.
_MODULE_OF: dict[str, str] = {
    "EXTRA": "gengen.scoring.lm_eval.catalogue",
    "TASKS_DIR": "gengen.scoring.lm_eval.catalogue",
    "LmEvalBackend": "gengen.scoring.lm_eval.backend",
    "LmEvalOptions": "gengen.scoring.lm_eval.backend",
    "LmEvalSettings": "gengen.scoring.lm_eval.catalogue",
    "TaskCatalogue": "gengen.scoring.lm_eval.catalogue",
    "check_trainable_with_lm_eval": "gengen.scoring.lm_eval.backend",
    "parse_batch_size": "gengen.scoring.lm_eval.catalogue",
    "parse_limit": "gengen.scoring.lm_eval.catalogue",
    "request_backend": "gengen.scoring.lm_eval.backend",
    "request_settings": "gengen.scoring.lm_eval.backend",
    "require_lm_eval": "gengen.scoring.lm_eval.catalogue",
    "score_trained_runs": "gengen.scoring.lm_eval.backend",
    "score_with_lm_eval": "gengen.scoring.lm_eval.backend",
    "study_settings": "gengen.scoring.lm_eval.backend",
}

__all__ = [
    "EXTRA",
    "TASKS_DIR",
    "LmEvalBackend",
    "LmEvalOptions",
    "LmEvalSettings",
    "TaskCatalogue",
    "check_trainable_with_lm_eval",
    "parse_batch_size",
    "parse_limit",
    "request_backend",
    "request_settings",
    "require_lm_eval",
    "score_trained_runs",
    "score_with_lm_eval",
    "study_settings",
]

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals(), __all__)
