"""Bad inputs to ``gengen ingest``: values that cannot be scores, counts out of range, damaged files.

Generated from small tables (formats x bad values, files x kinds of damage); ``test_corpus.py`` runs them and
checks that each ends in exit status 2 with one ``error:`` line naming the file, row or key and column, and
that the store already in the case folder (one score, written by ``setup``) is unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from .case import Case

STORE = "{tmp}/study"
LONG_HEADER = "model,step,testset,metric,value"


def _store(folder: Path) -> None:
    """A store holding one score, so that "unchanged" is checked against something."""
    from gengen.store.database import Store

    Store(folder / "study").write_scores(
        [{"model": "m-1m", "step": 0, "testset": "piqa", "metric": "acc", "value": 0.5}]
    )


def _ingest(*paths: str, extra: tuple[str, ...] = ()) -> list[str]:
    return ["ingest", *[f"{{tmp}}/{p}" for p in paths], "--store", STORE, "-q", *extra]


def _case(name: str, files: dict[str, bytes | str], culprit: str, *extra: str, paths: tuple[str, ...] = ()) -> Case:
    return Case(f"ingest-{name}", _ingest(*(paths or tuple(files)), extra=extra), culprit, files, _store)


def _v03(value: object = 0.61, *, task: str = "piqa", name: str = "160m_step1000.json") -> dict[str, str]:
    """An lm-evaluation-harness v0.3 results file with ``value`` as ``results[task].acc``, as JSON text."""
    data = {
        "results": {task: {"acc": "@VALUE@", "acc_stderr": 0.011}, "sciq": {"acc": 0.7, "acc_stderr": 0.01}},
        "versions": {task: 0, "sciq": 0},
        "config": {"model_args": "pretrained=EleutherAI/pythia-160m,revision=step1000", "num_fewshot": 0},
    }
    return {name: json.dumps(data).replace('"@VALUE@"', value if isinstance(value, str) else json.dumps(value))}


def _v04(value: str, metric: str = "acc,none", *, samples: int = 2376) -> dict[str, str]:
    data = {
        "results": {"arc_easy": {"alias": "arc_easy", metric: "@VALUE@", "acc_stderr,none": 0.01}},
        "n-shot": {"arc_easy": 0},
        "n-samples": {"arc_easy": {"original": 2376, "effective": samples}},
        "config": {"model_args": "pretrained=EleutherAI/pythia-160m,revision=step3000"},
    }
    return {"results_2024-06-03T16-13-20.json": json.dumps(data).replace('"@VALUE@"', value)}


def _trainer(entry: str) -> dict[str, str]:
    text = '{"global_step": 100, "log_history": [' + entry + "]}"
    return {"run-a/trainer_state.json": text}


# ------------------------------------------------------------------------------------------ non-finite values

NON_FINITE = {"inf": "inf", "minus-inf": "-inf", "infinity": "Infinity", "1e400": "1e400", "nan": "nan", "NaN": "NaN"}


def _non_finite_cases() -> list[Case]:
    out = []
    for label, text in NON_FINITE.items():
        long = f"{LONG_HEADER}\nm-1m,0,piqa,acc,0.5\nm-1m,1,piqa,acc,{text}\n"
        out.append(_case(f"long-csv-value-{label}", {"long.csv": long}, "long.csv: line 3"))
        wide = f"model,step,piqa/acc,sciq/acc\nm-1m,0,0.5,0.6\nm-1m,1,{text},0.6\n"
        out.append(_case(f"wide-csv-value-{label}", {"wide.csv": wide}, "wide.csv: line 3: column 'piqa/acc'"))
    for label, text in (("inf", "inf"), ("nan", "NaN")):
        runs = f"run,mnli,hans\n1,0.8,0.5\n2,0.81,{text}\n"
        out.append(
            _case(f"runs-csv-value-{label}", {"runs.csv": runs}, "runs.csv: line 3: column 'hans'", "--metric", "acc")
        )
    for label, text in (("Infinity", "Infinity"), ("minus-Infinity", "-Infinity"), ("NaN", "NaN"), ("1e400", "1e400")):
        out.append(_case(f"lm-eval-v03-value-{label}", _v03(text), "key results.piqa.acc"))
    for label, text in (("inf-string", '"inf"'), ("nan-string", '"nan"'), ("Infinity-string", '"Infinity"')):
        out.append(_case(f"lm-eval-v03-value-{label}", _v03(text), "key results.piqa.acc"))
    for label, text in (
        ("inf-string", '"inf"'),
        ("Infinity", "Infinity"),
        ("NaN", "NaN"),
        ("minus-inf-string", '"-inf"'),
    ):
        out.append(_case(f"lm-eval-v04-value-{label}", _v04(text), "key results.arc_easy.acc,none"))
    for label, text in (("Infinity", "Infinity"), ("NaN", "NaN")):
        entry = '{"epoch": 1.0, "eval_accuracy": ' + text + ', "eval_loss": 0.5, "step": 100}'
        out.append(_case(f"trainer-state-value-{label}", _trainer(entry), "log_history[0].eval_accuracy"))
    stderr = f"{LONG_HEADER},stderr\nm-1m,0,piqa,acc,0.5,inf\n"
    out.append(_case("long-csv-stderr-inf", {"long.csv": stderr}, "line 2: column 'stderr'"))
    epoch = f"{LONG_HEADER},epoch\nm-1m,0,piqa,acc,0.5,Infinity\n"
    out.append(_case("long-csv-epoch-infinity", {"long.csv": epoch}, "line 2: column 'epoch'"))
    return out


def _parquet_case(name: str, columns: dict[str, object], culprit: str) -> Case:
    def setup(folder: Path) -> None:
        import pandas as pd

        pd.DataFrame(columns).to_parquet(folder / "scores.parquet")
        _store(folder)

    return Case(f"ingest-{name}", _ingest("scores.parquet"), culprit, {}, setup)


def _parquet_cases() -> list[Case]:
    import numpy as np
    import pandas as pd

    base = {"model": ["m-1m", "m-1m"], "testset": ["piqa", "piqa"], "metric": ["acc", "acc"]}
    return [
        _parquet_case("parquet-value-inf", {**base, "step": [0, 1], "value": [0.5, np.inf]}, "scores.parquet: row 2"),
        _parquet_case(
            "parquet-datetime-step",
            {**base, "step": pd.to_datetime(["2020-01-01", "2020-01-02"]), "value": [0.5, 0.6]},
            "column 'step'",
        ),
        _parquet_case("parquet-negative-step", {**base, "step": [0, -3], "value": [0.5, 0.6]}, "row 2: column 'step'"),
        _parquet_case("parquet-acc-percent", {**base, "step": [0, 1], "value": [0.5, 59.57]}, "row 2"),
    ]


# ------------------------------------------------------------------------------------------ ranges

FRACTIONS = ("acc", "accuracy", "acc_norm", "exact_match", "f1", "len_norm")


def _range_cases() -> list[Case]:
    out = []
    for metric in FRACTIONS:
        text = f"{LONG_HEADER}\nm-1m,0,piqa,{metric},0.61\nm-1m,1,piqa,{metric},59.57\n"
        out.append(_case(f"long-csv-{metric}-percent", {"long.csv": text}, "long.csv: line 3"))
    for label, value in (("negative", "-0.5"), ("above-one", "1.5"), ("above-hundred", "250")):
        text = f"{LONG_HEADER}\nm-1m,0,piqa,acc,{value}\n"
        out.append(_case(f"long-csv-acc-{label}", {"long.csv": text}, "long.csv: line 2"))
    out.append(_case("lm-eval-v03-acc-percent", _v03(59.57), "key results.piqa.acc"))
    out.append(_case("lm-eval-v04-acc-percent", _v04("59.57"), "key results.arc_easy.acc,none"))
    out.append(_case("lm-eval-v04-exact-match-above-one", _v04("2.0", "exact_match,strict-match"), "exact_match"))
    wandb = "_step,eval/downstream/arc_easy_acc,eval/downstream/piqa_acc\n0,0.3,0.5\n100,41.2,0.55\n"
    out.append(
        _case("wandb-acc-percent", {"olmo.csv": wandb}, "olmo.csv: line 3: column 'eval/downstream/arc_easy_acc'")
    )
    runs = "Seed,MNLI,HANS\n1,84.1,51.2\n2,83.9,52.0\n"
    out.append(_case("runs-percent-with-metric-acc", {"runs.csv": runs}, "runs.csv: line 2", "--metric", "acc"))
    trainer = '{"epoch": 1.0, "eval_accuracy": 75.0, "eval_loss": 0.5, "step": 100}'
    out.append(_case("trainer-state-accuracy-percent", _trainer(trainer), "log_history[0].eval_accuracy"))
    return out


def _count_cases() -> list[Case]:
    out = []
    for column, value, label in (
        ("step", "-1", "negative"),
        ("step", "1e20", "1e20"),
        ("step", "99999999999999999999", "twenty-nines"),
        ("step", "9.3e18", "past-int64"),
        ("step", "1.5", "fraction"),
        ("shots", "-1", "negative"),
        ("n_examples", "-5", "negative"),
        ("tokens", "-1", "negative"),
        ("stderr", "-0.1", "negative"),
        ("epoch", "-1", "negative"),
        ("seed", "1e30", "huge"),
    ):
        if column == "step":
            text = f"model,step,testset,metric,value\nm-1m,0,piqa,acc,0.5\nm-1m,{value},piqa,acc,0.6\n"
            culprit = "line 3: column 'step'"
        else:
            text = f"{LONG_HEADER},{column}\nm-1m,0,piqa,acc,0.5,1\nm-1m,1,piqa,acc,0.6,{value}\n"
            culprit = f"line 3: column '{column}'"
        out.append(_case(f"long-csv-{column}-{label}", {"long.csv": text}, culprit))
    wide = f"step,piqa/acc\n0,0.5\n{'1e20'},0.6\n"
    out.append(_case("wide-csv-step-1e20", {"wide.csv": wide}, "wide.csv: line 3: column 'step'"))
    for label, value in (("negative", "-1"), ("twenty-nines", "99999999999999999999")):
        out.append(_case(f"option-step-{label}", _v03(), "--step", "--step", value))
    huge = _v03(name="160m_step99999999999999999999.json")
    huge = {k: v.replace("revision=step1000", "") for k, v in huge.items()}
    out.append(_case("lm-eval-step-in-name-past-int64", huge, "column 'step'"))
    out.append(_case("lm-eval-v04-n-samples-negative", _v04("0.5", samples=-3), "column 'n_examples'"))
    for label, step in (("negative", "-5"), ("float", "1e20"), ("huge-int", "99999999999999999999")):
        entry = '{"epoch": 1.0, "eval_accuracy": 0.7, "eval_loss": 0.5, "step": ' + step + "}"
        out.append(_case(f"trainer-state-step-{label}", _trainer(entry), "log_history[0]"))
    return out


# ------------------------------------------------------------------------------------------ damaged files


def _nested_json(depth: int = 100_000) -> str:
    return '{"results": ' + "[" * depth + "]" * depth + "}"


def _structure_cases() -> list[Case]:
    v03 = next(iter(_v03().values()))
    duplicated = v03.replace('"acc_stderr": 0.011', '"acc_stderr": 0.011, "acc": 0.9', 1)
    latin1 = f"{LONG_HEADER}\nm-1m,0,café,acc,0.5\n".encode("latin-1")
    utf16 = f"{LONG_HEADER}\nm-1m,0,piqa,acc,0.5\n".encode("utf-16")
    cases = [
        _case("json-duplicate-key", {"160m_step1000.json": duplicated}, "'acc' appears twice"),
        _case(
            "json-deeply-nested", {"160m_step1000.json": _nested_json()}, "160m_step1000.json: JSON nested too deeply"
        ),
        _case("json-truncated", {"160m_step1000.json": v03[: len(v03) // 2]}, "160m_step1000.json: line 1"),
        _case("json-latin-1", {"160m_step1000.json": v03.replace("piqa", "caf\xe9").encode("latin-1")}, "not UTF-8"),
        _case("json-nul-in-task-name", _v03(task="pi\x00qa"), "control character"),
        _case("json-newline-in-task-name", _v03(task="pi\nqa"), "column 'testset'"),
        _case("json-top-level-list", {"160m_step1000.json": "[1, 2, 3]"}, "160m_step1000.json"),
        _case(
            "csv-duplicate-header",
            {"long.csv": "model,step,testset,metric,value,value\nm-1m,0,piqa,acc,0.5,0.6\n"},
            "long.csv: line 1: column 'value' appears twice",
        ),
        _case("csv-latin-1", {"long.csv": latin1}, "long.csv: line 2: not UTF-8"),
        _case("csv-utf-16", {"long.csv": utf16}, "long.csv: UTF-16"),
        _case("csv-nul-byte", {"long.csv": f"{LONG_HEADER}\nm-1m,0,pi\x00qa,acc,0.5\n"}, "long.csv: line 2: NUL"),
        _case(
            "csv-control-character-in-header", {"wide.csv": "model,step,pi\x01qa/acc\nm-1m,0,0.5\n"}, "wide.csv: line 1"
        ),
        _case(
            "csv-control-character-in-cell",
            {"long.csv": f"{LONG_HEADER}\nm-1m,0,pi\x1bqa,acc,0.5\n"},
            "long.csv: line 2: column 'testset'",
        ),
        _case(
            "csv-ragged-long-row",
            {"long.csv": f"{LONG_HEADER}\nm-1m,0,piqa,acc,0.5\nm-1m,1,piqa,acc,0.6,7\n"},
            "long.csv: malformed CSV: line 3",
        ),
        _case(
            "csv-ragged-short-row", {"long.csv": f"{LONG_HEADER}\nm-1m,0,piqa,acc\n"}, "long.csv: malformed CSV: line 2"
        ),
        _case(
            "tsv-ragged-row",
            {"long.tsv": "model\tstep\ttestset\tmetric\tvalue\nm-1m\t0\tpiqa\tacc\t0.5\t9\n"},
            "long.tsv: malformed CSV: line 2",
        ),
        _case("csv-empty", {"long.csv": ""}, "long.csv: empty file"),
        _case("csv-only-whitespace", {"long.csv": "\n\n  \n"}, "long.csv: empty file"),
        _case("csv-header-only", {"long.csv": f"{LONG_HEADER}\n"}, "long.csv"),
        _case("csv-not-a-number", {"long.csv": f"{LONG_HEADER}\nm-1m,0,piqa,acc,high\n"}, "line 2: column 'value'"),
        _case("csv-unknown-shape", {"odd.csv": "name,score\nm,0.5\n"}, "odd.csv: neither a long table"),
        _case("wide-no-score-columns", {"wide.csv": "step,lr,_runtime\n0,0.1,3\n"}, "wide.csv: no column is a score"),
        _case("runs-without-metric", {"runs.csv": "Run,MNLI,HANS\n1,0.8,0.5\n"}, "runs.csv: no column is a score"),
        _case(
            "runs-with-a-step-forced",
            {"runs.csv": "step,MNLI/acc\n1,0.8\n"},
            "--format runs reads tables without a step column, and {tmp}/runs.csv has one",
            "--format",
            "runs",
        ),
        _case("parquet-garbage", {"scores.parquet": b"PAR1 not really parquet"}, "scores.parquet: not a readable"),
        _case(
            "column-mapping-missing",
            {"long.csv": "model,step,task,metric,value\nm-1m,0,piqa,acc,0.5\n"},
            "--column testset=tsk: {tmp}/long.csv has no column 'tsk'",
            "--column",
            "testset=tsk",
        ),
        _case("run-column-missing", {"runs.csv": "Run,MNLI\n1,0.8\n"}, "no column 'seed'", "--run-column", "seed"),
        _case(
            "column-mapping-in-no-table",
            {"a.csv": "step,piqa/acc\n0,0.5\n", "b.csv": "step,piqa/acc\n0,0.6\n"},
            "--column step=iteration: none of the 2 tables",
            "--column",
            "step=iteration",
        ),
        _case(
            "option-step-on-a-wide-table",
            {"wide.csv": "step,piqa/acc\n0,0.5\n"},
            "--step is for files without a step column",
            "--step",
            "5",
        ),
        _case(
            "option-model-with-newline",
            {"long.csv": f"{LONG_HEADER}\nm-1m,0,piqa,acc,0.5\n"},
            "--model",
            "--model",
            "a\nb",
        ),
        _case("option-metric-empty", {"runs.csv": "Run,MNLI\n1,0.8\n"}, "--metric", "--metric", " "),
        _case("conflict-with-stored", {"long.csv": f"{LONG_HEADER}\nm-1m,0,piqa,acc,0.75\n"}, "long.csv: line 2"),
        _case(
            "conflict-within-files",
            {"a.csv": f"{LONG_HEADER}\nm-2m,0,piqa,acc,0.5\n", "b.csv": f"{LONG_HEADER}\nm-2m,0,piqa,acc,0.6\n"},
            "b.csv: line 2",
        ),
    ]
    for label, pattern in (
        ("no-groups", "eval_.*"),
        ("one-group", "eval_(.+)"),
        ("misnamed", "eval_(?P<set>.+)_(?P<m>acc)"),
    ):
        entry = '{"epoch": 1.0, "eval_accuracy": 0.7, "eval_loss": 0.5, "step": 100}'
        cases.append(_case(f"trainer-state-pattern-{label}", _trainer(entry), "--pattern", "--pattern", pattern,
                           paths=("run-a/trainer_state.json",)))  # fmt: skip
    cases.append(
        _case("wide-pattern-not-a-regex", {"wide.csv": "step,piqa/acc\n0,0.5\n"}, "--pattern", "--pattern", "([")
    )
    return cases


def cases() -> list[Case]:
    """Every ingestion case (see the module docstring)."""
    return [*_non_finite_cases(), *_parquet_cases(), *_range_cases(), *_count_cases(), *_structure_cases()]
