"""The GAM control's settings reach every statistic of the analysis, from Python, the CLI and a study file
(issue 25: k, smoothing criterion, basis and the cap on its degrees of freedom were hard-coded)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from typer.testing import CliRunner

import gengen
from gengen import stats
from gengen.cli import app
from gengen.errors import GengenError


def curved(n: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    steps = np.arange(n) * 100
    id_acc = 0.5 + 0.35 * (1 - np.exp(-steps / 800))
    rows = [("m", "r", int(s), "id", "acc", float(v)) for s, v in zip(steps, id_acc, strict=True)]
    for j in range(3):
        values = 0.3 + 0.4 * np.sqrt(id_acc - 0.49) + rng.normal(0, 0.01, n)
        rows += [("m", "r", int(s), f"t{j}", "acc", float(v)) for s, v in zip(steps, values, strict=True)]
    return pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"gam_k": 5}, {"k": 5}),
        ({"gam_method": "reml", "gam_basis": "tp"}, {"gam_method": "reml", "gam_basis": "tp"}),
        ({"max_edf": 3.0}, {"max_edf": 3.0}),
        ({"max_edf": None}, {"max_edf": None}),
    ],
)
def test_gam_options_reach_the_partial_correlations_and_the_sieve(options: dict, expected: dict) -> None:
    table = curved()
    pairs = gengen.analyse(table, id_testset="id", fit="gam", n_boot=99, pooling=None, **options).pairs
    wide = table.pivot(index="step", columns="testset", values="value")
    reference = stats.partial_corr_matrix(wide[["t0", "t1", "t2"]], wide[["id"]], fit="gam", **expected)
    assert_allclose(pairs["r_partial"], np.asarray(reference.r)[np.triu_indices(3, 1)], rtol=1e-10)
    sieve = stats.sieve_partial_corr_matrix(wide[["t0", "t1", "t2"]], wide[["id"]], fit="gam", n_boot=99, **expected)
    assert_allclose(pairs["se_z"], np.asarray(sieve.se_z)[np.triu_indices(3, 1)], rtol=1e-10)
    if "max_edf" in expected and expected["max_edf"] is not None:
        assert (pairs[["edf_a", "edf_b"]] <= expected["max_edf"] + 1e-9).all().all()


def test_bad_gam_options_are_one_line_errors() -> None:
    for options, message in (
        ({"gam_k": 2}, "^gam_k must be an integer from 3 to 200, got 2$"),
        ({"gam_method": "ml"}, "gam_method"),
        ({"max_edf": 1.5}, "^max_edf must be at least 2"),
        ({"max_edf": "lots"}, "^max_edf must be 'auto', 'none' or a number"),
    ):
        with pytest.raises(GengenError, match=message):
            gengen.analyse(curved(), id_testset="id", fit="gam", **options)


def test_the_cli_and_a_study_file_take_the_gam_options(tmp_path: Path) -> None:
    scores = tmp_path / "scores.csv"
    curved().to_csv(scores, index=False)
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["analyse", str(scores), "--id", "id", "--fit", "gam", "--gam-k", "5", "--max-edf", "3", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    settings = gengen.Analysis.from_dir(out).settings
    assert (settings["gam_k"], settings["max_edf"]) == (5, 3.0)
    bad = runner.invoke(app, ["analyse", str(scores), "--id", "id", "--max-edf", "x", "--out", str(tmp_path / "o2")])
    assert (
        bad.exit_code == 2
        and "error: --max-edf must be 'auto', 'none' or a number of at least 2, got 'x'" in bad.output
    )
    from gengen.study.config import load_config

    text = (Path(gengen.__file__).parent / "demo" / "study.toml").read_text()
    for path in re.findall(r'path = "([^"]+)"', text):  # the demo's data files and model folders, empty
        target = tmp_path / path
        if target.suffix:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
        else:
            target.mkdir(parents=True, exist_ok=True)
    study = tmp_path / "study.toml"
    study.write_text(text + '\n[analysis]\ngam_k = 6\ngam_method = "reml"\nmax_edf = "none"\n')
    config = load_config(study)
    assert config.analysis.options()["gam_k"] == 6 and config.analysis.options()["max_edf"] is None
    study.write_text(text + "\n[analysis]\ngam_k = 2\n")
    with pytest.raises(GengenError, match=r"analysis\.gam_k: must be an integer from 3 to 200, got 2"):
        load_config(study)
