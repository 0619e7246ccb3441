"""Import the scores people already have into a gengen store.

Formats (``format=`` / ``--format``; detected from the content when not given):

========================  ===========================================================================
``lm-eval-v0.3``          lm-evaluation-harness v0.3 results JSON, one file per checkpoint
``lm-eval-v0.4``          lm-evaluation-harness v0.4+ ``results_*.json`` (metric keys ``acc,none``)
``lm-eval``               either of the two, told apart by the content
``trainer-state``         Hugging Face ``trainer_state.json`` (``eval_*`` keys of ``log_history``)
``long``                  CSV/TSV/Parquet, one score per row (``--column`` maps column names)
``wide``                  CSV/TSV/Parquet, one row per step, one column per test set and metric (a
                          Weights & Biases history export: ``_step``, ``eval/downstream/<task>_<metric>``)
``runs``                  CSV/TSV/Parquet, one row per run (``run``/``seed`` column), final scores, no step
========================  ===========================================================================

An import is atomic: every file is read and checked first, then all scores are written in one transaction,
so a bad file, a conflict or a crash leaves the store as it was. A directory is searched recursively for
``*.json``, ``*.csv``, ``*.tsv`` and ``*.parquet`` files; JSON files that are not results of a known kind
(a model's ``config.json``...) are skipped and reported, but a named file must be ingestible. Every score
passes :func:`gengen.store.checks.check_scores` (finite values, counts in range, accuracies in [0, 1]).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.stats._lazy import lazy_names

if TYPE_CHECKING:
    from gengen.ingest._common import IngestOptions
    from gengen.ingest.importer import FORMATS, IngestReport, detect_format, find_files, ingest, read, read_file

# Public name -> the module defining it, imported on first use (PEP 562): a format reader such as
# gengen.ingest.lm_eval (which the lm-eval scorer imports) does not load the store and pandas through this face.
_MODULE_OF: dict[str, str] = {
    "FORMATS": "gengen.ingest.importer",
    "IngestOptions": "gengen.ingest._common",
    "IngestReport": "gengen.ingest.importer",
    "detect_format": "gengen.ingest.importer",
    "find_files": "gengen.ingest.importer",
    "ingest": "gengen.ingest.importer",
    "read": "gengen.ingest.importer",
    "read_file": "gengen.ingest.importer",
}

__all__ = [
    "FORMATS",
    "IngestOptions",
    "IngestReport",
    "detect_format",
    "find_files",
    "ingest",
    "read",
    "read_file",
]

__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals(), __all__)
