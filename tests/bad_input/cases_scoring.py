"""Bad checkpoints and task files for ``gengen score``: damaged safetensors files, broken task YAML (issue 26).

Each case builds a checkpoint folder (``series/checkpoint-5``: a ``config.json`` and a ``model.safetensors``)
whose weights file is damaged as a careless copy or a hostile folder would leave it: cut short, a header
length beyond the format's limit or beyond the file, a header that is not JSON, a tensor whose data lie outside
the file. The file is refused in one line naming it, before any model is loaded and before the store is opened
(no store appears in the case folder), through gengen's own scorer and through the lm-eval backend. A task YAML
file that defines no task (empty, a list, a mapping without ``task:``) or names it with a number is reported
naming the file, not as an unknown task and not with lm-eval's traceback.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

from .case import Case

WEIGHTS = "series/checkpoint-5/model.safetensors"

STUDY = """
[study]
name = "s"
output = "out"
id_testset = "id"

[[models]]
name = "m"
path = "series/checkpoint-5"
family = "opt"
size = "tiny"

[task]
train = { path = "data.jsonl" }

[[testsets]]
name = "id"
path = "data.jsonl"
"""

DATA = '{"premise": "a", "hypothesis": "b", "label": "Yes"}\n{"premise": "c", "hypothesis": "d", "label": "No"}\n'


def _header(header: object, data: bytes = b"", *, length: int | None = None) -> bytes:
    """A safetensors file: the 8-byte header length (``length`` overrides the true one), the header, data."""
    raw = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


_TENSOR = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}

# label -> (the file's bytes, what its error line says is wrong: checked in tests/test_scoring.py)
DAMAGED: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "truncated"),
    "shorter-than-its-length": (b"\x10\x00\x00", "truncated"),
    "header-beyond-the-file": (_header(_TENSOR, b"\x00" * 8, length=10_000), "truncated"),
    "header-length-2-to-the-62": (_header(_TENSOR, b"\x00" * 8, length=2**62), "above the format's limit"),
    "header-length-max-u64": (_header(_TENSOR, b"\x00" * 8, length=2**64 - 1), "above the format's limit"),
    "header-not-json": (_header(b"{not json", b"\x00" * 8), "not valid JSON"),
    "header-not-utf8": (_header(b'{"\xff": 1}', b""), "not valid JSON"),
    "header-a-list": (_header([1, 2]), "not a JSON object"),
    "data-cut-short": (_header(_TENSOR, b"\x00" * 4), "outside the file"),
    "offsets-negative": (_header({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}), "outside"),
    "offsets-missing": (_header({"w": {"dtype": "F32", "shape": [2]}}, b"\x00" * 8), "outside the file"),
}


def _checkpoint(weights: bytes) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        checkpoint = folder / "series" / "checkpoint-5"
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / "config.json").write_text('{"model_type": "opt"}')
        (checkpoint / "model.safetensors").write_bytes(weights)

    return setup


def _no_store(folder: Path) -> None:
    made = [str(p.relative_to(folder)) for p in folder.rglob("*.sqlite")]
    assert not made, f"a store was created before the checkpoint was refused: {made}"


def _with_tasks(weights: bytes) -> Callable[[Path], None]:
    """The lm-eval case: a plain local task (as in the planted-code cases) next to the damaged checkpoint."""

    def setup(folder: Path) -> None:
        from .cases_untrusted import _tasks

        _tasks("plain")(folder)
        _checkpoint(weights)(folder)

    return setup


# A task YAML that lm-eval would skip (reported as an unknown task) or fail on with a traceback.
BROKEN_TASKS: dict[str, tuple[str, str]] = {
    "a-list": ("- a\n- b\n", "defines no lm-eval task"),
    "no-task-key": ("dataset_path: json\n", "defines no lm-eval task"),
    "empty": ("", "defines no lm-eval task"),
    "task-a-number": ("task: 12\n", "task: expected a name"),
    "group-a-list-of-numbers": ("group: [1, 2]\n", "group: expected a name"),
    "tag-a-number": ("task: evil\ntag: 3\n", "tag: expected a name"),
}


def _broken_task(text: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        from .cases_untrusted import _tasks

        _tasks("plain")(folder)
        (folder / "tasks" / "evil.yaml").write_text(text)

    return setup


def cases() -> list[Case]:
    """Every damaged-weights and broken-task case."""
    score = ["score", "{tmp}/study.toml", "--checkpoints", "{tmp}/series/checkpoint-5", "--name", "m"]
    out = [
        Case(
            f"score-safetensors-{label}",
            score,
            f"{{tmp}}/{WEIGHTS}: a damaged safetensors file",
            files={"study.toml": STUDY, "data.jsonl": DATA},
            setup=_checkpoint(weights),
            after=_no_store,
        )
        for label, (weights, _) in DAMAGED.items()
    ]
    lm_eval = [
        "score",
        "--backend",
        "lm-eval",
        "--tasks",
        "evil",
        "--include-path",
        "{tmp}/tasks",
        "--checkpoints",
        "{tmp}/series/checkpoint-5",
        "--store",
        "{tmp}/store",
        "--name",
        "m",
    ]
    for label in ("empty", "header-length-2-to-the-62"):
        weights, _ = DAMAGED[label]
        out.append(
            Case(
                f"lm-eval-safetensors-{label}",
                lm_eval,
                f"{{tmp}}/{WEIGHTS}: a damaged safetensors file",
                setup=_with_tasks(weights),
                after=_no_store,
            )
        )
    for label, (text, problem) in BROKEN_TASKS.items():
        out.append(
            Case(
                f"lm-eval-task-yaml-{label}",
                lm_eval,
                f"{{tmp}}/tasks/evil.yaml: {problem}",
                setup=_broken_task(text),
                after=_no_store,
            )
        )
    # A template the sandbox would refuse only once scoring starts: under train/run that is after training.
    for command in ("train", "run"):
        out.append(
            Case(
                f"lm-eval-{command}-template-internals-before-training",
                [command, "{tmp}/study.toml"],
                "{tmp}/tasks/evil.yaml: a template reaches Python internals",
                setup=_template_study,
                after=_untrained,
            )
        )
    # The study's few-shot setting cannot be met: refused before training, not after it.
    for command in ("train", "run"):
        out.append(
            Case(
                f"lm-eval-{command}-study-num-fewshot-above-the-pool",
                [command, "{tmp}/study.toml"],
                "num_fewshot: 100000",
                setup=_fewshot_study,
                after=_untrained,
            )
        )
    return out


def _fewshot_study(folder: Path) -> None:
    from .cases_untrusted import _study

    _study("plain")(folder)
    study = folder / "study.toml"
    study.write_text(study.read_text() + "num_fewshot = 100000\n")


def _template_study(folder: Path) -> None:
    from .cases_untrusted import _study

    _study("template")(folder)


def _untrained(folder: Path) -> None:
    from .cases_untrusted import _not_run

    _not_run(folder)
    assert not (folder / "out" / "runs").exists(), "a run started before the template was refused"
