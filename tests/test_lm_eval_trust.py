"""Task folders are data: ``!function`` and templates run code only with ``trust_task_code`` (issue 26).

Each test plants a payload that would create ``PAYLOAD_RAN`` and checks that it did not run without the
opt-in, and that it does run with it (so the refusal is what stopped it, not a broken task). The bad-input
corpus (``tests/bad_input/cases_untrusted.py``) runs the same payloads through the CLI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from gengen.errors import InputError
from gengen.scoring.lm_eval import TASKS_DIR, LmEvalSettings, TaskCatalogue
from gengen.scoring.lm_eval.trust import (
    TaskCodeRefused,
    TemplateRefused,
    guard,
    scan_task_folders,
)

EVIL = """
from pathlib import Path
(Path(__file__).resolve().parent.parent / "PAYLOAD_RAN").write_text("imported")


def process(dataset):
    return dataset
"""


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)


def _tasks(tmp_path: Path, doc_to_text: str = '"{{q}}"', extra: str = "") -> Path:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "data.jsonl").write_text('{"q": "a", "label": 0}\n{"q": "b", "label": 1}\n')
    (tasks / "evil.py").write_text(EVIL)
    (tasks / "evil.yaml").write_text(
        f"task: evil\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {tasks / 'data.jsonl'}\n"
        f"test_split: test\noutput_type: multiple_choice\ndoc_to_text: {doc_to_text}\n"
        f'doc_to_choice: ["a", "b"]\ndoc_to_target: label\n{extra}'
    )
    return tasks


def test_function_in_a_task_folder_runs_only_with_trust(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, extra="process_docs: !function evil.process\n")
    settings = LmEvalSettings(tasks=("evil",), include_paths=(str(tasks),))
    with pytest.raises(TaskCodeRefused) as refused:
        TaskCatalogue(settings)
    assert str(refused.value) == (
        f"{tasks / 'evil.yaml'}: '!function evil.process' would run Python code ({tasks / 'evil.py'}) from a "
        "task folder; pass --trust-task-code to allow task code for this run"
    )
    assert not (tmp_path / "PAYLOAD_RAN").exists()
    # The library keyword, as --trust-task-code on the command line: lm-eval imports the file as it would.
    catalogue = TaskCatalogue(LmEvalSettings(tasks=("evil",), include_paths=(str(tasks),), trust_task_code=True))
    assert catalogue.leaves == {"evil": ("evil",)}
    assert (tmp_path / "PAYLOAD_RAN").read_text() == "imported"


def test_the_runtime_guard_refuses_a_function_the_scan_did_not_see(tmp_path: Path) -> None:
    """lm-eval's own YAML loader, inside the guard, on a file outside any scanned folder."""
    from lm_eval.tasks._yaml_loader import load_yaml

    tasks = _tasks(tmp_path, extra="process_docs: !function evil.process\n")
    with guard(trust=False), pytest.raises(TaskCodeRefused, match=r"evil\.yaml: '!function evil\.process'"):
        load_yaml(tasks / "evil.yaml", resolve_func=True)
    assert not (tmp_path / "PAYLOAD_RAN").exists()
    # Outside the guard lm-eval is unchanged (the patch is undone on exit).
    assert callable(load_yaml(tasks / "evil.yaml", resolve_func=True)["process_docs"])
    assert (tmp_path / "PAYLOAD_RAN").exists()


def test_gengens_and_lm_evals_own_task_code_stays_allowed() -> None:
    import lm_eval.tasks
    from lm_eval.tasks._yaml_loader import load_yaml

    from gengen.scoring.lm_eval.nli import process_rte

    with guard(trust=False):
        ours = load_yaml(TASKS_DIR / "gengen_nli" / "gengen_rte.yaml", resolve_func=True)
        theirs = load_yaml(Path(lm_eval.tasks.__file__).parent / "hellaswag" / "hellaswag.yaml", resolve_func=True)
    assert ours["process_docs"] is process_rte
    assert callable(theirs["process_docs"])


@pytest.mark.parametrize(
    ("template", "reached"),
    [
        ("{{ cycler.__init__.__globals__.os.system('touch PAYLOAD_RAN') }}{{q}}", "__globals__"),
        ("{{ (cycler|attr('__init__')).x }}{{q}}", "__init__"),
        ("{{ cycler['__init__'] }}{{q}}", "__init__"),
        ("{% for x in [1] %}{{ x.__class__ }}{% endfor %}{{q}}", "__class__"),
    ],
)
def test_templates_reaching_internals_are_refused_before_anything_loads(
    tmp_path: Path, template: str, reached: str
) -> None:
    """Read from the file (no task loaded, no data read): what the sandbox would refuse at render time, which
    under ``gengen train`` comes only after the whole training run."""
    tasks = _tasks(tmp_path, doc_to_text=json.dumps(template))
    with pytest.raises(TemplateRefused) as refused:
        scan_task_folders([tasks], trust=False)
    assert str(refused.value) == (
        f"{tasks / 'evil.yaml'}: a template reaches Python internals ({reached!r}), which the sandbox refuses; "
        "pass --trust-task-code to render them unsandboxed for this run"
    )
    scan_task_folders([tasks], trust=True)
    assert not (tmp_path / "PAYLOAD_RAN").exists()


def test_templates_are_sandboxed_without_trust(tmp_path: Path) -> None:
    # The attributes' names are built at render time, so only the sandbox (not the scan) can see them.
    payload = json.dumps(
        "{% set n = '__in' ~ 'it__' %}{% set g = '__glo' ~ 'bals__' %}"
        "{{ cycler[n][g]['os'].system('touch PAYLOAD_RAN') }}{{q}}"
    )
    tasks = _tasks(tmp_path, doc_to_text=payload)
    with pytest.raises(TemplateRefused) as refused:
        TaskCatalogue(LmEvalSettings(tasks=("evil",), include_paths=(str(tasks),)))
    message = str(refused.value)
    assert message.startswith(f"{tasks / 'evil.yaml'}: a template of lm-eval task 'evil' was refused by the sandbox")
    assert message.endswith("pass --trust-task-code to render them unsandboxed for this run") and "\n" not in message
    assert not (tmp_path / "PAYLOAD_RAN").exists()
    TaskCatalogue(LmEvalSettings(tasks=("evil",), include_paths=(str(tasks),), trust_task_code=True))
    assert (tmp_path / "PAYLOAD_RAN").exists()  # lm-eval's own environment runs it: the sandbox stopped it


def test_ordinary_templates_render_the_same_in_the_sandbox() -> None:
    from lm_eval import utils

    template = (
        "{{q|upper}} {{ '%s!'|format(q) }} {{ q.replace('a', 'b') }} {{ choices[1] }}{{ q|regex_replace('a', 'c') }}"
    )
    doc = {"q": "a", "choices": ["x", "y"]}
    plain = utils.apply_template(template, doc)
    with guard(trust=False):
        assert type(utils.env).__name__ == "SandboxedEnvironment"
        assert utils.apply_template(template, doc) == plain == "A a! b yc"
    assert type(utils.env).__name__ == "Environment"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("broken.yaml", "task: x\ndoc_to_text: [unclosed\n", "not valid task YAML (line 3: "),
        ("latin1.yaml", "task: caf\u00e9\n".encode("latin-1"), "not UTF-8 text (byte 9)"),
        ("tag.yaml", "task: !python/object:os.system x\n", "not valid task YAML"),
    ],
)
def test_broken_task_files_are_named(tmp_path: Path, name: str, content: str | bytes, message: str) -> None:
    (tmp_path / "tasks").mkdir()
    path = tmp_path / "tasks" / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputError) as caught:
        scan_task_folders([tmp_path / "tasks"], trust=True)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_a_fifo_in_a_task_folder_is_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    os.mkfifo(tmp_path / "tasks" / "pipe.yaml")
    with pytest.raises(InputError, match=r"pipe\.yaml: not a regular file, expected a task YAML file$"):
        scan_task_folders([tmp_path / "tasks"], trust=False)
