"""The scoring-backend protocol: one registry, one series loop (skip, load, score, write, log, resume).

The loop is driven here by a backend written in the test (no model, no torch): what it writes, skips and
resumes is checked against the store; the registry against the study file's choices and the CLI; the
safetensors check against files written by the safetensors library itself.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

from gengen.errors import GengenError, InputError
from gengen.scoring import (
    BACKENDS,
    ScoreRequest,
    SeriesLabels,
    backend_class,
    refuse_options,
    resolve_backend,
    score_series,
)
from gengen.scoring.checkpoints import Checkpoint, check_safetensors, check_weights
from gengen.scoring.registry import REGISTRY
from gengen.store.database import Store


@dataclass
class _Loader:
    base_loads: int = 0

    def load(self, checkpoint: Checkpoint) -> Any:
        self.base_loads += 1
        return {"weights": checkpoint.step}


class _Toy:
    """A backend whose model is a dict and whose score of unit u at step s is s / 1000 + len(u) / 10."""

    name: ClassVar[str] = "toy"
    unit: ClassVar[str] = "probe"
    accepts: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, store: Store, units: tuple[str, ...] = ("a", "bb"), fail_at: int | None = None):
        self.store = store
        self._units = units
        self.fail_at = fail_at
        self.begun: list[SeriesLabels] = []
        self.scored: list[tuple[int, tuple[str, ...]]] = []
        self.attached: tuple[Any, ...] = ()

    @classmethod
    def from_request(cls, request: ScoreRequest) -> _Toy:
        raise AssertionError("the toy backend is built directly by the tests, never from a request")

    @classmethod
    def check_trainable(cls, config: Any, *, trust_task_code: bool = False) -> None:
        return None

    @classmethod
    def score_trained(cls, config: Any, runs: Sequence[Any], *, trust_task_code: bool = False, log: Any = print) -> Any:
        return pd.DataFrame()

    @property
    def units(self) -> tuple[str, ...]:
        return self._units

    def open_store(self) -> Store:
        return self.store

    def begin(self, store: Store, labels: SeriesLabels) -> None:
        self.begun.append(labels)

    def pending(self, step: int, done: set[tuple[int, str, str]]) -> list[str]:
        return [u for u in self._units if (step, u, "acc") not in done]

    def prepare(self, checkpoints: Sequence[Checkpoint]) -> _Loader:
        return _Loader()

    def attach(self, tokenizer: Any, device: Any, precision: Any) -> None:
        self.attached = (tokenizer, device, precision)

    def score_checkpoint(
        self, model: Any, checkpoint: Checkpoint, units: Sequence[str], *, base: dict[str, Any], log: Any
    ) -> Iterator[pd.DataFrame]:
        self.scored.append((checkpoint.step, tuple(units)))
        for unit in units:
            if checkpoint.step == self.fail_at and unit == units[-1]:
                raise KeyboardInterrupt  # killed in the middle of a checkpoint
            value = model["weights"] / 1000 + len(unit) / 10
            yield pd.DataFrame([{**base, "testset": unit, "metric": "acc", "value": value, "n_examples": 10}])


SERIES = [Checkpoint(f"/nowhere/checkpoint-{s}", s) for s in (0, 10, 20)]
LABELS = SeriesLabels("m", "fam", "1b", "seed=1")


def _expected(steps: Sequence[int], units: Sequence[str] = ("a", "bb")) -> set[tuple[int, str, float]]:
    return {(s, u, s / 1000 + len(u) / 10) for s in steps for u in units}


def _stored(store: Store) -> set[tuple[int, str, float]]:
    table = store.load()
    return {(int(r.step), str(r.testset), float(r.value)) for r in table.itertuples()}


def test_the_loop_writes_every_unit_of_every_checkpoint(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", study="s")
    backend = _Toy(store)
    lines: list[str] = []
    rows = score_series(backend, SERIES, LABELS, log=lines.append)
    assert _stored(store) == _expected([0, 10, 20])
    assert len(rows) == 6 and set(rows["study"]) == {"s"} and set(rows["family"]) == {"fam"}
    assert set(rows["size"]) == {"1b"} and set(rows["run"]) == {"seed=1"}
    assert backend.scored == [(0, ("a", "bb")), (10, ("a", "bb")), (20, ("a", "bb"))]
    assert lines[0].startswith("m seed=1 step 0 [1/3]: 2 probes in ")
    assert lines[-1] == "m seed=1: 3 checkpoints scored, 0 already in the store, 6 scores written, 3 model loads"


def test_a_second_call_scores_nothing_and_says_so(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", study="s")
    score_series(_Toy(store), SERIES, LABELS, log=lambda _: None)
    again = _Toy(store)
    lines: list[str] = []
    rows = score_series(again, SERIES, LABELS, log=lines.append)
    assert rows.empty and again.scored == [] and len(again.begun) == 1
    assert lines == ["m seed=1: all 3 checkpoints already scored on 2 probes"]


def test_a_killed_series_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", study="s")
    with pytest.raises(KeyboardInterrupt):
        score_series(_Toy(store, fail_at=10), SERIES, LABELS, log=lambda _: None)
    # Checkpoint 0 whole and the first unit of checkpoint 10 were committed before the kill.
    assert _stored(store) == _expected([0]) | _expected([10], ["a"])
    resumed = _Toy(store)
    lines: list[str] = []
    score_series(resumed, SERIES, LABELS, log=lines.append)
    assert resumed.scored == [(10, ("bb",)), (20, ("a", "bb"))]
    assert _stored(store) == _expected([0, 10, 20]) and store.count() == 6
    assert lines[-1] == "m seed=1: 2 checkpoints scored, 1 already in the store, 3 scores written, 2 model loads"


def test_scores_of_another_study_in_the_store_do_not_count_as_done(tmp_path: Path) -> None:
    score_series(_Toy(Store(tmp_path / "store", study="other")), SERIES, LABELS, log=lambda _: None)
    store = Store(tmp_path / "store", study="s")
    backend = _Toy(store)
    score_series(backend, SERIES, LABELS, log=lambda _: None)
    assert len(backend.scored) == 3 and store.count() == 12


def test_an_empty_series_and_a_damaged_checkpoint_are_refused_before_the_store_opens(tmp_path: Path) -> None:
    class Unopened(_Toy):
        def open_store(self) -> Store:
            raise AssertionError("the store was opened")

    backend = Unopened(Store(tmp_path / "unused"))
    with pytest.raises(InputError, match="no checkpoints to score"):
        score_series(backend, [], LABELS)
    folder = tmp_path / "checkpoint-5"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(InputError, match=r"checkpoint-5/model\.safetensors: a damaged safetensors file \(truncated"):
        score_series(backend, [Checkpoint(str(folder), 5)], LABELS)


# ---------------------------------------------------------------------------------------------- registry


def test_one_registry_names_the_backends_of_the_study_file_and_the_cli() -> None:
    import gengen.study.tables

    assert BACKENDS == tuple(REGISTRY) == ("gengen", "lm-eval")
    assert vars(gengen.study.tables)["BACKENDS"] is BACKENDS  # the study file's choices are the registry's, not a copy
    request_fields = {f.name for f in fields(ScoreRequest)}
    for name in BACKENDS:
        cls = backend_class(name)
        assert cls.name == name
        assert cls.accepts <= request_fields - {"study"}
    assert REGISTRY["gengen"].during_training and not REGISTRY["lm-eval"].during_training


def test_backend_names_are_checked_without_importing_a_backend() -> None:
    with pytest.raises(GengenError, match=r"^--backend: expected 'gengen' or 'lm-eval', got 'helm'$"):
        resolve_backend("helm", None)
    with pytest.raises(GengenError, match="give a study file"):
        resolve_backend(None, None)
    assert resolve_backend("lm-eval", None) == "lm-eval"


def test_an_option_of_another_backend_is_refused_naming_its_flag_and_owner() -> None:
    gengen_backend = backend_class("gengen")
    refuse_options(ScoreRequest(device="cpu", tokenizer="t", threads=2), gengen_backend)
    with pytest.raises(GengenError, match=r"^--include-path: only with --backend lm-eval$"):
        refuse_options(ScoreRequest(include_paths=("tasks",)), gengen_backend)
    with pytest.raises(GengenError, match=r"^--num-fewshot: only with --backend lm-eval$"):
        refuse_options(ScoreRequest(num_fewshot=0), gengen_backend)


def test_score_help_names_the_extra_to_install() -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    result = CliRunner().invoke(app, ["score", "--help"], terminal_width=400, env={"COLUMNS": "400"})
    assert result.exit_code == 0
    assert "pip install 'gengen[lm-eval]'" in " ".join(result.output.split())


# ---------------------------------------------------------------------------------------------- safetensors


def _write_real(path: Path) -> bytes:
    """A safetensors file written by the safetensors library (the reference for a valid file)."""
    numpy_io = pytest.importorskip("safetensors.numpy")
    import numpy as np

    numpy_io.save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, np.float16)}, str(path))
    return path.read_bytes()


def test_a_file_written_by_safetensors_passes(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    _write_real(path)
    check_safetensors(path)
    check_weights([Checkpoint(str(tmp_path), 1), Checkpoint("org/model", 2, "step2")])  # a revision: not on disk


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda raw: raw[:5], r"truncated: 5 bytes, shorter than its 8-byte header length"),
        (lambda raw: raw[:20], r"truncated: its header is [\d,]+ bytes, the file 20 bytes"),
        (lambda raw: struct.pack("<Q", 2**62) + raw[8:], r"header length 4,611,686,018,427,387,904 bytes is above"),
        (lambda raw: struct.pack("<Q", 100_000_001) + raw[8:], r"100,000,001 bytes is above the format's limit"),
        (lambda raw: raw[:-4], r"tensor '\w': its data lie outside the file"),
        (lambda raw: raw[:8] + b"[" + raw[9:], r"its header is not valid JSON"),
    ],
)
def test_damaged_files_are_refused_naming_the_file_and_the_damage(tmp_path: Path, damage: Any, message: str) -> None:
    path = tmp_path / "model.safetensors"
    raw = _write_real(path)
    path.write_bytes(damage(raw))
    with pytest.raises(InputError, match=rf"^{path}: a damaged safetensors file \(.*{message}"):
        check_safetensors(path)
    safetensors_torch = pytest.importorskip("safetensors")
    with pytest.raises(Exception):  # noqa: B017 - the library refuses it too, in its own words
        with safetensors_torch.safe_open(str(path), framework="numpy") as opened:
            [opened.get_tensor(k) for k in opened.keys()]


def test_header_entries_are_checked_against_the_data(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    header = json.dumps({"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 2]}})
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\x00" * 4)
    with pytest.raises(InputError, match=r"tensor 'w': its data lie outside the file"):
        check_safetensors(path)


def test_the_evaluation_hook_scores_a_live_model_through_the_backend(tmp_path: Path) -> None:
    """The hook of gengen.integrations and gengen train: the backend's rows at each step, none written twice."""
    pytest.importorskip("torch")
    from gengen.scoring.hook import EvaluationHook

    store = Store(tmp_path / "s")
    backend = _Toy(store)
    hook = EvaluationHook([backend], store, LABELS, log=lambda _: None)
    hook.attach("tokenizer", "cpu", "fp32")
    assert backend.attached == ("tokenizer", "cpu", "fp32")
    assert hook.evaluate({"weights": 0}, 0) == 2
    assert hook.evaluate({"weights": 10}, 10, {"seed": 1}) == 2
    assert hook.evaluate({"weights": 99}, 10) == 0  # stored already: not scored, not written
    again = EvaluationHook([_Toy(store)], store, LABELS, log=lambda _: None)  # a resumed run
    assert again.pending(10) == [[]] and again.pending(20) == [["a", "bb"]]
    rows = store.load().sort_values(["step", "testset"])
    np.testing.assert_allclose(rows["value"], [0.1, 0.2, 0.11, 0.21], rtol=0, atol=1e-12)  # s / 1000 + len / 10
    assert backend.scored == [(0, ("a", "bb")), (10, ("a", "bb"))]
