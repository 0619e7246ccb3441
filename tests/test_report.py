"""gengen.report: a self-contained HTML file that a browser renders without console errors.

The browser check needs Debian's chromium (``apt-get install -y --no-install-recommends chromium``); it is
skipped, saying so, where no chromium is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from PIL import Image
from typer.testing import CliRunner

from gengen.across.compare import compare
from gengen.analyse import Analysis, analyse
from gengen.errors import GengenError
from gengen.report import (
    plot_agreement,
    plot_heatmaps,
    plot_raw_vs_partial,
    plot_residuals,
    plot_trajectories,
    report,
)


def load_pythia(root: Path) -> pd.DataFrame:
    """The Pythia lm-eval JSON files as a score table (acc only; parsed here, not by gengen.ingest)."""
    rows = []
    for file in sorted(root.glob("*/*.json")):
        step = int(re.search(r"step(\d+)", file.name).group(1))
        for task, metrics in json.loads(file.read_text())["results"].items():
            if "acc" in metrics:
                rows.append(
                    {
                        "model": file.parent.name,
                        "run": "main",
                        "step": step,
                        "testset": task,
                        "metric": "acc",
                        "value": float(metrics["acc"]),
                    }
                )
    return pd.DataFrame(rows)


OOD = ["arc_easy", "arc_challenge", "piqa", "sciq", "winogrande", "logiqa"]
EVIL = 'pythia-160m<script>alert("x")</script>&'


@pytest.fixture(scope="module")
def analysis(shared_dir: Path) -> Analysis:
    scores = load_pythia(shared_dir / "data/pythia-lm-eval-v0.3")
    scores.loc[scores["model"] == "pythia-160m", "model"] = EVIL
    return analyse(scores, id_testset="lambada_openai", ood=OOD, n_perm=199, n_boot=199)


@pytest.fixture(scope="module")
def written(analysis: Analysis, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    analysis.to_dir(folder)
    return report(analysis, compare(analysis, n_perm=99), folder)


def test_report_is_self_contained_and_escaped(written: Path) -> None:
    html = written.read_text(encoding="utf-8")
    # Two scripts of its own (the JSON data and the inline code), none from elsewhere, no injected one.
    assert re.findall(r"<script[^>]*>", html) == ['<script type="application/json" id="gengen-data">', "<script>"]
    assert EVIL not in html and "alert(" not in html.replace("&lt;script&gt;alert(", "").replace(
        "\\u003cscript\\u003ealert(", ""
    )
    assert "&lt;script&gt;alert(" in html  # escaped by jinja2 in the page
    assert "\\u003cscript\\u003ealert(" in html  # escaped in the JSON the script reads
    sources = re.findall(r'src="([^"]*)"', html)
    assert sources and all(source.startswith("data:image/png;base64,") for source in sources)
    assert (
        not re.search(r'href="(?!#)', html)
        and "<link" not in html
        and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    )
    for section in (
        "Partial correlations per group",
        "Across groups",
        "Settings",
        "Options as requested",
        "Package versions",
        "Pairs",
        "Scores over training",
        "numpy",
    ):
        assert section in html
    figures = written.parent / "figures"
    stems = {path.stem for path in figures.iterdir() if path.suffix in (".png", ".svg")}
    assert {"heatmaps_partial", "agreement"} <= stems
    for stem in stems:
        assert (figures / f"{stem}.png").stat().st_size > 1000
        assert (figures / f"{stem}.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert sum(stem.startswith("trajectories_") for stem in stems) == 2
    assert sum(stem.startswith("residuals_") for stem in stems) == 2


def test_plot_functions_draw_the_analysis(analysis: Analysis) -> None:
    """The public figures live in gengen.report and draw what the tables hold."""
    heatmaps = plot_heatmaps(analysis)
    assert isinstance(heatmaps, Figure)
    assert len(heatmaps.axes) == len(analysis.groups()) + 1  # one panel per group and the colour bar
    raw_partial = plot_raw_vs_partial(analysis, "pythia-410m")
    assert raw_partial.get_suptitle() == "pythia-410m / main"
    residuals = plot_residuals(analysis, "pythia-410m", pairs=[("arc_easy", "sciq")])
    rows = analysis.pairs[(analysis.pairs["model"] == "pythia-410m") & (analysis.pairs["level"] == "run")]
    pair = rows[rows["testset_a"].isin(["arc_easy", "sciq"]) & rows["testset_b"].isin(["arc_easy", "sciq"])]
    influence, step = float(pair["influence"].iloc[0]), float(pair["influential_step"].iloc[0])
    carried = f", deleting step {step:.0f} removes {influence:.0%} of r" if influence > 1 / 3 and step < 1000 else ""
    title = residuals.axes[0].get_title()
    assert title.startswith(
        f"partial r = {float(pair['r_partial'].iloc[0]):.2f}, adjusted p = {float(pair['p_adjusted'].iloc[0]):.2g}\n"
        f"n = {int(pair['n'].iloc[0])}, df = {float(pair['df_sieve'].iloc[0]):.3g}"
    )
    if influence <= 1 / 3 or step < 1000:  # steps from 1000 on are shortened (13k): checked in test_report_first_screen
        assert title.endswith(f"df = {float(pair['df_sieve'].iloc[0]):.3g}{carried}")
    trajectories = plot_trajectories(analysis, "pythia-410m", "main")
    assert "pythia-410m / main" in trajectories.axes[0].get_title()
    comparison = compare(analysis, n_perm=9)
    agreement = plot_agreement(comparison)
    first = comparison.agreement.iloc[0]
    titles = [ax.get_title() for ax in agreement.axes]
    assert any(title.startswith(f"Mantel r = {first['mantel_r']:.2f}") for title in titles)
    with pytest.raises(GengenError, match="not in the analysis"):
        plot_trajectories(analysis, "no-such-model")


def chromium_run(page: Path, screenshot: Path) -> list[str]:
    """Render ``page`` in headless chromium; return the console messages it logged."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y --no-install-recommends chromium)")
    completed = subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--hide-scrollbars",
            "--window-size=1280,1800",
            f"--screenshot={screenshot}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert screenshot.is_file(), completed.stderr[-2000:]
    return [line for line in completed.stderr.splitlines() if ":CONSOLE" in line]


def test_report_renders_in_chromium_without_console_errors(written: Path, tmp_path: Path) -> None:
    screenshot = tmp_path / "report.png"
    console = chromium_run(written, screenshot)
    assert console == []
    pixels = np.asarray(Image.open(screenshot).convert("L"), dtype=float)
    assert pixels.std() > 20.0
    assert np.mean(pixels < 200) > 0.02


def test_chromium_check_catches_a_console_error(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<html><body><p>x</p><script>console.error("boom"); missing();</script></body></html>')
    console = chromium_run(page, tmp_path / "broken.png")
    assert any("boom" in line for line in console)
    assert any("Uncaught ReferenceError" in line for line in console)


def test_cli_report(analysis: Analysis, tmp_path: Path) -> None:
    import typer

    from gengen.cli import report as report_cli

    analysis.to_dir(tmp_path / "a")
    app = typer.Typer()
    report_cli.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(
        app,
        [
            "report",
            str(tmp_path / "a"),
            "--pair",
            "arc_easy,sciq",
            "--out",
            str(tmp_path / "r"),
            "--title",
            "Pythia <check>",
        ],
    )
    assert result.exit_code == 0, result.output
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "Pythia &lt;check&gt;" in html
    bad = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--pair", "arc_easy,nope"])
    assert bad.exit_code == 2 and "not an OOD test set" in bad.output
    empty = CliRunner().invoke(app, ["report", str(tmp_path / "nothing")])
    assert empty.exit_code == 2 and "missing" in empty.output


def test_run_study_analysis_from_a_table(analysis: Analysis, tmp_path: Path) -> None:
    from gengen.pipeline import run_study_analysis

    table = tmp_path / "scores.parquet"
    pd.DataFrame(analysis.scores.drop(columns=["sign", "role"])).to_parquet(table)
    lines: list[str] = []
    path = run_study_analysis(
        table, tmp_path / "study", "lambada_openai", log=lines.append, ood=OOD[:3], n_perm=49, n_boot=49
    )
    assert path == tmp_path / "study" / "report.html" and path.is_file()
    for name in ("pairs.csv", "summary.json", "compare_agreement.csv"):
        assert (tmp_path / "study" / name).is_file()
    # What gengen run and the demo print: the answer sentence of verdict.json first, once (it was printed twice).
    answer = json.loads((tmp_path / "study" / "verdict.json").read_text())["answer"]
    assert answer and lines[0] == f"answer: {answer}"
    assert sum(line.startswith("answer:") for line in lines) == 1


def test_report_of_an_across_run_analysis(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    rows = []
    for model in ("m1", "m2"):
        for run in range(12):
            id_score = rng.uniform(0.3, 0.9)
            for name in ("id", "a", "b", "c"):
                value = id_score if name == "id" else 0.5 * id_score + rng.normal(0, 0.05)
                rows.append(
                    {
                        "model": model,
                        "run": f"seed={run}",
                        "step": 100,
                        "testset": name,
                        "metric": "acc",
                        "value": value,
                    }
                )
    result = analyse(pd.DataFrame(rows), id_testset="id", n_perm=49, n_boot=49)
    assert result.settings["mode_resolved"] == "across_runs"
    path = report(result, None, tmp_path)
    html = path.read_text(encoding="utf-8")
    assert "across 12 runs" in html and (tmp_path / "figures" / "heatmaps_partial.svg").is_file()
