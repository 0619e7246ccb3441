"""The report at scale (issue 15): 64 test sets, four model sizes, across-run analyses, old and new pairs tables.

References are independent of gengen: scipy's hierarchical clustering, hand-written expectations for names,
orders and settings, and headless Chromium for what a reader actually sees (font sizes, hover text, console).
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
from scipy.cluster.hierarchy import cophenet, linkage
from scipy.spatial.distance import squareform
from typer.testing import CliRunner

from gengen.across.compare import compare
from gengen.analyse import Analysis, analyse
from gengen.report import output_paths, report
from gengen.report.build import figure_groups
from gengen.report.figures import direction_label, trajectories
from gengen.report.order import average_linkage, cluster_order, model_size, short_labels, sort_models
from gengen.report.rows import deciding_p, diagnostics, section_settings

# ----------------------------------------------------------------------------------------------- data
MODELS = ["toy-12b", "toy-410m", "toy-1.4b", "toy-70m"]  # deliberately not in size order
SIZE_ORDER = ["toy-70m", "toy-410m", "toy-1.4b", "toy-12b"]
CLUSTERS = 4
M = 64


def ood_names() -> list[str]:
    """64 names: 60 in a 'suite-' family (prefix to strip) and 4 loose ones; shuffled against the clusters."""
    names = [f"suite-topic_{index:02d}" for index in range(60)] + ["arc_easy", "arc_challenge", "piqa", "sciq"]
    return names


def cluster_of(index: int) -> int:
    # Interleaved clusters: the input order says nothing about them.
    return (index * 7) % CLUSTERS


def checkpoint_scores(seed: int = 0, steps: int = 30, metric: str = "acc") -> pd.DataFrame:
    """Four models × 30 checkpoints; OOD test sets load on one of four latent random walks beyond ID."""
    rng = np.random.default_rng(seed)
    names = ood_names()
    rows = []
    for model in MODELS:
        id_score = np.linspace(0.2, 0.7, steps) + rng.normal(0, 0.01, steps)
        factors = np.cumsum(rng.normal(0, 0.02, (CLUSTERS, steps)), axis=1)
        step_values = [0, *(2 ** np.arange(steps - 1)).tolist()]
        for t in range(steps):
            rows.append((model, "main", step_values[t], "lambada", metric, id_score[t]))
            for index, name in enumerate(names):
                value = 0.4 * id_score[t] + factors[cluster_of(index), t] + rng.normal(0, 0.004)
                rows.append((model, "main", step_values[t], name, metric, value))
    return pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])


@pytest.fixture(scope="module")
def analysis() -> Analysis:
    return analyse(checkpoint_scores(), id_testset="lambada")


@pytest.fixture(scope="module")
def written(analysis: Analysis, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scale")
    analysis.to_dir(folder)
    return report(analysis, compare(analysis, n_perm=99), folder / "pythia-like.html")


def payload(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="gengen-data">(.*?)</script>', html, re.S)
    assert match is not None
    return json.loads(match.group(1))


# --------------------------------------------------------------------------------------------- orders
def test_model_sizes_and_order() -> None:
    assert model_size("pythia-1.4b") == pytest.approx(1.4e9)
    assert model_size("OLMo-2-1124-7B") == pytest.approx(7e9)
    assert model_size("pythia-v1.1-160m") == pytest.approx(160e6)
    assert model_size("gpt2") is None and model_size("v1.1-final") is None
    shuffled = ["pythia-12b", "pythia-2.8b", "pythia-1.4b", "llama-13B", "pythia-6.9b", "gpt2", "pythia-70m",
                "pythia-410m", "pythia-1b", "llama-7B"]  # fmt: skip
    assert sort_models(shuffled) == [
        "pythia-70m", "pythia-410m", "pythia-1b", "pythia-1.4b", "pythia-2.8b", "pythia-6.9b", "llama-7B",
        "pythia-12b", "llama-13B", "gpt2",
    ]  # fmt: skip


@pytest.mark.parametrize("m", [3, 10, 40])
def test_average_linkage_matches_scipy(m: int) -> None:
    rng = np.random.default_rng(m)
    r = np.corrcoef(rng.normal(size=(25, m)).T)
    distance = (1 - r) / 2
    np.fill_diagonal(distance, 0.0)
    ours = average_linkage(distance)
    theirs = linkage(squareform(distance, checks=False), method="average")
    np.testing.assert_allclose(np.sort(ours[:, 2]), np.sort(theirs[:, 2]), rtol=1e-12)
    # Same cophenetic distances = same dendrogram.
    np.testing.assert_allclose(cophenet(ours), cophenet(theirs), rtol=1e-12)
    np.testing.assert_array_equal(np.sort(ours[:, 3]), np.sort(theirs[:, 3]))


def test_cluster_order_puts_planted_blocks_together() -> None:
    rng = np.random.default_rng(5)
    membership = rng.permutation(np.repeat(np.arange(4), 8))
    r = np.where(membership[:, None] == membership[None, :], 0.8, 0.0) + rng.normal(0, 0.05, (32, 32))
    r = (r + r.T) / 2
    np.fill_diagonal(r, 1.0)
    order = cluster_order(r)
    assert sorted(order) == list(range(32))
    runs = np.count_nonzero(np.diff(membership[order]) != 0)
    assert runs == 3  # four contiguous blocks


def test_figure_groups_take_every_models_first_runs_first() -> None:
    keys = [(model, f"seed={run}") for model in ("a-1b", "b-2b", "c-3b") for run in range(4)]
    assert figure_groups(keys, 5) == [
        ("a-1b", "seed=0"), ("a-1b", "seed=1"), ("b-2b", "seed=0"), ("b-2b", "seed=1"), ("c-3b", "seed=0"),
    ]  # fmt: skip
    assert figure_groups(keys, 100) == keys


def test_short_labels_strip_shared_namespaces_only_and_stay_unique() -> None:
    names = [f"hendrycksTest-{topic}" for topic in ("anatomy", "virology", "astronomy")] + ["arc_easy", "arc_challenge"]
    labels, stripped = short_labels(names)
    # A prefix of some task names tells them apart from the others: it stays.
    assert stripped == [] and labels == {name: name for name in names}
    wandb = [f"eval/downstream/{task}_val_rc_5shot" for task in ("arc_easy", "hellaswag")]
    labels, stripped = short_labels(wandb)
    assert stripped == ["eval/downstream/"] and labels[wandb[1]] == "hellaswag_val_rc_5shot"
    # Labels that would collide, once shortened, keep their full names.
    long = ["x" * 60 + "_a", "x" * 60 + "_b"]
    labels, _ = short_labels(long)
    assert len(set(labels.values())) == 2
    assert all(len(label) <= 50 for label in short_labels(["y" * 80 + "a", "z" * 80])[0].values())


# ---------------------------------------------------------------------------------------------- rows
def test_deciding_p_prefers_new_columns_and_falls_back() -> None:
    old = pd.DataFrame(
        {
            "p_value": [0.5, 0.6],
            "p_lagged": [0.01, 0.02],
            "p_lagged_method": ["lagged regression", "lagged regression"],
            "p_perm": [0.3, 0.4],
            "p_perm_method": ["permutation (free)", "permutation (free)"],
            "p_adjusted_from": ["p_lagged", "p_perm (max-|r| family-wise permutation, maxT)"],
        }
    )
    p, method = deciding_p(old)
    assert p.tolist() == [0.01, 0.4]
    assert method.tolist() == ["lagged regression", "permutation (free) (adjusted family-wise, maxT)"]
    assert diagnostics(old).tolist() == ["", ""]
    new = old.assign(
        p_deciding=[0.07, 0.08], p_deciding_method=["AR-sieve bootstrap", None], diagnostics=[None, "non-linear"]
    )
    p, method = deciding_p(new)
    assert p.tolist() == [0.07, 0.08] and method.tolist() == ["AR-sieve bootstrap", ""]
    assert diagnostics(new).tolist() == ["", "non-linear"]


def across_run_scores() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for model in ("m-1b", "m-70m"):
        for run in range(12):
            id_score = rng.uniform(0.3, 0.9)
            for name in ("id", "a", "b", "c"):
                value = id_score if name == "id" else 0.5 * id_score + rng.normal(0, 0.05)
                rows.append((model, f"seed={run}", 100, name, "acc", value))
    return pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])


def test_across_run_section_has_pairs_p_values_and_the_settings_its_rows_used(tmp_path: Path) -> None:
    result = analyse(across_run_scores(), id_testset="id", inference="permutation", scheme="block", n_perm=199)
    rows = result.pairs
    assert set(rows["level"]) == {"across_runs"} and set(rows["scheme"]) == {"free"}
    settings = dict(section_settings(rows, 0.05))
    assert settings["resampling scheme (from the methods)"] == "free"
    assert "free" in settings["its method"] and "block" not in settings["its method"]
    assert settings["p-value deciding significance"] == "p_perm"
    html = report(result, None, tmp_path).read_text(encoding="utf-8")
    section = html[html.index('id="across-runs"') : html.index('id="across-groups"')]
    assert "block" not in section and "resampling scheme (from the methods)</td><td>free" in section
    table = payload(html)["tables"]["across_runs"]
    columns = {column["name"]: column for column in table["columns"]}
    assert table["n"] == len(rows)
    for name in ("p_deciding", "p_deciding_method", "p_adjusted", "ci_low", "ci_high", "ci_method", "diagnostics"):
        assert name in columns
    np.testing.assert_allclose(
        sorted(columns["p_deciding"]["values"]), sorted(rows["p_perm"].round(6)), rtol=5e-3, atol=1e-12
    )


# ------------------------------------------------------------------------------------------- report
def test_report_orders_models_by_size_and_test_sets_by_clusters(written: Path, analysis: Analysis) -> None:
    html = written.read_text(encoding="utf-8")
    data = payload(html)
    heatmap = data["heatmaps"]["run"]
    assert [panel["title"] for panel in heatmap["panels"]] == SIZE_ORDER
    assert [group["label"] for group in data["trajectories"]["scores"]["groups"]] == SIZE_ORDER
    positions = [html.index(f"<td>{model}</td>") for model in SIZE_ORDER]
    assert positions == sorted(positions)  # the summary table too
    names = heatmap["names"]
    assert sorted(names) == sorted(ood_names())
    membership = np.array([cluster_of(ood_names().index(name)) for name in names])
    assert np.count_nonzero(np.diff(membership) != 0) == CLUSTERS - 1
    assert heatmap["stripped"] == [] and "suite-topic_00" in heatmap["labels"]
    # Each panel's values are that model's r_partial at the same (clustered) positions.
    rows = analysis.pairs[analysis.pairs["model"] == "toy-410m"].set_index(["testset_a", "testset_b"])["r_partial"]
    i, j = np.triu_indices(len(names), 1)
    for k in (0, 100, 2000):
        a, b = names[i[k]], names[j[k]]
        expected = rows.get((a, b), rows.get((b, a)))
        assert heatmap["panels"][1]["values"]["r_partial"][k] == pytest.approx(expected, abs=1e-3)


def test_report_file_out_and_size(written: Path) -> None:
    assert written.name == "pythia-like.html" and written.is_file()
    figures = written.parent / "pythia-like_figures"
    assert (figures / "heatmaps_partial.svg").is_file() and (figures / "agreement.png").is_file()
    assert written.stat().st_size < 5_000_000
    assert output_paths("out/x.html") == (Path("out/x.html"), Path("out/x_figures"))
    assert output_paths("out") == (Path("out/report.html"), Path("out/figures"))


def test_trajectory_labels_say_which_way_the_metric_runs() -> None:
    assert direction_label("acc", 1) == "acc score (higher = better)"
    assert direction_label("loss", -1) == "−loss (negated; lower raw = better)"
    scores = checkpoint_scores(steps=12, metric="loss")
    small = scores[scores["testset"].isin(["lambada", "piqa", "sciq", "arc_easy", "suite-topic_01"])]
    result = analyse(small, id_testset="lambada", metric="loss")
    assert set(result.scores["sign"]) == {-1}
    figure = trajectories(result, "toy-70m", "main")
    assert figure.axes[0].get_ylabel() == "−loss (negated; lower raw = better)"


def test_cli_html_out_and_progress_lines(analysis: Analysis, tmp_path: Path) -> None:
    import typer

    from gengen.cli import report as report_cli

    analysis.to_dir(tmp_path / "a")
    app = typer.Typer()
    report_cli.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--out", str(tmp_path / "x.html")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "x.html").is_file() and (tmp_path / "x_figures").is_dir()
    assert not (tmp_path / "x.html" / "report.html").exists()
    lines = [line for line in result.stderr.splitlines() if line.startswith("report: [")]
    assert lines[0].startswith("report: [1/") and "] page (" in lines[-1]
    # 10 per-group and agreement figures, the progress figure, the model x model matrix and a forest plot of the
    # verdict's strongest pair of each class that has one (model-dependent, consistent positive, consistent negative)
    from gengen.across.compare import compare as compare_groups
    from gengen.across.verdict import build_verdict

    verdict = build_verdict(analysis, compare_groups(analysis))
    classes = ("model-dependent", "consistent positive", "consistent negative")
    forests = sum(1 for name in classes if verdict.examples.get(name))
    assert forests >= 1
    figures = 12 + forests
    assert len(list((tmp_path / "x_figures").glob("forest_*.png"))) == forests
    assert lines[-1].endswith(f"({figures} figures drawn, 0 unchanged since the last report)")
    # Drawn once, reused: unchanged inputs redraw nothing; --pair redraws the scatter plots and adds its trajectories.
    again = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--out", str(tmp_path / "x.html")])
    assert again.exit_code == 0 and again.stderr.splitlines()[-1].endswith(
        f"(0 figures drawn, {figures} unchanged since the last report)"
    )
    pair = CliRunner().invoke(
        app, ["report", str(tmp_path / "a"), "--out", str(tmp_path / "x.html"), "--pair", "piqa,sciq"]
    )
    assert pair.exit_code == 0 and pair.stderr.splitlines()[-1].endswith(
        f"(5 figures drawn, {figures - 4} unchanged since the last report)"
    )
    quiet = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--out", str(tmp_path / "d"), "-q"])
    assert quiet.exit_code == 0 and (tmp_path / "d" / "report.html").is_file()
    assert "report: [" not in quiet.stderr


# ------------------------------------------------------------------------------------------ browser
MEASURE = """<script>
(function () {
  var out = {};
  var sizes = Array.prototype.map.call(
    document.querySelectorAll(".hm-lbl, .tm-text, .tm-tick, .dt td, .dt th, figcaption"),
    function (node) { return parseFloat(getComputedStyle(node).fontSize); });
  out.minFont = Math.min.apply(null, sizes);
  out.measured = sizes.length;
  out.labels = document.querySelectorAll(".hm-lbl").length;
  var label = document.querySelector(".hm-rows .hm-lbl");
  out.labelHeight = label.getBoundingClientRect().height;
  out.labelFont = parseFloat(getComputedStyle(label).fontSize);
  out.titles = Array.prototype.map.call(document.querySelectorAll(".hm-title"),
                                        function (n) { return n.textContent; });
  var canvas = document.querySelector("canvas.hm-canvas");
  var box = canvas.getBoundingClientRect();
  var cell = box.width / document.querySelector(".hm-rows").children.length;
  canvas.dispatchEvent(new MouseEvent("mousemove", {clientX: box.left + cell * 1.5, clientY: box.top + cell * 0.5,
                                                    bubbles: true}));
  out.tip = document.querySelector(".tip").textContent;
  out.rows = document.querySelector(".dt tbody").children.length;
  var search = document.querySelector(".dt input[type=search]");
  search.value = "topic_00 arc_easy";
  search.dispatchEvent(new Event("input"));
  out.filtered = Array.prototype.map.call(document.querySelector(".dt tbody").children, function (tr) {
    return tr.children[1].textContent + "|" + tr.children[2].textContent;
  });
  out.panels = document.querySelectorAll(".tm-panels svg").length;
  document.body.setAttribute("data-measure", JSON.stringify(out));
})();
</script>
</body>"""


def chromium(args: list[str], page: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y --no-install-recommends chromium)")
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1800",
         *args, page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_report_at_64_test_sets_in_chromium(written: Path, tmp_path: Path) -> None:
    logged = chromium(["--enable-logging=stderr", "--v=0", f"--screenshot={tmp_path / 'page.png'}"], written)
    assert (tmp_path / "page.png").is_file(), logged.stderr[-2000:]
    assert [line for line in logged.stderr.splitlines() if ":CONSOLE" in line] == []
    probe = tmp_path / "probe.html"
    probe.write_text(written.read_text(encoding="utf-8").replace("</body>", MEASURE), encoding="utf-8")
    dom = chromium(["--dump-dom"], probe).stdout
    match = re.search(r'data-measure="([^"]*)"', dom)
    assert match is not None, dom[-2000:]
    measured = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert measured["minFont"] >= 8.0 and measured["labelFont"] >= 8.0
    assert measured["labelHeight"] >= measured["labelFont"]  # one label per cell, no overlap
    # Rows labelled on the first panel of each line, columns on the first line (one order in every panel).
    assert measured["labels"] >= 2 * M and measured["measured"] > 2 * M
    assert measured["titles"] == SIZE_ORDER
    assert " × " in measured["tip"] and "r_partial = " in measured["tip"]
    assert measured["tip"].split(" × ")[0] in ood_names()
    assert measured["rows"] == 25
    assert measured["filtered"] and all(
        set(row.split("|")) == {"suite-topic_00", "arc_easy"} for row in measured["filtered"]
    )
    assert measured["panels"] == M + 1


def test_figure_cache_redraws_only_when_something_changed(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    from gengen.report.cache import CACHE_FILE, FigureCache, digest

    calls = []

    def draw() -> Figure:
        calls.append(1)
        figure = Figure(figsize=(2, 2))
        figure.subplots().plot([0, 1], [0, 1])
        return figure

    same, changed = digest(pd.DataFrame({"a": [1, 2]}), "x"), digest(pd.DataFrame({"a": [1, 3]}), "x")
    assert same != changed and same == digest(pd.DataFrame({"a": [1, 2]}), "x")
    assert digest(pd.DataFrame({"a": [1, 2]})) != digest(pd.DataFrame({"b": [1, 2]}))
    cache = FigureCache(tmp_path)
    data, width = cache.figure("x", same, draw)
    cache.save()
    assert len(calls) == 1 and width == 192 and (tmp_path / "x.svg").is_file()
    again = FigureCache(tmp_path)
    assert again.figure("x", same, draw) == (data, width) and len(calls) == 1
    again.figure("x", changed, draw)
    assert len(calls) == 2
    (tmp_path / CACHE_FILE).write_text("{not json", encoding="utf-8")
    FigureCache(tmp_path).figure("x", changed, draw)
    assert len(calls) == 3
    cache = FigureCache(tmp_path)
    cache.figure("x", changed, draw)
    cache.save()
    (tmp_path / "x.svg").unlink()
    FigureCache(tmp_path).figure("x", changed, draw)
    assert len(calls) == 5


def test_page_rows_bound_the_page_when_significant_rows_alone_exceed_it() -> None:
    """Four groups of 100 rows, 60 significant each, a limit of 120: each group's 30 strongest significant rows
    (the rows come sorted strongest first); with room for every significant row, all of them and each group's
    (280 - 240) // 4 = 10 strongest rows, which here are significant already."""
    from gengen.report.page import page_rows

    rows = pd.DataFrame(
        [(f"m{g}", "main", i, i < 60) for g in range(4) for i in range(100)],
        columns=["model", "run", "rank", "significant"],
    )
    kept = rows[page_rows(rows, limit=120)]
    assert len(kept) == 120 and kept["significant"].all()
    assert kept.groupby("model")["rank"].agg(list).tolist() == [list(range(30))] * 4
    roomy = rows[page_rows(rows, limit=280)]
    assert len(roomy) == 240 and roomy["significant"].all()
