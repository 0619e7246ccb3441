"""Data for fine-tuning and scoring: the reference protocol's registry, local files, few-shot samples."""

from __future__ import annotations

from gengen.data.loading import balanced_sample, cap_examples, few_shot_sample, load_examples, map_labels
from gengen.data.registry import REGISTRY, RegisteredDataset

__all__ = [
    "REGISTRY",
    "RegisteredDataset",
    "balanced_sample",
    "cap_examples",
    "few_shot_sample",
    "load_examples",
    "map_labels",
]
