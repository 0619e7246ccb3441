"""``gengen plan`` and the study file: counts and sizes above a stated limit, broken model configs, odd files.

Each was a traceback, a hang, an out-of-memory kill or a silent accept (issue 26): a schedule with a billion
evaluations, a TOML list of a million seeds, a model config with zero heads or an infinite hidden size, a study
file in UTF-16 or nested 100,000 deep. Every case must end in one ``error:`` line naming the setting (or the
file) before any work is done; ``tests/bad_input/test_corpus.py`` runs them all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from .case import Case

MODEL = {
    "model_type": "opt",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "ffn_dim": 256,
    "vocab_size": 1000,
    "max_position_embeddings": 128,
}

STUDY = """[study]
name = "p"
id_testset = "t"

[[models]]
name = "m"
path = "./m"
family = "opt"
size = "1"

[task]
train = { path = "data.csv" }

[[testsets]]
name = "t"
path = "data.csv"
"""

DATA = "premise,hypothesis,label\na,b,1\nc,d,0\n"


def _study(extra: str = "", model: object = None) -> dict[str, bytes | str]:
    """The files of a one-model study with ``extra`` TOML appended and ``model`` as its config.json."""
    config = model if isinstance(model, (str, bytes)) else json.dumps(MODEL if model is None else model)
    return {"study.toml": STUDY + extra, "m/config.json": config, "data.csv": DATA}


def _plan(name: str, culprit: str, extra: str = "", model: object = None, *flags: str) -> Case:
    return Case(f"plan-{name}", ["plan", "{tmp}/study.toml", *flags], culprit, files=_study(extra, model))


def _schedule_cases() -> list[Case]:
    """Counts that made plan build a billion steps, hang or overflow."""
    return [
        _plan("max-steps-1e12-every-step", "training.max_steps", "[training]\nmax_steps = 1000000000000\n"),
        _plan(
            "a-billion-evaluations",
            "evaluation.every",
            "[training]\nmax_steps = 1000000000\n[evaluation]\nevery = 1\n",
        ),
        _plan("log-points-1e9", "evaluation.log_points", "[evaluation]\nlog_points = 1000000000\n"),
        _plan("shots-1e12", "data.shots[0]", "[data]\nshots = [1000000000000]\n"),
        _plan("epochs-1e300", "training.epochs", "[training]\nepochs = 1e300\n"),
        _plan(
            "epochs-times-data-above-the-step-limit",
            "training.epochs",
            "[training]\nepochs = 1000000\nbatch_size = 1\n[data]\nshots = [100000]\n",
        ),
        _plan(
            "seeds-20000",
            "training.seeds",
            "[training]\nseeds = [" + ", ".join(map(str, range(20_000))) + "]\n",
        ),
        _plan(
            "steps-list-above-the-limit",
            "evaluation.steps",
            "[evaluation]\nsteps = [" + ", ".join(map(str, range(100_001))) + "]\n",
        ),
        _plan(
            "runs-above-the-limit",
            "training.seeds",
            "[training]\nseeds = ["
            + ", ".join(map(str, range(10_000)))
            + "]\n[data]\nshots = ["
            + ", ".join(map(str, range(2, 12)))
            + "]\ndata_seeds = ["
            + ", ".join(map(str, range(20)))
            + "]\n",
        ),
    ]


def _model_cases() -> list[Case]:
    """Model configs that were tracebacks or silently planned."""
    culprit = "{tmp}/m/config.json"
    return [
        _plan("model-zero-heads", "num_attention_heads", "", {**MODEL, "num_attention_heads": 0}),
        _plan("model-zero-layers", "num_hidden_layers", "", {**MODEL, "num_hidden_layers": 0}),
        _plan(
            "model-hidden-1e400",
            "hidden_size",
            "",
            json.dumps(MODEL).replace('"hidden_size": 64', '"hidden_size": 1e400'),
        ),
        _plan("model-hidden-negative", "hidden_size", "", {**MODEL, "hidden_size": -64}),
        _plan("model-hidden-fraction", "hidden_size", "", {**MODEL, "hidden_size": 64.5}),
        _plan("model-hidden-string", "hidden_size", "", {**MODEL, "hidden_size": "64"}),
        _plan("model-heads-do-not-divide", "num_attention_heads", "", {**MODEL, "num_attention_heads": 5}),
        _plan("model-vocab-huge", "vocab_size", "", {**MODEL, "vocab_size": 10**12}),
        _plan("model-config-is-a-list", culprit, "", [1, 2, 3]),
        _plan("model-config-is-a-string", culprit, "", '"hello"'),
        _plan("model-config-nested-100000", culprit, "", "[" * 100_000 + "]" * 100_000),
        _plan("model-config-not-json", culprit, "", "{not json"),
        _plan(
            "model-llama-kv-heads-above-heads",
            "num_key_value_heads",
            "",
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_key_value_heads": 8,
                "num_hidden_layers": 2,
                "intermediate_size": 128,
                "vocab_size": 100,
            },
        ),
    ]


def _option_cases() -> list[Case]:
    """plan's own options: a TFLOPS of 0, negative overheads, NaN, a grid of a billion GPUs."""
    return [
        _plan("tflops-zero", "--tflops", "", None, "--tflops", "0"),
        _plan("overhead-negative", "--overhead", "", None, "--overhead", "-5"),
        _plan("mfu-nan", "--mfu", "", None, "--mfu", "nan"),
        _plan("gpu-memory-inf", "--gpu-memory", "", None, "--gpu-memory", "inf"),
        _plan("tokens-per-example-huge", "--tokens-per-example", "", None, "--tokens-per-example", "1000000000000"),
        _plan("total-gpus-a-billion", "--total-gpus", "", None, "--total-gpus", "1000000000"),
        _plan("gpus-zero", "--gpus", "", None, "--gpus", "0"),
    ]


def _deep_toml() -> str:
    return STUDY + "[x]\na = " + "[" * 100_000 + "]" * 100_000 + "\n"


def _study_file_cases() -> list[Case]:
    """Study files nested too deeply, in UTF-16, too large, or with a test set whose data are garbage."""
    utf16 = STUDY.encode("utf-16")
    return [
        Case(
            "study-toml-nested-100000-plan", ["plan", "{tmp}/deep.toml"], "{tmp}/deep.toml", {"deep.toml": _deep_toml()}
        ),
        Case(
            "study-toml-nested-100000-train",
            ["train", "{tmp}/deep.toml"],
            "{tmp}/deep.toml",
            {"deep.toml": _deep_toml()},
        ),
        Case("study-toml-utf16-plan", ["plan", "{tmp}/u.toml"], "{tmp}/u.toml: not UTF-8", {"u.toml": utf16}),
        Case("study-toml-utf16-run", ["run", "{tmp}/u.toml"], "{tmp}/u.toml: not UTF-8", {"u.toml": utf16}),
        Case(
            "study-toml-oversized",
            ["plan", "{tmp}/big.toml"],
            "{tmp}/big.toml",
            {"big.toml": STUDY + "# " + "x" * (5 * 1024**2) + "\n"},
        ),
        Case(
            "study-testset-dataset-garbage-dict",
            ["plan", "{tmp}/study.toml"],
            "testsets[1]",
            files=_study('[[testsets]]\nname = "g"\ndataset = { a = 1, b = [1, { c = 2 }] }\n'),
        ),
        Case(
            "study-testset-source-garbage-dict",
            ["plan", "{tmp}/study.toml"],
            "testsets[1].source",
            files=_study('[[testsets]]\nname = "g"\nsource = { a = 1, b = [1, { c = 2 }] }\n'),
        ),
        Case(
            "study-testset-columns-garbage-dict",
            ["plan", "{tmp}/study.toml"],
            "testsets[1].columns.premise",
            files=_study('[[testsets]]\nname = "g"\npath = "data.csv"\ncolumns = { premise = { x = 1 } }\n'),
        ),
        Case(
            "study-training-choice-typo",
            ["plan", "{tmp}/study.toml"],
            "training.strategy: expected one of 'ddp', 'fsdp', got 'fsd' (did you mean 'fsdp'?)",
            files=_study('[training]\nstrategy = "fsd"\n'),
        ),
    ]


def _linked_checkpoint(folder: Path) -> None:
    """A run folder whose ``checkpoint-2`` is a symlink to a folder outside the study."""
    outside = folder / "elsewhere"
    (outside / "checkpoint-2").mkdir(parents=True)
    (outside / "checkpoint-2" / "trainer_state.pt").write_bytes(b"not a state")
    run = folder / "gengen-p" / "runs" / "m" / "seed-0"
    run.mkdir(parents=True)
    os.symlink(outside / "checkpoint-2", run / "checkpoint-2")


def _elsewhere_untouched(folder: Path) -> None:
    listed = sorted(p.name for p in (folder / "elsewhere" / "checkpoint-2").iterdir())
    assert listed == ["trainer_state.pt"], f"something was written through the link: {listed}"


def _checkpoint_cases() -> list[Case]:
    """A checkpoint folder that is a symlink: refused, nothing written or deleted through it."""
    setup: Callable[[Path], None] = _linked_checkpoint
    return [
        Case(
            "train-checkpoint-folder-is-a-symlink",
            ["train", "{tmp}/study.toml"],
            "checkpoint-2",
            files=_study(),
            setup=setup,
            after=_elsewhere_untouched,
        )
    ]


def cases() -> list[Case]:
    """Every plan and study-file limit case."""
    return [*_schedule_cases(), *_model_cases(), *_option_cases(), *_study_file_cases(), *_checkpoint_cases()]
