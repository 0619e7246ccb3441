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
from typing import Any

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from gengen.across.compare import compare
from gengen.across.verdict import build_verdict
from gengen.analyse import Analysis, analyse
from gengen.calibration.simulate import simulate_trajectories
from gengen.report import report
from gengen.report.figures import why_not_significant
from gengen.report.page import answer_of, levels_text


def two_models_two_runs_scores(*, seeded: bool) -> pd.DataFrame:
    """Two models x two runs of simulated trajectories; ``seeded``: runs labelled ``seed=k`` with a seed column,
    replicates of one condition, which the verdict pools (issue 33); else runs ``s1``, ``s2`` that nothing tells
    apart as replicates, each a condition of its own."""
    frames = []
    for seed, (model, k) in enumerate((("m-70m", 1), ("m-70m", 2), ("m-1b", 1), ("m-1b", 2))):
        frame = simulate_trajectories(n=30, n_testsets=4, phi=0.3, shared=0.5, seed=seed + 1, model=model)
        frames.append(frame.assign(run=f"seed={k}", seed=k) if seeded else frame.assign(run=f"s{k}"))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def two_models_two_runs() -> Analysis:
    return analyse(two_models_two_runs_scores(seeded=True), id_testset="id", metric="accuracy", n_boot=199)


def test_the_verdict_box_opens_with_the_answer_and_no_empty_band(two_models_two_runs: Analysis, tmp_path: Path) -> None:
    comparison = compare(two_models_two_runs, n_perm=99)
    verdict = build_verdict(two_models_two_runs, n_perm=99)
    page = report(two_models_two_runs, comparison, tmp_path, verdict=verdict).read_text(encoding="utf-8")
    box = page[page.index('id="verdict"') : page.index("</section>", page.index('id="verdict"'))]
    first = re.search(r'<p class="verdict-answer">(.*?)</p>', box, re.S)
    assert first is not None and box.index("verdict-answer") < box.index("verdict-counts")
    assert html.unescape(first.group(1)) == answer_of(verdict)
    # Without Verdict.answer, its first sentence opens the box and the rest follows: the paragraph is all there.
    if not getattr(verdict, "answer", None):
        rest = re.search(r'<p class="verdict-text">(.*?)</p>', box, re.S)
        assert rest is not None and html.unescape(first.group(1) + " " + rest.group(1)) == verdict.text
    assert ".verdict h2 { margin-top: 0.3em; }" in page  # the heading's 2em margin made a band in the box
    # The verdict compares 2 models (runs pooled), the across-groups section 4 groups: the page says why.
    note = levels_text(len(comparison.groups), verdict)
    assert "4 groups" in note and "2 models" in note and note in html.unescape(page)
    sign = verdict.agreement["sign_agreement"]["median"]
    assert f"median sign agreement {sign:.0%}" in note


def test_runs_kept_apart_give_one_level_of_agreement_and_no_note() -> None:
    """Without a seed, runs are conditions of their own: the verdict compares the same four groups as "Across
    groups", with the same figures, and no line about two levels is printed."""
    scores = two_models_two_runs_scores(seeded=False)
    unpooled = analyse(scores, id_testset="id", metric="accuracy", n_boot=199, progress=False)
    comparison = compare(unpooled, n_perm=99)
    verdict = build_verdict(unpooled, n_perm=99)
    assert len(verdict.groups) == len(comparison.groups) == 4 and levels_text(4, verdict) == ""
    agreement = comparison.agreement
    assert verdict.agreement["n_comparisons"] == len(agreement)
    assert verdict.agreement["mantel_r"]["median"] == pytest.approx(agreement["mantel_r"].median(), abs=1e-12)
    assert verdict.agreement["sign_agreement"]["median"] == pytest.approx(agreement["sign_agreement"].median())


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

    figure = residual_scatter(two_models_two_runs, "m-70m", "seed=1")
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


def test_paper_tables_latex_and_markdown(two_models_two_runs: Analysis, tmp_path: Path) -> None:
    from gengen.cli import export as export_cli
    from gengen.report.paper_tables import latex_escape, markdown_escape

    assert latex_escape("a_b&c%$#{}~^\\") == r"a\_b\&c\%\$\#\{\}\textasciitilde{}\textasciicircum{}\textbackslash{}"
    assert markdown_escape("a|b_c*d`e") == r"a\|b\_c\*d\`e"
    folder = tmp_path / "a"
    two_models_two_runs.to_dir(folder)
    build_verdict(two_models_two_runs, n_perm=99).to_dir(folder)
    app = typer.Typer()
    export_cli.register(app)
    app.command("noop")(lambda: None)
    latex = CliRunner().invoke(app, ["export", str(folder), "-", "--table", "pairs", "--format", "latex", "--top", "3"])
    assert latex.exit_code == 0, latex.output
    text = latex.stdout
    assert text.count("\\toprule") == 1 and text.count("\\midrule") == 1 and text.count("\\bottomrule") == 1
    assert text.index("\\begin{tabular}{lllrrrr}") < text.index("\\end{tabular}")
    body = text[text.index("\\midrule") : text.index("\\bottomrule")].strip().splitlines()[1:]
    assert len(body) == 3 and all(line.endswith(" \\\\") and line.count(" & ") == 6 for line in body)
    rows = two_models_two_runs.pairs
    strongest = rows.loc[rows["r_partial"].abs().idxmax()]
    r, low, high = (f"{strongest[c]:.2f}".replace("-", "$-$") for c in ("r_partial", "ci_low", "ci_high"))
    assert f"{r} [{low}, {high}]" in body[0]  # r with its interval, the strongest first
    assert "p (holm)" in text and "ood\\_" in text  # the adjustment named; names escaped
    markdown = CliRunner().invoke(app, ["export", str(folder), str(tmp_path / "v.md"), "--table", "verdict"])
    assert markdown.exit_code == 0, markdown.output
    lines = (tmp_path / "v.md").read_text().splitlines()
    n_pairs = 6  # 4 OOD test sets
    assert lines[1].startswith("| --- |") and len([line for line in lines if line.startswith("| ")]) == 2 + n_pairs
    assert "p\\_Q (holm)" in lines[0] and "(1 df)" in lines[2]
    wrong = CliRunner().invoke(app, ["export", str(folder), str(tmp_path / "x.txt"), "--table", "pairs"])
    assert wrong.exit_code == 2 and "--format: name latex or markdown" in wrong.output
    missing = CliRunner().invoke(app, ["export", str(tmp_path), "-", "--table", "verdict", "--format", "markdown"])
    assert missing.exit_code == 2 and "verdict_pairs.csv: missing" in missing.output


def test_an_across_run_analysis_answers_across_runs_significant_pairs_first(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rows = []
    for model in ("m-70m", "m-1b"):
        for run in range(20):
            id_score, shared = rng.uniform(0.3, 0.9), rng.normal(0, 0.05)
            rows.append((model, f"seed={run}", 100, "id", "acc", id_score))
            for name in ("a", "b", "c"):
                planted = shared if name in ("a", "b") else 0.0  # a and b co-vary beyond ID; c does not
                rows.append((model, f"seed={run}", 100, name, "acc", 0.5 * id_score + planted + rng.normal(0, 0.01)))
    scores = pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])
    result = analyse(scores, id_testset="id", inference="permutation", n_perm=999)
    page = html.unescape(report(result, None, tmp_path).read_text(encoding="utf-8"))
    box = page[page.index('id="verdict"') : page.index("</section>", page.index('id="verdict"'))]
    pairs = result.pairs
    n_significant = int(pairs["significant"].sum())
    assert n_significant >= 2  # a / b in both models
    assert f"{n_significant} of {len(pairs)} pairs of OOD test sets co-vary" in box
    assert "20 runs in each of 2 cells" in box and "nothing to state" not in box
    items = re.findall(r"<li>(.*?)</li>", box)
    assert all("not significant" not in item for item in items[:n_significant])
    assert all(item.startswith("a / b") for item in items[:2]) and "[" not in items[0]  # no interval: none shown
    summary = page[page.index('id="summary"') :]
    assert "<th>n_runs</th>" in summary[: summary.index("</table>")]


def test_run_dry_run_ends_with_the_totals_of_the_plan() -> None:
    from gengen.cli import run as run_cli
    from gengen.study.config import load_config
    from gengen.study.plan import format_plan, plan_study

    path = Path(__file__).parents[1] / "studies" / "paper-mnli-fewshot.toml"
    app = typer.Typer()
    run_cli.register(app)
    result = CliRunner().invoke(app, ["run", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    study = load_config(path)
    assert lines[0].startswith(f"study {study.name}: {len(study.select_runs(None))} runs through the local executor")
    total = re.fullmatch(r"total: (\d+) runs, ([\d,]+) steps, ([\d,]+) evaluations, ~([\d,.]+) GPU-hours .*", lines[-2])
    assert total is not None, lines[-2]
    plan = format_plan(plan_study(study, gpus=1, gpu_memory_gib=80.0), 1, 80.0).splitlines()[-1]
    runs, hours = re.search(r": (\d+) runs, ([\d,.]+) GPU-hours", plan).groups()  # type: ignore[union-attr]
    assert total.group(1) == runs and total.group(4) == hours  # the same totals as gengen plan's
    per_model = [re.search(r": (\d+) runs x (\d+) steps, (\d+) evaluations", line) for line in lines[1:-2]]
    assert sum(int(m.group(1)) * int(m.group(2)) for m in per_model if m) == int(total.group(2).replace(",", ""))
    assert sum(int(m.group(1)) * int(m.group(3)) for m in per_model if m) == int(total.group(3).replace(",", ""))
    assert lines[-1] == f"next: gengen run {path}"
    note = next(line.strip() for line in lines if "evaluation.log_points = 40" in line)
    assert note == short_run_note(), note
    # gengen plan prints the same note under its table, then the command that runs the study.
    from gengen.cli import app as cli_app

    planned = CliRunner().invoke(cli_app, ["plan", str(path)])
    assert planned.exit_code == 0, planned.output
    plan_lines = planned.output.strip().splitlines()
    assert note in plan_lines and re.search(r"\bevals\b", plan_lines[1])
    evals = {int(line.split()[-2]) for line in plan_lines[2:] if line.startswith("olmo2-7b") and " 16 shots " in line}
    assert evals == {int(note.rsplit(": ", 1)[1].split()[0])}  # the table's evals column is the note's count
    assert plan_lines[-1].startswith(f"next: gengen run {path} --executor local   (add --dry-run")


def short_run_note() -> str:
    """The note on paper-mnli-fewshot's shortest run (16 shots: 40 steps), counted here with numpy alone."""
    # 40 log-spaced steps over a 40-step run, rounded: numpy counts the distinct ones and the repeated ones.
    rounded = [round(float(p)) for p in np.geomspace(1, 40, 40)]
    distinct = sorted(set(rounded))
    repeated = [step for step in distinct if rounded.count(step) > 1]
    return (
        "note: olmo2-7b (16 shots): evaluation.log_points = 40 asks for 40 log-spaced steps plus step 0, but in "
        f"a run of 40 steps {40 - len(distinct)} of them round to a step already taken (all at or below step "
        f"{max(repeated)}), each scored once: {len(set(distinct) | {0})} evaluations"
    )


@pytest.mark.parametrize("step_column", ["empty", "absent"])
def test_a_long_table_of_final_scores_has_one_path_and_each_wrong_try_says_so(tmp_path: Path, step_column: str) -> None:
    from gengen.cli import ingest as ingest_cli
    from gengen.store.database import load

    header = "model,run,step,testset,metric,value" if step_column == "empty" else "model,run,testset,metric,value"
    cells = ",," if step_column == "empty" else ","
    path = tmp_path / "final.csv"
    path.write_text(
        header + "\n" + "\n".join(f"m-1b,s1{cells}{name},acc,{value}" for name, value in (("arc", 0.5), ("piqa", 0.6)))
    )
    app = typer.Typer()
    ingest_cli.register(app)
    app.command("noop")(lambda: None)

    def ingest(*options: str, store: str) -> Any:
        return CliRunner().invoke(app, ["ingest", str(path), "--store", str(tmp_path / store), *options])

    missing = ingest(store="a")
    assert missing.exit_code == 2 and len(missing.output.strip().splitlines()) == 1
    assert f"--step is needed: {path} is a long table whose step column is " in missing.output
    assert ("empty in every row" if step_column == "empty" else "absent") in missing.output
    assert "--step 0" in missing.output
    runs = ingest("--format", "runs", store="b")
    assert runs.exit_code == 2 and "is a long table (testset and value columns)" in runs.output
    assert "read it as long, with --step N" in runs.output and "wide" not in runs.output
    done = ingest("--step", "0", store="c")
    assert done.exit_code == 0, done.output
    stored = load(tmp_path / "c")
    assert sorted(zip(stored["testset"], stored["step"], stored["value"], strict=True)) == [
        ("arc", 0, 0.5),
        ("piqa", 0, 0.6),
    ]


def test_the_docs_claims_that_can_be_checked() -> None:
    root = Path(__file__).parents[1]
    analysis = (root / "docs" / "analysis.md").read_text(encoding="utf-8")
    assert "no scripts" not in analysis and "one inline script" in analysis
    page = (root / "python" / "gengen" / "report" / "template.py").read_text(encoding="utf-8")
    assert page.count("<script>") == 1  # the one inline script the docs name
    store = (root / "docs" / "store.md").read_text(encoding="utf-8")
    assert "share one line; `-q` prints none" in store  # checked by test_ingest_quiet_prints_no_read_lines_...
    for study in sorted((root / "studies").glob("*.toml")):  # each paper study shows where its runs could go
        text = study.read_text(encoding="utf-8")
        assert "\n# [executor]\n# kind = " in text and "--dry-run" in text, study.name


def test_warnings_list_models_in_size_order() -> None:
    from gengen.report.build import warnings_by_model

    given = ["model 'p-12b' run 'main': x", "control: y", "model 'p-2.8b' run 'main': z", "model 'p-70m' run 'a': w"]
    assert warnings_by_model(given) == [given[1], given[3], given[2], given[0]]


def test_report_pair_draws_its_trajectories_and_rows_in_every_model_and_run(
    two_models_two_runs: Analysis, tmp_path: Path
) -> None:
    from gengen.report.pair import pair_trajectories

    figure = pair_trajectories(two_models_two_runs, "ood_1", "ood_2")
    panels = [ax for ax in figure.axes if ax.lines]
    assert [ax.get_title() for ax in panels] == ["m-70m (2 runs)", "m-1b (2 runs)"]  # model-size order
    scores = two_models_two_runs.scores
    for ax, model in zip(panels, ("m-70m", "m-1b"), strict=True):
        assert len(ax.lines) == 3 * 2  # A, B and ID for each run
        plotted = sorted(np.round(np.concatenate([line.get_ydata() for line in ax.lines]), 12).tolist())
        rows = scores[(scores["model"] == model) & scores["testset"].isin(["ood_1", "ood_2", "id"])]
        assert plotted == sorted(np.round(rows["value"].to_numpy(dtype=float), 12).tolist())
    page = html.unescape(
        report(two_models_two_runs, None, tmp_path, scatter_pairs=[("ood_2", "ood_1")]).read_text(encoding="utf-8")
    )
    section = page[page.index("<h2>Pair ood_2 / ood_1</h2>") : page.index("</section>", page.index("<h2>Pair ood_2"))]
    assert section.index("pairs.csv: every group") < section.index("verdict_pairs.csv: across models")
    pairs = two_models_two_runs.pairs
    chosen = pairs[(pairs["testset_a"] == "ood_1") & (pairs["testset_b"] == "ood_2")]
    assert len(chosen) == 4
    for r in chosen["r_partial"]:
        assert f'<td class="num">{r:.3f}</td>' in section  # each group's row, as the static tables print r
