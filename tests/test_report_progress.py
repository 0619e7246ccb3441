"""The report's paper figures at scale (issue 24, item 4) and hostile names in them (issue 26).

Trajectories on each run's training progress (runs of 16k and 925k steps share the axis) with seeds told apart;
heatmap labels that keep every token telling two test sets apart (OLMo-2 and the Pythia files); names that
matplotlib would read as mathtext drawn literally; and 64 test sets × 7 models in headless Chromium: a
screenshot that is not blank, labels of a stated minimum size and a page of bounded height.

References are independent of the report's code: the progress is ``step / last step`` computed here, hues by
:mod:`colorsys`, tokens by :func:`re.split`, sizes measured by Chromium.
"""

from __future__ import annotations

import colorsys
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gengen.across.compare import compare
from gengen.analyse import Analysis, analyse
from gengen.report import report
from gengen.report.order import short_labels
from gengen.report.trajectories import DASHES, trajectory_payload

SEPARATORS = r"[-_/:.= ]"


def _walks(rng: np.random.Generator, steps: np.ndarray, names: list[str], clusters: int = 4) -> dict[str, np.ndarray]:
    """ID rising with the steps and OOD test sets loading on one of ``clusters`` random walks beyond it."""
    n = len(steps)
    id_score = np.linspace(0.2, 0.7, n) + rng.normal(0, 0.01, n)
    factors = np.cumsum(rng.normal(0, 0.02, (clusters, n)), axis=1)
    out = {"id": id_score}
    for index, name in enumerate(names):
        out[name] = 0.4 * id_score + factors[(index * 7) % clusters] + rng.normal(0, 0.004, n)
    return out


def _table(runs: dict[tuple[str, str], np.ndarray], names: list[str], seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for (model, run), steps in runs.items():
        for name, values in _walks(rng, steps, names).items():
            rows += [(model, run, int(step), name, "acc", float(v)) for step, v in zip(steps, values, strict=True)]
    return pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])


# ------------------------------------------------------------------------------------- trajectories
def test_trajectories_share_a_training_progress_axis_and_tell_seeds_apart() -> None:
    short = np.unique(np.r_[0, np.geomspace(1, 16_000, 14).round()])  # a 16k-step run
    long = np.unique(np.r_[0, np.geomspace(1, 925_000, 20).round()])  # and a 925k-step one
    runs = {
        ("olmo-1b", "seed=0"): short,
        ("olmo-1b", "seed=1"): short,
        ("olmo-1b", "seed=2"): short,
        ("olmo-7b", "seed=0"): long,
        ("olmo-7b", "seed=1"): long,
    }
    analysis = analyse(_table(runs, ["a_x", "b_y", "c_z"]), id_testset="id", inference="t-test", progress=False)
    keys = list(runs)
    data = trajectory_payload(analysis, keys, ["a_x", "b_y", "c_z"])["payload"]
    groups = {(group["model"], group["run"]): group for group in data["groups"]}
    assert list(groups) == keys
    for key, steps in runs.items():
        group = groups[key]
        progress = np.asarray(group["progress"])
        assert np.asarray(group["steps"]) == pytest.approx(steps)
        assert progress == pytest.approx(steps / steps.max(), abs=1e-12)  # step / the run's last step
        assert progress.min() == 0.0 and progress.max() == 1.0 and np.all(np.diff(progress) > 0)
        assert group["last_step"] == steps.max()
    # The two runs' ends meet: both last checkpoints at 1 although one ran 58 times longer.
    assert groups[("olmo-1b", "seed=0")]["progress"][-1] == groups[("olmo-7b", "seed=0")]["progress"][-1] == 1.0
    # Seeds of one model: one hue, each its own shade and dash; every run named in the legend.
    for model, seeds in (("olmo-1b", 3), ("olmo-7b", 2)):
        mine = [group for group in data["groups"] if group["model"] == model]
        assert len({(group["color"], group["dash"]) for group in mine}) == seeds
        assert len({group["dash"] for group in mine}) == seeds and mine[0]["dash"] == DASHES[0]
        hues = [colorsys.rgb_to_hls(*(int(g["color"][i : i + 2], 16) / 255 for i in (1, 3, 5)))[0] for g in mine]
        assert max(hues) - min(hues) < 0.02
        assert [group["label"] for group in mine] == [f"{model} / seed={k}" for k in range(seeds)]
    first = {group["model"]: group["color"] for group in reversed(data["groups"])}
    assert first["olmo-1b"] != first["olmo-7b"]
    # One series per run in each panel, aligned with its steps.
    for panel in data["panels"]:
        assert [len(series) for series in panel["series"]] == [len(steps) for steps in runs.values()]


# -------------------------------------------------------------------------------------------- labels
OLMO = [
    f"{task}_val_{kind}_5shot"
    for task in ("arc_easy", "arc_challenge", "mmlu_stem", "mmlu_humanities", "mmlu_social_sciences", "mmlu_other",
                 "hellaswag", "csqa", "piqa", "socialiqa", "winogrande", "boolq", "openbookqa")
    for kind in ("rc", "mc")
]  # fmt: skip


def _tokens(text: str) -> list[str]:
    return [token for token in re.split(SEPARATORS, text) if token]


def _keeps_every_token(names: list[str], namespace: str = "") -> None:
    labels, stripped = short_labels(names)
    assert stripped == ([namespace] if namespace else [])
    assert len(set(labels.values())) == len(names)  # unique
    for name in names:
        # Every token of the task's own name, in order: nothing that tells it from another is dropped.
        assert _tokens(labels[name]) == _tokens(name.removeprefix(namespace)), (name, labels[name])


def test_labels_of_olmo_names_keep_every_distinguishing_token() -> None:
    _keeps_every_token(OLMO)
    _keeps_every_token([f"eval/downstream/{name}" for name in OLMO], "eval/downstream/")
    labels, _ = short_labels(["arc_easy_val_rc_5shot", "arc_challenge_val_rc_5shot"])
    assert labels["arc_easy_val_rc_5shot"] == "arc_easy_val_rc_5shot"  # not "easy_val_rc_5shot"


def test_labels_of_the_pythia_names_keep_every_distinguishing_token(shared_dir: Path) -> None:
    files = sorted((shared_dir / "data").glob("pythia-*/*/*.json"))
    if not files:
        pytest.skip("no Pythia files in ../shared/data")
    names = sorted(json.loads(files[0].read_text())["results"])
    assert any(name.startswith("hendrycksTest-") for name in names) and len(names) > 60
    _keeps_every_token(names)
    labels, _ = short_labels(names)
    assert labels["crows_pairs_french_age"] == "crows_pairs_french_age"
    assert labels["hendrycksTest-high_school_government_and_politics"].startswith("hendrycksTest-")


def test_labels_too_long_lose_middle_tokens_and_stay_unique() -> None:
    names = [f"suite-{'very_long_' * 6}{end}" for end in ("alpha", "beta")]
    labels, _ = short_labels(names)
    assert labels[names[0]].startswith("suite-…") and labels[names[0]].endswith("alpha")
    assert len(set(labels.values())) == 2 and all(len(label) <= 50 for label in labels.values())


# --------------------------------------------------------------------------------------------- names
MATH = ["$x^2$", "a$b", "$\\notacommand$", "plain"]


def test_names_matplotlib_reads_as_mathtext_are_drawn_literally(tmp_path: Path) -> None:
    from matplotlib.text import Text

    from gengen.report import plot_heatmaps, plot_residuals, plot_trajectories

    steps = np.arange(0, 300, 10)
    table = _table({("$m$", "main"): steps, ("toy-1b", "main"): steps}, MATH, seed=3)
    analysis = analyse(table, id_testset="id", inference="t-test", progress=False)
    # "$\notacommand$" as mathtext cannot be parsed: drawing it would raise.
    path = report(analysis, out_dir=tmp_path / "out", progress=False)
    assert path.is_file() and len(list((tmp_path / "out" / "figures").glob("*.png"))) >= 6
    for figure in (
        plot_heatmaps(analysis),
        plot_residuals(analysis, "$m$", pairs=[("$x^2$", "a$b")]),
        plot_trajectories(analysis, "$m$"),
    ):
        texts = [text for text in figure.findobj(Text) if "$" in text.get_text()]
        assert texts and not any(text.get_parse_math() for text in texts)
        figure.savefig(tmp_path / "one.png")


# --------------------------------------------------------------------------------------- browser
SEVEN = ["toy-14m", "toy-70m", "toy-160m", "toy-410m", "toy-1.4b", "toy-2.8b", "toy-12b"]
M = 64
#: Smallest label a reader must be able to read, in CSS pixels (the page's heatmap labels and tables).
MIN_LABEL_PX = 9.0
#: Longest page: heatmaps side by side, not one per row (an 18,000 px page was issue 24's complaint).
MAX_PAGE_PX = 16_000

MEASURE = """<script>
(function () {
  var out = {};
  var labels = document.querySelectorAll(".hm-lbl");
  out.labels = labels.length;
  out.minLabel = Math.min.apply(null, Array.prototype.map.call(labels, function (n) {
    return parseFloat(getComputedStyle(n).fontSize); }));
  out.labelHeight = document.querySelector(".hm-rows .hm-lbl").getBoundingClientRect().height;
  out.texts = Math.min.apply(null, Array.prototype.map.call(
    document.querySelectorAll(".tm-text, .tm-tick, .tm-legend, .dt td, .dt th, figcaption"),
    function (n) { return parseFloat(getComputedStyle(n).fontSize); }));
  var tops = Array.prototype.map.call(document.querySelectorAll("[data-heatmap='run'] .hm-panel"),
                                      function (n) { return Math.round(n.getBoundingClientRect().top); });
  out.panels = tops.length;
  out.panelLines = tops.filter(function (t, i) { return tops.indexOf(t) === i; }).length;
  out.perLine = tops.filter(function (t) { return t === tops[0]; }).length;
  out.height = document.documentElement.scrollHeight;
  out.legend = Array.prototype.map.call(document.querySelectorAll(".tm-legend .tm-item"),
                                        function (n) { return n.textContent; });
  document.body.setAttribute("data-measure", JSON.stringify(out));
})();
</script>
</body>"""


@pytest.fixture(scope="module")
def seven(tmp_path_factory: pytest.TempPathFactory) -> tuple[Analysis, Path]:
    names = [f"suite-topic_{index:02d}" for index in range(M - 4)] + ["arc_easy", "arc_challenge", "piqa", "sciq"]
    steps = np.r_[0, 2 ** np.arange(24)]
    analysis = analyse(
        _table({(model, "main"): steps for model in SEVEN}, names, seed=7),
        id_testset="id",
        inference="t-test",  # fast: no leave-one-out, no permutations
        progress=False,
    )
    folder = tmp_path_factory.mktemp("seven")
    return analysis, report(analysis, compare(analysis, n_perm=99), folder / "seven.html", progress=False)


def _chromium(args: list[str], page: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y --no-install-recommends chromium)")
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1800",
         *args, page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_report_at_64_test_sets_and_7_models_in_chromium(seven: tuple[Analysis, Path], tmp_path: Path) -> None:
    from PIL import Image

    _, page = seven
    shot = tmp_path / "seven.png"
    logged = _chromium(["--enable-logging=stderr", "--v=0", f"--screenshot={shot}"], page)
    assert shot.is_file(), logged.stderr[-2000:]
    assert [line for line in logged.stderr.splitlines() if ":CONSOLE" in line] == []
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.shape[1] >= 1000 and pixels.std() > 20.0 and np.mean(pixels < 200) > 0.02  # not blank
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE), encoding="utf-8")
    dom = _chromium(["--dump-dom"], probe).stdout
    match = re.search(r'data-measure="([^"]*)"', dom)
    assert match is not None, dom[-2000:]
    measured = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    # Rows labelled on the first panel of each line, columns over the first line (one order in every panel).
    assert measured["labels"] == (measured["panelLines"] + measured["perLine"]) * M
    assert measured["minLabel"] >= MIN_LABEL_PX and measured["texts"] >= 9.0
    assert measured["labelHeight"] >= measured["minLabel"]  # one label per cell, no overlap
    assert measured["panels"] == 7 and measured["perLine"] >= 2 and measured["panelLines"] <= 4  # side by side
    assert measured["height"] <= MAX_PAGE_PX, measured["height"]
    assert [text.split(" (last step")[0] for text in measured["legend"]] == SEVEN


def test_static_heatmap_labels_are_legible_at_64_test_sets(seven: tuple[Analysis, Path]) -> None:
    from matplotlib.text import Text

    from gengen.report import plot_heatmaps
    from gengen.report.figures import PNG_DPI

    analysis, page = seven
    figure = plot_heatmaps(analysis)
    labels = [text for ax in figure.axes[:-1] for text in ax.get_yticklabels() if text.get_text()]
    assert len(labels) == 2 * M  # rows labelled on the first panel of each line (4 per line: 2 lines)
    # Rendered size in the PNG: points × dpi / 72 pixels; at least MIN_LABEL_PX.
    assert min(text.get_fontsize() for text in labels) * PNG_DPI / 72 >= MIN_LABEL_PX
    assert isinstance(labels[0], Text) and (page.parent / "seven_figures" / "heatmaps_partial.png").is_file()


def test_a_300_character_model_name_gets_valid_unique_figure_names(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    steps = np.arange(0, 200, 10)
    long = "m" * 300
    table = _table({(long, "main"): steps, (long[:-1] + "n", "main"): steps}, ["x" * 300, "y" * 300, "z"], seed=5)
    # y follows x (not a near-copy: half its level) so that the verdict classes the pair and draws its forest plot
    x_rows, y_rows = table["testset"] == "x" * 300, table["testset"] == "y" * 300
    noise = np.random.default_rng(6).normal(0, 0.005, int(y_rows.sum()))
    table.loc[y_rows, "value"] = 0.5 * table.loc[x_rows, "value"].to_numpy() + 0.2 + noise
    # lagged, not the t-test: the verdict's forest plots need variances that t-test rows no longer carry (issue 34)
    analyse(table, id_testset="id", inference="lagged", progress=False).to_dir(tmp_path / "a")
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--out", str(tmp_path / "r"), "-q"])
    assert result.exit_code == 0, result.output
    names = [path.name for path in (tmp_path / "r" / "figures").iterdir()]
    assert all(len(name.encode()) <= 255 for name in names)
    residuals = [name for name in names if name.startswith("residuals_") and name.endswith(".png")]
    assert len(residuals) == 2  # the two models differ only in their 300th character: still two figures
    assert any(name.startswith("forest_") for name in names)


def test_report_of_one_study_of_an_analysis_of_several(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gengen.cli import app

    steps = np.arange(0, 200, 10)
    runs = {("pythia-160m", "main"): steps, ("pythia-410m", "main"): steps, ("olmo-1b", "main"): steps}
    table = _table(runs, ["a", "b", "c"], seed=9)
    table["study"] = np.where(table["model"].str.startswith("pythia"), "pythia", "olmo")
    analyse(table, id_testset="id", inference="t-test", progress=False).to_dir(tmp_path / "a")
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--study", "pythia", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="gengen-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert [panel["title"] for panel in data["heatmaps"]["run"]["panels"]] == ["pythia-160m", "pythia-410m"]
    assert [group["model"] for group in data["trajectories"]["scores"]["groups"]] == ["pythia-160m", "pythia-410m"]
    assert "olmo-1b" not in html


def test_static_progress_figure_draws_each_run_on_zero_to_one_in_its_own_style() -> None:
    from gengen.report import plot_progress

    short = np.unique(np.r_[0, np.geomspace(1, 16_000, 12).round()])
    long = np.unique(np.r_[0, np.geomspace(1, 925_000, 18).round()])
    runs = {("olmo-1b", "seed=0"): short, ("olmo-1b", "seed=1"): short, ("olmo-7b", "seed=0"): long}
    analysis = analyse(_table(runs, ["a_x", "b_y"]), id_testset="id", inference="t-test", progress=False)
    figure = plot_progress(analysis)
    ax = figure.axes[0]  # the ID panel
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == [f"{model} / {run}" for model, run in runs]
    for line, steps in zip(lines, runs.values(), strict=True):
        x = np.asarray(line.get_xdata(), dtype=float)
        assert x.min() == 0.0 and x.max() == 1.0 and x == pytest.approx(steps / steps.max())  # step / last step
    styles = [(line.get_color(), str(line.get_linestyle())) for line in lines]
    assert len(set(styles)) == 3 and styles[0][1] != styles[1][1]  # the two seeds: other dash
    assert [text.get_text() for text in figure.legends[0].get_texts()] == [line.get_label() for line in lines]
