"""The data registry's label mappings on local rows in each hub schema, user files, few-shot samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gengen.data import REGISTRY, balanced_sample, load_examples
from gengen.errors import InputError
from gengen.study.tables import DataSpec

pytestmark = pytest.mark.train

# The reference protocol, written out independently of gengen.data.registry:
# key: (hub id, config, test split, premise column, hypothesis column, {hub label: expected 1/0/None=dropped})
PROTOCOL = {
    "mnli": ("nyu-mll/glue", "mnli", "validation_matched", "premise", "hypothesis", {0: 1, 1: None, 2: 0}),
    "snli": ("stanfordnlp/snli", None, "test", "premise", "hypothesis", {0: 1, 1: None, 2: 0, -1: None}),
    "scitail": ("allenai/scitail", "dgem_format", "test", "premise", "hypothesis", {"entails": 1, "neutral": 0}),
    "rte": ("nyu-mll/glue", "rte", "validation", "sentence1", "sentence2", {0: 1, 1: 0}),
    "hans": ("jhu-cogsci/hans", None, "validation", "premise", "hypothesis", {0: 1, 1: 0}),
    "anli_r1": ("facebook/anli", None, "test_r1", "premise", "hypothesis", {0: 1, 1: None, 2: 0}),
    "anli_r2": ("facebook/anli", None, "test_r2", "premise", "hypothesis", {0: 1, 1: None, 2: 0}),
    "anli_r3": ("facebook/anli", None, "test_r3", "premise", "hypothesis", {0: 1, 1: None, 2: 0}),
    "wnli": ("nyu-mll/glue", "wnli", "validation", "sentence1", "sentence2", {0: 0, 1: 1}),
    "paws": ("google-research-datasets/paws", "labeled_final", "test", "sentence1", "sentence2", {0: 0, 1: 1}),
}


@pytest.mark.parametrize("key", sorted(PROTOCOL))
def test_registered_label_mapping_on_hub_schema_rows(key: str, tmp_path: Path) -> None:
    hub_id, config, split, premise, hypothesis, mapping = PROTOCOL[key]
    entry = REGISTRY[key]
    assert (entry.hub_id, entry.config, entry.test_split) == (hub_id, config, split)
    rows = [
        {premise: f"premise {i}", hypothesis: f"hypothesis {i}", "label": label, "idx": i}
        for i, label in enumerate([*mapping, *mapping])
    ]
    (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame = load_examples(DataSpec(name=key, source=key, path=str(tmp_path)))
    expected = [(r[premise], r[hypothesis], mapping[r["label"]]) for r in rows if mapping[r["label"]] is not None]
    assert list(frame.itertuples(index=False, name=None)) == expected


def test_every_registered_set_is_in_the_protocol() -> None:
    assert set(REGISTRY) - {"mnli_mismatched"} == set(PROTOCOL)


def test_save_to_disk_folder_in_hub_schema(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    table = {"premise": ["a", "b", "c"], "hypothesis": ["x", "y", "z"], "label": [2, 0, 1]}
    datasets.DatasetDict({"validation_matched": datasets.Dataset.from_dict(table)}).save_to_disk(tmp_path / "d")
    frame = load_examples(DataSpec(name="m", source="mnli", path=str(tmp_path / "d")))
    assert frame.to_dict("list") == {"premise": ["a", "b"], "hypothesis": ["x", "y"], "label": [0, 1]}


def test_user_file_with_column_and_label_mapping(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    pd.DataFrame({"ctx": ["p1", "p2", "p3"], "claim": ["h1", "h2", "h3"], "gold": ["ok", "bad", "skip"]}).to_csv(
        path, index=False
    )
    spec = DataSpec(
        name="mine",
        path=str(path),
        columns={"premise": "ctx", "hypothesis": "claim", "label": "gold"},
        labels={"ok": "Yes", "bad": "No", "skip": "drop"},
    )
    frame = load_examples(spec)
    assert frame.to_dict("list") == {"premise": ["p1", "p2"], "hypothesis": ["h1", "h2"], "label": [1, 0]}


def test_user_file_default_labels_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    rows = [{"premise": "p", "hypothesis": "h", "label": v} for v in ("Entailment", "contradiction", 1, 0, True)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_examples(DataSpec(name="mine", path=str(path)))["label"].tolist() == [1, 0, 1, 0, 1]
    path.write_text(json.dumps({"premise": "p", "hypothesis": "h", "label": "maybe"}) + "\n")
    with pytest.raises(InputError, match="data set 'mine': column 'label': label 'maybe' has no mapping"):
        load_examples(DataSpec(name="mine", path=str(path)))
    with pytest.raises(InputError, match="data set 'mine': no column 'text'"):
        load_examples(
            DataSpec(
                name="mine", path=str(path), columns={"premise": "text", "hypothesis": "hypothesis", "label": "label"}
            )
        )


def test_cap_is_a_fixed_subset_in_order(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(
        "".join(json.dumps({"premise": str(i), "hypothesis": "h", "label": i % 2}) + "\n" for i in range(50))
    )
    first = load_examples(DataSpec(name="d", path=str(path)), cap=10)
    again = load_examples(DataSpec(name="d", path=str(path), max_examples=10), cap=30)
    assert len(first) == 10 and first.equals(again)
    assert first["premise"].astype(int).is_monotonic_increasing


def test_balanced_few_shot_sample_fixed_by_seed() -> None:
    frame = pd.DataFrame(
        {
            "premise": [f"p{i}" for i in range(40)],
            "hypothesis": "h",
            "label": np.r_[np.ones(10, int), np.zeros(30, int)],
        }
    )
    sample = balanced_sample(frame, 9, seed=4)
    assert len(sample) == 9 and sample["label"].sum() == 5
    assert sample.equals(balanced_sample(frame, 9, seed=4))
    assert not sample.equals(balanced_sample(frame, 9, seed=5))
    with pytest.raises(InputError, match="only 10 training examples with label 1"):
        balanced_sample(frame, 24, seed=0)
