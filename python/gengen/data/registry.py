"""The reference protocol's data sets: where each comes from and how its labels map to Yes / No.

Every data set is read as three columns, ``premise``, ``hypothesis`` and ``label`` (1 = entailment = " Yes",
0 = not entailment = " No"). Three-way NLI sets drop their *neutral* rows (and rows without a gold label),
keeping entailment (Yes) against contradiction (No); two-way sets keep every row. The mapping of each set is
written out in ``docs/protocol.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["REGISTRY", "RegisteredDataset"]

YES = "Yes"
NO = "No"
DROP = "drop"


@dataclass(frozen=True)
class RegisteredDataset:
    """A data set of the reference protocol.

    Attributes
    ----------
    key : str
        Its name in study configs (``source = "..."``).
    hub_id : str
        The Hugging Face hub repository.
    config : str or None
        The hub configuration (subset) name.
    test_split : str
        The split scored by default.
    splits : tuple of str
        The labelled splits that can be asked for.
    premise, hypothesis, label : str
        The hub's column for each role.
    labels : dict
        Hub label value -> ``"Yes"``, ``"No"`` or ``"drop"``; values not listed are dropped.
    note : str
        One line on the mapping, for the docs.
    revision, data_dir : str or None
        Where the hub keeps loadable files when the repository's main branch has only a loading script:
        the parquet conversion branch (``refs/convert/parquet``) and its configuration folder.
    neutral : int or None
        The hub label of the neutral class of a three-way set (dropped by default; a study may map it to No
        with ``neutral = "No"``); None for two-way sets.
    """

    key: str
    hub_id: str
    config: str | None
    test_split: str
    splits: tuple[str, ...]
    premise: str
    hypothesis: str
    label: str
    labels: MappingProxyType[Any, str]
    note: str
    neutral: int | None = None
    revision: str | None = None
    data_dir: str | None = None


def _entry(
    key: str,
    hub_id: str,
    config: str | None,
    test_split: str,
    splits: tuple[str, ...],
    columns: tuple[str, str, str],
    labels: dict[Any, str],
    note: str,
    **hub: str,
) -> RegisteredDataset:
    # A three-way set is one whose mapping drops label 1 (neutral) and keeps 0 and 2.
    neutral = 1 if labels.get(1) == DROP and labels.get(2) == NO else None
    return RegisteredDataset(
        key, hub_id, config, test_split, splits, *columns, MappingProxyType(labels), note, neutral, **hub
    )


_THREE_WAY = {0: YES, 1: DROP, 2: NO}  # entailment, neutral, contradiction
_NLI = ("premise", "hypothesis", "label")
_PAIR = ("sentence1", "sentence2", "label")

REGISTRY: MappingProxyType[str, RegisteredDataset] = MappingProxyType(
    {
        entry.key: entry
        for entry in (
            _entry(
                "mnli",
                "nyu-mll/glue",
                "mnli",
                "validation_matched",
                ("train", "validation_matched", "validation_mismatched"),
                _NLI,
                _THREE_WAY,
                "0 entailment -> Yes, 2 contradiction -> No, 1 neutral dropped",
            ),
            _entry(
                "mnli_mismatched",
                "nyu-mll/glue",
                "mnli",
                "validation_mismatched",
                ("train", "validation_matched", "validation_mismatched"),
                _NLI,
                _THREE_WAY,
                "as mnli, on the mismatched genres",
            ),
            _entry(
                "snli",
                "stanfordnlp/snli",
                None,
                "test",
                ("train", "validation", "test"),
                _NLI,
                {**_THREE_WAY, -1: DROP},
                "0 entailment -> Yes, 2 contradiction -> No, 1 neutral and -1 (no gold label) dropped",
            ),
            _entry(
                "scitail",
                "allenai/scitail",
                "dgem_format",
                "test",
                ("train", "validation", "test"),
                _NLI,
                {"entails": YES, "neutral": NO},
                "two-way: 'entails' -> Yes, 'neutral' (not entailed) -> No",
            ),
            _entry(
                "rte",
                "nyu-mll/glue",
                "rte",
                "validation",
                ("train", "validation"),
                _PAIR,
                {0: YES, 1: NO},
                "0 entailment -> Yes, 1 not_entailment -> No (the test split has no labels)",
            ),
            _entry(
                "hans",
                "jhu-cogsci/hans",
                None,
                "validation",
                ("train", "validation"),
                _NLI,
                {0: YES, 1: NO},
                "0 entailment -> Yes, 1 non-entailment -> No",
                # The main branch holds only hans.py, a loading script datasets >= 3 refuses to run.
                revision="refs/convert/parquet",
                data_dir="plain_text",
            ),
            _entry(
                "anli_r1",
                "facebook/anli",
                None,
                "test_r1",
                ("train_r1", "dev_r1", "test_r1"),
                _NLI,
                _THREE_WAY,
                "round 1: 0 entailment -> Yes, 2 contradiction -> No, 1 neutral dropped",
            ),
            _entry(
                "anli_r2",
                "facebook/anli",
                None,
                "test_r2",
                ("train_r2", "dev_r2", "test_r2"),
                _NLI,
                _THREE_WAY,
                "round 2: as anli_r1",
            ),
            _entry(
                "anli_r3",
                "facebook/anli",
                None,
                "test_r3",
                ("train_r3", "dev_r3", "test_r3"),
                _NLI,
                _THREE_WAY,
                "round 3: as anli_r1",
            ),
            _entry(
                "wnli",
                "nyu-mll/glue",
                "wnli",
                "validation",
                ("train", "validation"),
                _PAIR,
                {1: YES, 0: NO},
                "1 entailment -> Yes, 0 not_entailment -> No (note: reversed from RTE)",
            ),
            _entry(
                "paws",
                "google-research-datasets/paws",
                "labeled_final",
                "test",
                ("train", "validation", "test"),
                _PAIR,
                {1: YES, 0: NO},
                "1 paraphrase -> Yes, 0 not a paraphrase -> No",
            ),
        )
    }
)
"""The registered data sets by key."""
