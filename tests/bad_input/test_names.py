"""Names a user gives (models, runs) never make two outputs share one file (issue 26, item 4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gengen.report.build import _figure_stem


def test_figure_stems_are_unique_per_model_and_run() -> None:
    names = [("a b", "main"), ("a_b", "main"), ("a/b", "main"), ("a", "b_main"), ("a_b", "main ")]
    stems = [_figure_stem(model, run) for model, run in names]
    assert len(set(stems)) == len(stems), stems
    assert all(stem.startswith("a_b") or stem.startswith("a_b_main") for stem in stems)
    long = _figure_stem("m" * 300, "seed=1")
    assert len(long) <= 71 and long.startswith("m" * 60 + "-")  # a valid file name, still unique by its digest
    assert _figure_stem("m" * 300, "seed=1") != _figure_stem("m" * 299 + "n", "seed=1")


def test_report_draws_one_figure_per_model_whose_names_slug_alike(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from gengen.analyse import analyse
    from gengen.report import report

    rng = np.random.default_rng(26)
    rows = []
    for model in ("a b", "a_b", "a/b"):
        level = np.linspace(0.3, 0.8, 12)
        for step, value in enumerate(level):
            for testset in ("id", "x", "y", "z"):
                rows.append(
                    {"model": model, "run": "main", "step": 10 * step, "testset": testset, "metric": "acc",
                     "value": float(np.clip(value + rng.normal(0, 0.03), 0, 1))}
                )  # fmt: skip
    analysis = analyse(pd.DataFrame(rows), id_testset="id", inference="t-test", progress=False)
    report(analysis, out_dir=tmp_path / "report", progress=False)
    residuals = sorted(p.name for p in (tmp_path / "report" / "figures").glob("residuals_*.png"))
    assert len(residuals) == 3, residuals
