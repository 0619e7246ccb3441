"""Bad inputs of issues 26 and 27 for ``gengen ingest`` and the store: options named in the CLI's terms from
structured errors, huge values not echoed whole, stores of a newer schema refused, namespaced W&B metrics that
collide, one study of several.

``test_corpus.py`` runs each: exit status 2, one ``error:`` line naming the culprit, no traceback, and the
store in the case folder (one score, written by ``setup``) unchanged.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from .case import Case

STORE = "{tmp}/study"
LONG = "model,step,testset,metric,value\nm-1m,0,piqa,acc,0.5\n"
HUGE = "x" * 5_000_000


def _store(folder: Path) -> None:
    """A store holding one score, so that "unchanged" is checked against something."""
    from gengen.store.database import Store

    Store(folder / "study").write_scores(
        [{"model": "m-1m", "step": 0, "testset": "piqa", "metric": "acc", "value": 0.5}]
    )


def _two_studies(folder: Path) -> None:
    from gengen.store.database import Store

    for study in ("a", "b"):
        Store(folder / "study").write_scores(
            [{"study": study, "model": "m-1m", "step": 0, "testset": "piqa", "metric": "acc", "value": 0.5}]
        )


def _newer_store(folder: Path) -> None:
    """A store whose schema version is beyond this gengen's."""
    _store(folder)
    with sqlite3.connect(folder / "study" / "gengen.sqlite") as conn:
        conn.execute("PRAGMA user_version = 9")


def _parquet(frame: dict[str, list[object]]) -> bytes:
    import pandas as pd

    buffer = io.BytesIO()
    pd.DataFrame(frame).to_parquet(buffer)
    return buffer.getvalue()


def _huge_parquet() -> dict[str, bytes | str]:
    return {"long.parquet": _parquet({"model": ["m-1m"], "step": [0], "testset": ["piqa"], "metric": ["acc"],
                                      "value": [HUGE]})}  # fmt: skip


def _huge_json() -> dict[str, bytes | str]:
    data = {"results": {"piqa": {"acc": HUGE}}, "config": {"model_args": "pretrained=EleutherAI/pythia-160m"}}
    return {"160m_step1000.json": json.dumps(data)}


def _ingest(
    name: str, files: dict[str, bytes | str], culprit: str, *extra: str, setup: Callable[[Path], None] = _store
) -> Case:
    paths = [f"{{tmp}}/{path}" for path in files]
    return Case(f"store-ingest-{name}", ["ingest", *paths, "--store", STORE, "-q", *extra], culprit, files, setup)


def cases() -> list[Case]:
    """The cases (see the module docstring)."""
    return [
        _ingest("format-unknown", {"long.csv": LONG}, "--format must be one of lm-eval", "--format", "xml"),
        _ingest(
            "column-not-a-score-column",
            {"long.csv": LONG},
            "--column 'tsk' is not a score-table column",
            "--column",
            "tsk=testset",
        ),
        _ingest(
            "size-control-character", {"long.csv": LONG}, "--size '7\\nB' holds a control character", "--size", "7\nB"
        ),
        _ingest(
            "run-column-disagrees",
            {"runs.csv": "Run,MNLI\n1,0.8\n"},
            "--run-column 'Run' disagrees with the run column of columns ('seed')",
            "--run-column",
            "Run",
            "--column",
            "run=seed",
        ),
        _ingest(
            "pattern-without-groups",
            {"wide.csv": "step,piqa/acc\n0,0.5\n"},
            "--pattern 'piqa' needs groups",
            "--pattern",
            "piqa",
        ),
        _ingest(
            "step-pattern-no-match",
            {
                "160m_step1000.json": json.dumps(
                    {"results": {"piqa": {"acc": 0.5}}, "config": {"model_args": "pretrained=m"}}
                )
            },
            "--step-pattern 'ckpt-(\\\\d+)' does not match the path",
            "--step-pattern",
            "ckpt-(\\d+)",
        ),
        # Issue 26: a huge string score is quoted cut short, not whole (the 1 GiB case took 5.3 GB).
        _ingest("huge-string-value-parquet", _huge_parquet(), "'xxxxxxxx"),
        _ingest("huge-string-value-json", _huge_json(), "(5000000 characters)"),
        _ingest(
            "huge-column-name",
            {"wide.csv": f"step,piqa/acc,{'y' * 100_000}\n0,0.5,oops\n"},
            "(100000 characters)",
            "--metric",
            "acc",
        ),
        # Two columns that name one (test set, metric) under a plain and a qualified namespace, with different
        # values: a conflict naming both, not one value silently kept.
        _ingest(
            "namespaced-metrics-collide",
            {"OLMo-1B.csv": "_step,eval/downstream/arc_bpb,eval/downstream_bpb/arc_bpb\n1000,1.2,1.3\n"},
            "column 'eval/downstream_bpb/arc_bpb'",
        ),
        _ingest(
            "store-of-a-newer-gengen", {"long.csv": LONG}, "version 9 is newer than this gengen's", setup=_newer_store
        ),
        Case("store-export-newer-gengen", ["export", STORE, "{tmp}/out.csv"], "version 9 is newer", {}, _newer_store),
        Case(
            "store-export-unknown-study",
            ["export", STORE, "{tmp}/out.csv", "--study", "c"],
            "--study 'c' is not in the store; studies: a, b",
            {},
            _two_studies,
        ),
    ]
