"""The first screen and the terminal open with the answer (issue 35): the verdict box, the header's deciding p,
the two levels of agreement, the residual panels' hint, and the commands' first lines (compare, analyse, ingest -q).

References: the verdict's own tables (counts, agreement summary) and hand-written expectations.
"""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from gengen.analyse import Analysis, analyse
from gengen.compare import compare
from gengen.report import report
from gengen.report.figures import why_not_significant
from gengen.report.page import answer_of, levels_text
from gengen.simulate import simulate_trajectories
from gengen.verdict import build_verdict


@pytest.fixture(scope="module")
def two_models_two_runs() -> Analysis:
    frames = []
    for seed, (model, run) in enumerate((("m-70m", "s1"), ("m-70m", "s2"), ("m-1b", "s1"), ("m-1b", "s2"))):
        frame = simulate_trajectories(n=30, n_testsets=4, phi=0.3, shared=0.5, seed=seed + 1, model=model)
        frames.append(frame.assign(run=run))
    return analyse(pd.concat(frames, ignore_index=True), id_testset="id", metric="accuracy", n_boot=199)


def test_the_verdict_box_opens_with_the_answer_and_no_empty_band(two_models_two_runs: Analysis, tmp_path: Path) -> None:
    comparison = compare(two_models_two_runs, n_perm=99)
    verdict = build_verdict(two_models_two_runs, n_perm=99)
    page = report(two_models_two_runs, comparison, tmp_path, verdict=verdict).read_text(encoding="utf-8")
    box = page[page.index('id="verdict"') : page.index("</section>", page.index('id="verdict"'))]
    first = re.search(r'<p class="verdict-answer">(.*?)</p>', box, re.S)
    assert first is not None and box.index("verdict-answer") < box.index("verdict-counts")
    expected = getattr(verdict, "answer", None) or verdict.text
    assert html.unescape(first.group(1)) == expected
    assert ".verdict h2 { margin-top: 0.3em; }" in page  # the heading's 2em margin made a band in the box
    # The verdict compares 2 models (runs pooled), the across-groups section 4 groups: the page says why.
    note = levels_text(len(comparison.groups), verdict)
    assert "4 groups" in note and "2 models" in note and note in html.unescape(page)
    sign = verdict.agreement["sign_agreement"]["median"]
    assert f"median sign agreement {sign:.0%}" in note


def test_the_header_names_the_deciding_p_and_why_it_is_not_the_requested_one(
    two_models_two_runs: Analysis, tmp_path: Path
) -> None:
    page = report(two_models_two_runs, compare(two_models_two_runs, n_perm=99), tmp_path).read_text(encoding="utf-8")
    header = page[page.index('<p class="note">Generated') : page.index('id="verdict"')]
    deciding = set(two_models_two_runs.pairs["p_adjusted_from"].str.split(" ").str[0])
    assert deciding == {"p_loo_max"}  # the default: the requested p, robust to deleting one checkpoint
    assert "significance from p_loo_max (primary_p p_sieve as requested, taken at its largest" in header


def test_levels_text_is_empty_when_both_compare_models() -> None:
    class Stub:
        def __init__(self) -> None:
            self.groups = ["a", "b"]
            self.agreement = {"n_comparisons": 1, "sign_agreement": {"median": 0.5}, "mantel_r": {"median": 0.1}}

    assert levels_text(2, Stub()) == ""  # type: ignore[arg-type]


def test_answer_falls_back_to_the_first_sentence_of_the_text() -> None:
    class Old:
        text = "Across 2 models, 1 of 3 pairs is consistent. Two models agree on 60% of pairs."

    assert answer_of(Old()) == "Across 2 models, 1 of 3 pairs is consistent."  # type: ignore[arg-type]
    assert answer_of(Old(), whole=True) == Old.text  # type: ignore[arg-type]

    class New(Old):
        answer = "Across 2 models, none of 3 pairs depends on the model."

    assert answer_of(New()) == New.answer  # type: ignore[arg-type]


def test_a_large_r_that_is_not_significant_says_what_stands_in_the_way() -> None:
    row = pd.DataFrame({"n": [12], "df_sieve": [3.4], "influence": [0.8], "influential_step": [4096.0]})
    assert why_not_significant(row, 12) == "n = 12, df = 3.4, deleting step 4.1k removes 80% of r"
    quiet = row.assign(influence=[0.2])
    assert why_not_significant(quiet, 12) == "n = 12, df = 3.4"


def test_analyse_prints_progress_lines_on_a_non_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from gengen.analyse import core

    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    monkeypatch.setattr(core, "PROGRESS_EVERY", 0.0)
    assert list(core._progress(range(3), 3, enabled=True, description="analysing groups")) == [0, 1, 2]
    assert stream.getvalue().splitlines() == [f"analyse: [{k}/3] analysing groups" for k in (1, 2, 3)]
    monkeypatch.setattr(core, "PROGRESS_EVERY", 3600.0)
    stream.truncate(0)
    stream.seek(0)
    list(core._progress(range(3), 3, enabled=True, description="x"))
    assert stream.getvalue().splitlines() == ["analyse: [3/3] x"]  # the last always, the others when due


def test_compare_prints_its_answer_first(two_models_two_runs: Analysis, tmp_path: Path) -> None:
    from gengen.cli import compare as compare_cli

    two_models_two_runs.to_dir(tmp_path / "a")
    app = typer.Typer()
    compare_cli.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), "--n-perm", "49"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    verdict = json.loads((tmp_path / "a" / "verdict.json").read_text())
    answer = verdict.get("answer") or verdict["text"].split(". ")[0].rstrip(".") + "."
    assert lines[0] == f"answer: {answer}"
    assert " vs " in lines[1] and "Mantel r" in lines[1]  # then the run-vs-run table


def test_ingest_quiet_prints_no_read_lines_and_groups_a_folder(tmp_path: Path) -> None:
    from gengen.cli import ingest as ingest_cli
    from gengen.ingest import ingest

    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "a-1b.csv").write_text("step,piqa/acc,arc_easy/acc\n0,0.5,0.4\n1,0.6,0.5\n")
    (folder / "b-1b.csv").write_text("step,arc_easy/acc,piqa/acc\n0,0.4,0.5\n1,0.5,0.6\n")  # same names, reordered
    other = tmp_path / "other"
    other.mkdir()
    (other / "c-1b.csv").write_text("step,piqa/acc,arc_easy/acc\n0,0.5,0.4\n1,0.6,0.5\n")
    took = ingest([folder, other], tmp_path / "store").took()
    assert len(took) == 2 and "(2 files)" in took[0] and str(other / "c-1b.csv") in took[1]
    app = typer.Typer()
    ingest_cli.register(app)
    app.command("noop")(lambda: None)
    loud = CliRunner().invoke(app, ["ingest", str(folder), "--store", str(tmp_path / "s2")])
    quiet = CliRunner().invoke(app, ["ingest", str(folder), "--store", str(tmp_path / "s3"), "-q"])
    assert loud.exit_code == 0 and quiet.exit_code == 0, quiet.output
    assert "read: " in loud.stderr and "read: " not in quiet.stderr
    assert quiet.stdout == loud.stdout.replace("s2", "s3")  # the summary line still prints


def test_residual_panel_titles_carry_the_hint(two_models_two_runs: Analysis) -> None:
    from gengen.report.figures import residual_scatter

    figure = residual_scatter(two_models_two_runs, "m-70m", "s1")
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    assert titles and all(re.search(r"\nn = 30, df = [0-9.]+", title) for title in titles)
    rows = two_models_two_runs.pairs
    assert np.all(rows["n"] == 30)


def _partial_r(frame: pd.DataFrame) -> float:
    """Partial correlation of x and y given z from the residuals of two least-squares fits (numpy only)."""
    design = np.column_stack([np.ones(len(frame)), frame["z"]])
    residual = {c: frame[c] - design @ np.linalg.lstsq(design, frame[c], rcond=None)[0] for c in ("x", "y")}
    return float(np.corrcoef(residual["x"], residual["y"])[0, 1])


def test_partial_corr_refuses_several_models_and_takes_one_with_model(tmp_path: Path) -> None:
    from gengen.cli import stats as stats_cli

    rng = np.random.default_rng(0)
    frames = []
    for model, rho in (("a-1b", -0.8), ("b-1b", 0.4)):
        z = rng.normal(size=40)
        x = z + rng.normal(size=40)
        frames.append(pd.DataFrame({"model": model, "x": x, "y": rho * x + 0.6 * rng.normal(size=40) + z, "z": z}))
    table = pd.concat(frames, ignore_index=True)
    path = tmp_path / "two.csv"
    table.to_csv(path, index=False)
    app = typer.Typer()
    stats_cli.register(app)
    app.command("noop")(lambda: None)
    refused = CliRunner().invoke(app, ["partial-corr", str(path), "--x", "x", "--y", "y", "--covar", "z"])
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1
    for model, rows in table.groupby("model"):
        assert f"{model}: r = {_partial_r(rows):+.3f}, n = 40" in refused.output  # 3 decimals, as printed
    one = CliRunner().invoke(
        app, ["partial-corr", str(path), "--x", "x", "--y", "y", "--covar", "z", "--model", "b-1b"]
    )
    assert one.exit_code == 0, one.output
    r = float(re.search(r"r = (\S+)", one.output).group(1))  # type: ignore[union-attr]
    assert r == pytest.approx(_partial_r(table[table["model"] == "b-1b"]), abs=1e-6)
    missing = CliRunner().invoke(app, ["partial-corr", str(path), "--x", "x", "--y", "y", "--model", "c"])
    assert missing.exit_code == 2 and "--model 'c' is not in its model column (models: a-1b, b-1b)" in missing.output
