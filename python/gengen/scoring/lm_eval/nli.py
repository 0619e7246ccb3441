"""The reference NLI protocol as lm-evaluation-harness tasks: the documents each task scores.

The task files in ``tasks/gengen_nli/`` read each data set from the hub (or, overridden, from a local file in
the hub's schema) and call one function of this module as ``process_docs``. It keeps the rows the registry
maps to Yes or No, with the registry's mapping (``gengen.data.registry``; the same code as gengen's own
loader, :func:`gengen.data.loading.map_labels`), and returns documents with three fields: ``premise``,
``hypothesis`` and ``gold``, the index of the gold answer among the task's choices ``[" Yes", " No"]``
(0 for Yes, 1 for No).

Imported by lm-eval when it loads a ``gengen_*`` task; it imports ``datasets``, not torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gengen.data.loading import map_labels
from gengen.data.registry import REGISTRY

__all__ = ["NLI_TASKS", "process_docs"]

NLI_TASKS: dict[str, str] = {
    "gengen_mnli": "mnli",
    "gengen_snli": "snli",
    "gengen_hans": "hans",
    "gengen_rte": "rte",
    "gengen_scitail": "scitail",
    "gengen_anli_r1": "anli_r1",
    "gengen_wnli": "wnli",
    "gengen_paws": "paws",
}
"""lm-eval task name -> registry key, for the eight test sets of the reference protocol."""


def process_docs(dataset: Any, key: str) -> Any:
    """Documents of registry data set ``key``: ``premise``, ``hypothesis``, ``gold`` (0 = Yes, 1 = No).

    Parameters
    ----------
    dataset : datasets.Dataset
        One split, in the hub's columns.
    key : str
        A key of :data:`gengen.data.registry.REGISTRY`.

    Returns
    -------
    datasets.Dataset
        The rows the registry maps to Yes or No, in their original order.
    """
    import datasets

    entry = REGISTRY[key]
    frame = map_labels(
        dataset.to_pandas(),
        premise=entry.premise,
        hypothesis=entry.hypothesis,
        label=entry.label,
        labels=entry.labels,
        where=f"gengen_{key}",
        strict=False,
    )
    return datasets.Dataset.from_dict(
        {
            "premise": frame["premise"].tolist(),
            "hypothesis": frame["hypothesis"].tolist(),
            # gengen's label is 1 for Yes; the choices are [" Yes", " No"].
            "gold": (1 - frame["label"]).astype(int).tolist(),
        }
    )


def _processor(source: str) -> Callable[[Any], Any]:
    """The ``process_docs`` function of task ``gengen_<source>`` (named so lm-eval's ``!function`` finds it)."""

    def process(dataset: Any) -> Any:
        return process_docs(dataset, source)

    process.__name__ = process.__qualname__ = f"process_{source}"
    process.__doc__ = f"``process_docs`` of ``gengen_{source}``."
    return process


process_mnli = _processor("mnli")
process_snli = _processor("snli")
process_hans = _processor("hans")
process_rte = _processor("rte")
process_scitail = _processor("scitail")
process_anli_r1 = _processor("anli_r1")
process_wnli = _processor("wnli")
process_paws = _processor("paws")
