"""Every file of an analysis folder tampered with, through each command that reads it (issue 36, item 6).

``gengen compare`` and ``gengen report`` read ``summary.json``, ``pairs.parquet`` and ``scores.parquet``
(:meth:`Analysis.from_dir`), the report also the comparison's ``compare_*.csv`` and ``comparison.json``
(:meth:`Comparison.from_dir`); ``gengen export --table`` reads ``pairs.csv`` or ``verdict_pairs.csv`` and
``verdict.json``. Each file is truncated, given the wrong columns, given text where a number (or a verdict)
belongs, or replaced by a directory; every case is one ``error:`` line naming the file. Before, a tampered
``pairs.csv`` gave a ``KeyError``/``ValueError`` traceback naming no file, a truncated ``verdict_pairs.csv``
was printed as a table (its cut row as ``n/a``), a damaged ``verdict.json`` was ignored, text in
``pairs.parquet`` was a traceback from ``gengen compare``, and ``summary.json`` settings of the wrong kind a
``TypeError`` from the report.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .case import Case
from .cases_cli import _analysis, _both, _damage

COMPARE = ["compare", "{tmp}/analysis", "--out", "{tmp}/out", "--n-perm", "9"]
REPORT = ["report", "{tmp}/analysis", "--out", "{tmp}/out", "-q"]
TABLE = ["export", "{tmp}/analysis", "{tmp}/table.md", "--table"]


def _verdict(folder: Path) -> None:
    """The verdict files (``verdict.json``, ``verdict_pairs.csv``) beside the analysis, as ``gengen analyse``
    writes them."""
    from gengen.across.verdict import build_verdict
    from gengen.analyse import Analysis

    build_verdict(Analysis.from_dir(folder / "analysis"), n_perm=9).to_dir(folder / "analysis")


def _csv(name: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / "analysis" / name
        change(pd.read_csv(path)).to_csv(path, index=False)

    return setup


def _parquet(name: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / "analysis" / name
        change(pd.read_parquet(path)).to_parquet(path)

    return setup


def _cut_row(name: str) -> Callable[[Path], None]:
    """Cut the CSV ``name`` in the middle of its last row (no line break at the end)."""

    def setup(folder: Path) -> None:
        path = folder / "analysis" / name
        data = path.read_bytes().rstrip(b"\n")
        last = data.rfind(b"\n")
        path.write_bytes(data[: last + 1 + (len(data) - last) // 3])

    return setup


def _pooled(**columns: list[object]) -> Callable[[Path], None]:
    """A ``pooled.parquet`` beside the analysis holding ``columns`` (and the pair's names when asked for)."""

    def setup(folder: Path) -> None:
        names = {} if "a" in columns else {"testset_a": ["ood_a"], "testset_b": ["ood_b"]}
        pd.DataFrame({**names, **columns}).to_parquet(folder / "analysis" / "pooled.parquet")

    return setup


def _settings(key: str, value: object) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        path = folder / "analysis" / "summary.json"
        summary = json.loads(path.read_text(encoding="utf-8"))
        summary["settings"][key] = value
        path.write_text(json.dumps(summary), encoding="utf-8")

    return setup


def _text(column: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        values = frame[column].astype(object)
        values.iloc[0] = "lots"
        return frame.assign(**{column: values.astype(str)})

    return change


def _wrong_columns(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"a": [1, 2], "b": [3, 4]})


def cases() -> list[Case]:
    """Each tampered file of an analysis folder, through each command that reads it."""
    a = "{tmp}/analysis"
    rows: list[tuple[str, list[str], Callable[[Path], None], str]] = [
        # export --table pairs reads pairs.csv
        ("table-pairs-csv-truncated", [*TABLE, "pairs"], _cut_row("pairs.csv"), f"{a}/pairs.csv: "),
        ("table-pairs-csv-wrong-columns", [*TABLE, "pairs"], _csv("pairs.csv", _wrong_columns),
         f"{a}/pairs.csv: missing column(s) model"),
        ("table-pairs-csv-text-n", [*TABLE, "pairs"], _csv("pairs.csv", _text("n")),
         f"{a}/pairs.csv: column 'n' holds 'lots'"),
        ("table-pairs-csv-text-r", [*TABLE, "pairs"], _csv("pairs.csv", _text("r_partial")),
         f"{a}/pairs.csv: column 'r_partial' holds 'lots'"),
        ("table-pairs-csv-latin1", [*TABLE, "pairs"], _damage("analysis/pairs.csv", "latin1"),
         f"{a}/pairs.csv: not UTF-8"),
        ("table-pairs-csv-empty", [*TABLE, "pairs"], _damage("analysis/pairs.csv", "empty"), f"{a}/pairs.csv: empty"),
        ("table-pairs-csv-directory", [*TABLE, "pairs"], _damage("analysis/pairs.csv", "directory"),
         f"{a}/pairs.csv: a directory"),
        # export --table verdict reads verdict_pairs.csv and verdict.json
        ("table-verdict-csv-truncated", [*TABLE, "verdict"], _both(_verdict, _cut_row("verdict_pairs.csv")),
         f"{a}/verdict_pairs.csv: truncated"),
        ("table-verdict-csv-wrong-columns", [*TABLE, "verdict"],
         _both(_verdict, _csv("verdict_pairs.csv", _wrong_columns)), f"{a}/verdict_pairs.csv: missing column(s)"),
        ("table-verdict-csv-text-r", [*TABLE, "verdict"],
         _both(_verdict, _csv("verdict_pairs.csv", _text("r_common"))), f"{a}/verdict_pairs.csv: column 'r_common'"),
        ("table-verdict-csv-unknown-class", [*TABLE, "verdict"],
         _both(_verdict, _csv("verdict_pairs.csv", lambda f: f.assign(verdict="maybe"))),
         f"{a}/verdict_pairs.csv: column 'verdict' holds 'maybe'"),
        ("table-verdict-csv-directory", [*TABLE, "verdict"],
         _both(_verdict, _damage("analysis/verdict_pairs.csv", "directory")), f"{a}/verdict_pairs.csv: a directory"),
        ("table-verdict-json-truncated", [*TABLE, "verdict"],
         _both(_verdict, _damage("analysis/verdict.json", "truncated")), f"{a}/verdict.json: not valid JSON"),
        ("table-verdict-json-latin1", [*TABLE, "verdict"],
         _both(_verdict, _damage("analysis/verdict.json", "latin1")), f"{a}/verdict.json: not UTF-8"),
        ("table-verdict-json-directory", [*TABLE, "verdict"],
         _both(_verdict, _damage("analysis/verdict.json", "directory")), f"{a}/verdict.json: a directory"),
    ]  # fmt: skip
    for command, argv in (("compare", COMPARE), ("report", REPORT)):
        rows += [
            (f"{command}-summary-ood-not-a-list", argv, _settings("ood_resolved", 5),
             f"{a}/summary.json: settings 'ood_resolved' is 5"),
            (f"{command}-summary-id-a-number", argv, _settings("id_testset", 3),
             f"{a}/summary.json: settings 'id_testset' is 3"),
            (f"{command}-summary-directory", argv, _damage("analysis/summary.json", "directory"),
             f"{a}/summary.json: a directory"),
            (f"{command}-pairs-parquet-text-r", argv, _parquet("pairs.parquet", _text("r_partial")),
             f"{a}/pairs.parquet: column 'r_partial' holds 'lots'"),
            (f"{command}-pairs-parquet-wrong-columns", argv, _parquet("pairs.parquet", _wrong_columns),
             f"{a}/pairs.parquet: missing column(s) level"),
            (f"{command}-scores-parquet-wrong-columns", argv, _parquet("scores.parquet", _wrong_columns),
             f"{a}/scores.parquet: missing column(s) model"),
            (f"{command}-scores-parquet-directory", argv, _damage("analysis/scores.parquet", "directory"),
             f"{a}/scores.parquet: a directory"),
            (f"{command}-pooled-parquet-text", argv, _pooled(r_random=["lots"]),
             f"{a}/pooled.parquet: column 'r_random' holds 'lots'"),
            (f"{command}-pooled-parquet-wrong-columns", argv, _pooled(a=[1]), f"{a}/pooled.parquet: missing column(s)"),
            (f"{command}-pooled-parquet-directory", argv, lambda f: (f / "analysis" / "pooled.parquet").mkdir(),
             f"{a}/pooled.parquet: a directory"),
        ]  # fmt: skip
    rows += [
        ("report-compare-long-truncated", REPORT, _cut_row("compare_long.csv"), f"{a}/compare_long.csv: truncated"),
        ("report-compare-long-wrong-columns", REPORT, _csv("compare_long.csv", _wrong_columns),
         f"{a}/compare_long.csv: missing column(s) group"),
        ("report-compare-long-directory", REPORT, _damage("analysis/compare_long.csv", "directory"),
         f"{a}/compare_long.csv: a directory"),
        ("report-compare-agreement-truncated", REPORT, _cut_row("compare_agreement.csv"),
         f"{a}/compare_agreement.csv: truncated"),
        ("report-compare-agreement-text", REPORT, _csv("compare_agreement.csv", _text("mantel_r")),
         f"{a}/compare_agreement.csv: column 'mantel_r' holds 'lots'"),
        ("report-compare-heterogeneity-wrong-columns", REPORT, _csv("compare_heterogeneity.csv", _wrong_columns),
         f"{a}/compare_heterogeneity.csv: missing column(s) across"),
        ("report-comparison-json-a-list", REPORT,
         lambda f: (f / "analysis" / "comparison.json").write_text("[1, 2]\n", encoding="utf-8"),
         f"{a}/comparison.json: not an object"),
    ]  # fmt: skip
    return [
        Case(f"folder-{label}", argv, culprit, setup=_both(_analysis, damage)) for label, argv, damage, culprit in rows
    ]
