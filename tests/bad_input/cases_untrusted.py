"""Files in a study folder are data: planted code must not run (issue 26, item 0).

Each case plants a payload that would create ``PAYLOAD_RAN`` in the case folder (a Python file named by a task
YAML's ``!function``, a Jinja template reaching ``os.system``, a pickle in the Slurm folder) and asserts, after
the command, that the file does not exist, besides the corpus' own checks (exit 2, one ``error:`` line naming
the file, no traceback, stores unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .case import Case

MARKER = "PAYLOAD_RAN"

# Importing this file (or calling its function) creates the marker next to the task folder.
EVIL_PY = f"""
from pathlib import Path
(Path(__file__).resolve().parent.parent / "{MARKER}").write_text("imported")


def process(dataset):
    (Path(__file__).resolve().parent.parent / "{MARKER}").write_text("called")
    return dataset
"""

TEMPLATE_PAYLOAD = "{{ cycler.__init__.__globals__.os.system('touch " + MARKER + "') }}{{q}}"


def _task_yaml(folder: Path, name: str, *, text: str = '"{{q}}"', extra: str = "") -> str:
    data = folder / "tasks" / "data.jsonl"
    return (
        f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
        f'output_type: multiple_choice\ndoc_to_text: {text}\ndoc_to_choice: ["a", "b"]\ndoc_to_target: label\n{extra}'
    )


def _needs(*modules: str) -> None:
    import pytest

    for module in modules:
        pytest.importorskip(module)


def _checkpoint(folder: Path) -> None:
    """A folder that passes for a checkpoint (never loaded: the refusal comes first)."""
    (folder / "series" / "checkpoint-5").mkdir(parents=True)
    (folder / "series" / "checkpoint-5" / "config.json").write_text("{}")


def _tasks(kind: str) -> Callable[[Path], None]:
    """A task folder with the payload ``kind``: function (evil.py + !function), template, include (a YAML
    including one, outside the task folder, that names the function)."""

    def setup(folder: Path) -> None:
        _needs("lm_eval", "torch")
        tasks = folder / "tasks"
        tasks.mkdir(exist_ok=True)
        (tasks / "data.jsonl").write_text('{"q": "a", "label": 0}\n{"q": "b", "label": 1}\n')
        (tasks / "evil.py").write_text(EVIL_PY)
        if kind == "function":
            (tasks / "evil.yaml").write_text(_task_yaml(folder, "evil", extra="process_docs: !function evil.process\n"))
        elif kind == "template":
            (tasks / "evil.yaml").write_text(_task_yaml(folder, "evil", text=f'"{TEMPLATE_PAYLOAD}"'))
        elif kind == "include":
            elsewhere = folder / "elsewhere"
            elsewhere.mkdir()
            (elsewhere / "evil.py").write_text(EVIL_PY.replace("parent.parent", "parent.parent"))
            (elsewhere / "base.yaml").write_text("process_docs: !function evil.process\n")
            (tasks / "evil.yaml").write_text(_task_yaml(folder, "evil", extra=f"include: {elsewhere / 'base.yaml'}\n"))
        elif kind == "broken":
            (tasks / "evil.yaml").write_text("task: evil\ndoc_to_text: [unclosed\n")
        elif kind == "plain":
            (tasks / "evil.yaml").write_text(_task_yaml(folder, "evil"))
        elif kind == "fifo":
            import os

            (tasks / "evil.yaml").write_text(_task_yaml(folder, "evil"))
            os.mkfifo(tasks / "other.yaml")
        else:
            raise ValueError(kind)
        _checkpoint(folder)

    return setup


def _not_run(folder: Path) -> None:
    assert not (folder / MARKER).exists(), f"the planted payload ran: {(folder / MARKER).read_text()!r}"


SCORE = [
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

STUDY = """
[study]
name = "lm"
output = "out"
id_testset = "evil"

[[models]]
name = "tiny"
path = "series/checkpoint-5"
family = "olmo2"
size = "tiny"

[task]
train = {{ path = "tasks/data.jsonl" }}

[training]
max_steps = 2
keep_checkpoints = "all"

[evaluation]
backend = "lm-eval"

[evaluation.lm_eval]
tasks = ["evil"]
include_paths = ["tasks"]
"""


def _study(kind: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        _tasks(kind)(folder)
        (folder / "study.toml").write_text(STUDY.format())

    return setup


def _lm_eval_cases() -> list[Case]:
    yaml_file = "{tmp}/tasks/evil.yaml"
    out = [
        Case("untrusted-score-function", SCORE, yaml_file, setup=_tasks("function"), after=_not_run),
        Case("untrusted-score-template", SCORE, yaml_file, setup=_tasks("template"), after=_not_run),
        Case(
            "untrusted-score-include-function",
            SCORE,
            "{tmp}/elsewhere/base.yaml",
            setup=_tasks("include"),
            after=_not_run,
        ),
        Case("untrusted-score-broken-yaml", SCORE, yaml_file, setup=_tasks("broken")),
        Case("untrusted-score-fifo-yaml", SCORE, "{tmp}/tasks/other.yaml", setup=_tasks("fifo")),
        # Not planted code, but the same task folder: lm-eval failed deep inside (a traceback) once a model loaded.
        Case(
            "lm-eval-num-fewshot-above-the-pool",
            [*SCORE, "--num-fewshot", "100000"],
            "--num-fewshot: 100000",
            setup=_tasks("plain"),
        ),
        Case("lm-eval-batch-size-auto-x", [*SCORE, "--batch-size", "auto:x"], "--batch-size", setup=_tasks("plain")),
    ]
    for command in ("train", "run"):
        out.append(
            Case(
                f"untrusted-{command}-function",
                [command, "{tmp}/study.toml"],
                yaml_file,
                setup=_study("function"),
                after=_not_run,
            )
        )
    return out


EXECUTOR_STUDY = """
[study]
name = "s"
output = "out"
id_testset = "mnli"

[[models]]
name = "m"
path = "facebook/opt-125m"
family = "opt"
size = "125m"

[task]
train = { source = "mnli" }

[[testsets]]
name = "mnli"
source = "mnli"

[executor]
kind = "slurm"
"""


class _Planted:
    """Unpickling this creates the marker: what a hostile pickle in the Slurm folder would do."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (Path.write_text, (Path(self.marker), "unpickled"))


def _state(content: str, *, pickle_for: str | None = None) -> Callable[[Path], None]:
    """The study's one run gets ``content`` as its state.json (and, optionally, a planted result pickle)."""

    def setup(folder: Path) -> None:
        import pickle

        from gengen.study.config import load_config

        (folder / "study.toml").write_text(EXECUTOR_STUDY)
        config = load_config(folder / "study.toml")
        path = config.run_dir(config.runs()[0]) / "state.json"
        path.parent.mkdir(parents=True)
        path.write_text(content)
        if pickle_for is not None:
            jobs = folder / "out" / "slurm" / pickle_for
            jobs.mkdir(parents=True)
            planted = pickle.dumps(("success", _Planted(str(folder / MARKER))))
            (jobs / f"{pickle_for}_0_result.pkl").write_bytes(planted)

    return setup


def _executor_cases() -> list[Case]:
    state = "{tmp}/out/runs/m/seed-0/state.json"
    running = '{{"status": "running", "executor": "slurm", "attempt": 1, "job_id": {job}}}'
    planted = {
        "job-id-path": ('"../../../elsewhere"', "job_id: '../../../elsewhere' is not a job id"),
        "job-id-shell": ('"1; touch PAYLOAD_RAN"', "job_id: '1; touch PAYLOAD_RAN' is not a job id"),
        "job-id-number": ("7", "job_id: expected str"),
    }
    out = []
    for label, (job, message) in planted.items():
        for command in ("run", "status"):
            out.append(
                Case(
                    f"untrusted-{command}-state-{label}",
                    [command, "{tmp}/study.toml"],
                    f"{state}: {message}",
                    setup=_state(running.format(job=job), pickle_for="7" if label == "job-id-number" else None),
                    after=_not_run,
                )
            )
    malformed = {
        "not-json": ('{"status": "runn', "not valid JSON"),
        "a-list": ("[1, 2]", "not a run state"),
        "attempt-text": ('{"status": "pending", "attempt": "two"}', "attempt: expected int, got str"),
        "pid-huge": ('{"status": "running", "pid": 1e400}', "pid: expected int, got float"),
        "status-unknown": ('{"status": "finished"}', "status: expected one of"),
    }
    for label, (content, message) in malformed.items():
        for command in ("run", "status"):
            out.append(
                Case(
                    f"cli-{command}-state-{label}",
                    [command, "{tmp}/study.toml"],
                    f"{state}: {message}",
                    setup=_state(content),
                )
            )
    return out


def _spool(content: str) -> Callable[[Path], None]:
    """The study's one run gets a spool batch file holding ``content``."""

    def setup(folder: Path) -> None:
        from gengen.study.config import load_config

        (folder / "study.toml").write_text(EXECUTOR_STUDY)
        config = load_config(folder / "study.toml")
        batch = config.run_dir(config.runs()[0]) / "scores" / "step-000000000-0123456789ab.json"
        batch.parent.mkdir(parents=True)
        batch.write_text(content)

    return setup


def _spool_cases() -> list[Case]:
    batch = "{tmp}/out/runs/m/seed-0/scores/step-000000000-0123456789ab.json"
    return [
        Case(
            f"cli-{command}-spool-{label}",
            [command, "{tmp}/study.toml"],
            f"{batch}: {message}",
            setup=_spool(content),
        )
        for command in ("status", "run")  # run: refused before the store is created
        for label, (content, message) in {
            "not-json": ('[{"model": "m"', "a damaged score batch (not JSON)"),
            "an-object": ('{"model": "m"}', "a damaged score batch (a JSON list"),
            "record-without-key": ('[{"model": "m", "value": 0.5}]', "score record 1 lacks"),
        }.items()
    ]


def cases() -> list[Case]:
    """Every planted-code and planted-state case."""
    return [*_lm_eval_cases(), *_executor_cases(), *_spool_cases()]
