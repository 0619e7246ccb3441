"""One option table for the analysis: analyse()'s signature, the CLI, the study file and the settings record agree.

Every front end is derived from (or held to) :data:`gengen.analyse.options.ANALYSIS_OPTIONS`: a mismatch of a
name, a default or a choice between the table and ``analyse()``, ``gengen analyse``, a study's ``[analysis]``
keys or :class:`~gengen.analyse.options.Settings` fails here. Also: every option's error names that option in
the library's terms and the CLI's flag; ``--study``; score tables whose columns cannot be read as one.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import gengen
from gengen.analyse import load_scores
from gengen.analyse.options import (
    ANALYSIS_OPTIONS,
    OPTIONS,
    STUDY_OPTIONS,
    Option,
    Settings,
    check_option,
    make_settings,
)
from gengen.cli import app
from gengen.cli.analyse import FLAGS
from gengen.errors import GengenError
from gengen.study.config import AnalysisConfig

NAMES = [option.name for option in ANALYSIS_OPTIONS]


def analyse_command() -> Any:
    from gengen.cli import load_commands

    return load_commands("analyse")["analyse"]


def scores(n_steps: int = 24, studies: tuple[str, ...] = ()) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    trend = np.linspace(0.3, 0.8, n_steps)
    rows = [
        {"model": "m", "run": "main", "step": 10 * i, "testset": t, "metric": "acc", "value": v + rng.normal(0, 0.03)}
        for i, v in enumerate(trend)
        for t in ("id", "a", "b", "c")
    ]
    table = pd.DataFrame(rows)
    table["value"] = table["value"].clip(0, 1)
    if studies:
        table = pd.concat([table.assign(study=study) for study in studies], ignore_index=True)
    return table


def test_analyse_takes_exactly_the_tables_options_with_its_defaults() -> None:
    parameters = inspect.signature(gengen.analyse).parameters
    assert [name for name in parameters if name not in ("df", "progress")] == NAMES
    for option in ANALYSIS_OPTIONS:
        parameter = parameters[option.name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        expected = inspect.Parameter.empty if option.required else option.default
        assert parameter.default == expected, option.name


def test_the_settings_record_has_one_field_per_option_in_the_tables_order() -> None:
    fields = [field.name for field in dataclasses.fields(Settings)]
    assert fields == [*NAMES, "fit_chosen"]
    settings = make_settings(id_testset="id")
    for option in ANALYSIS_OPTIONS:
        if option.name not in ("id_testset", "id_metric", "lower_is_better", "inference"):
            assert getattr(settings, option.name) == check_option(option, option.default), option.name
    assert settings.id_metric == settings.metric and settings.inference == OPTIONS["inference"].default


def cli_default(option: Option) -> Any:
    if option.kind in ("choices", "names", "columns"):
        return None if option.default is None else ",".join(option.default)
    if option.kind == "edf":
        return str(option.default)
    return option.default


def test_the_cli_has_one_flag_per_option_with_the_tables_default_help_and_bounds() -> None:
    params = {param.name: param for param in analyse_command().params}
    assert set(NAMES) <= set(params) and set(params) - set(NAMES) == {"store", "study", "out"}
    for option in ANALYSIS_OPTIONS:
        param = params[option.name]
        assert type(param).__name__ == "TyperOption"
        assert param.opts[0] == option.cli_flag == FLAGS[option.name]
        assert param.help == option.cli_help and all(choice in param.help for choice in option.choices)
        assert param.required == option.required
        if not option.required:
            assert param.default == cli_default(option), option.name
        if option.kind == "integer":
            assert (param.min, param.max) == option.bounds, option.name
    assert params["leave_one_out"].secondary_opts == ["--no-leave-one-out"]
    assert (
        FLAGS["id_testset"] == "--id" and FLAGS["models"] == "--model" and FLAGS["boot_ci_method"] == "--boot-ci-method"
    )


def test_a_study_files_analysis_keys_are_the_tables_study_options() -> None:
    fields = {field.name: field.default for field in dataclasses.fields(AnalysisConfig)}
    assert set(fields) == {option.name for option in STUDY_OPTIONS}
    assert fields == {option.name: option.default for option in STUDY_OPTIONS}
    assert AnalysisConfig().options() == fields


#: A value each kind of option refuses.
BAD_VALUE = {
    "text": "",
    "choice": "nonsense",
    "choices": "nonsense",
    "names": "only-one",
    "columns": "seed,seed",
    "groups": "no-equals-sign",
    "patterns": True,
    "metric_names": ["--"],
    "integer": -5,
    "level": 1.5,
    "flag": "yes",
    "edf": 1.0,
}


@pytest.mark.parametrize("option", ANALYSIS_OPTIONS, ids=lambda option: option.name)
def test_every_option_refuses_a_bad_value_naming_itself_in_each_front_ends_terms(option: Option) -> None:
    with pytest.raises(GengenError) as info:
        make_settings(**{"id_testset": "id", option.name: BAD_VALUE[option.kind]})
    error = info.value
    assert error.option == option.name and error.problem
    assert str(error).startswith(f"{option.name} ") and "\n" not in str(error)
    assert error.render(FLAGS.get).startswith(f"{option.cli_flag} ")


@pytest.mark.parametrize("option", [o for o in ANALYSIS_OPTIONS if o.kind == "choice"], ids=lambda o: o.name)
def test_every_choice_is_accepted_and_refused_in_one_message_format(option: Option) -> None:
    for choice in option.choices:
        assert check_option(option, choice) == choice
    with pytest.raises(GengenError) as info:
        check_option(option, "nonsense")
    assert str(info.value) == f"{option.name} must be one of {', '.join(option.choices)}, got 'nonsense'"


def test_make_settings_refuses_an_unknown_option_and_a_missing_id() -> None:
    with pytest.raises(GengenError, match=r"^n_bot is not an option of the analysis"):
        make_settings(id_testset="id", n_bot=9)
    with pytest.raises(GengenError, match=r"^id_testset is required$"):
        make_settings()


def test_boot_ci_method_reaches_the_analysis_from_the_cli(tmp_path: Path) -> None:
    source = tmp_path / "scores.csv"
    scores().to_csv(source, index=False)
    out = tmp_path / "out"
    arguments = ["--inference", "t-test,bootstrap", "--n-boot", "199", "--boot-ci-method", "bca", "--fit", "linear"]
    result = CliRunner().invoke(app, ["analyse", str(source), "--id", "id", *arguments, "--out", str(out)])
    assert result.exit_code == 0, result.output
    analysis = gengen.Analysis.from_dir(out)
    assert analysis.settings["boot_ci_method"] == "bca"
    assert analysis.pairs["boot_ci_method"].str.contains("bca, 199 draws").all()
    direct = gengen.analyse(
        scores(), id_testset="id", inference="t-test,bootstrap", n_boot=199, boot_ci_method="bca", fit="linear"
    )
    np.testing.assert_allclose(analysis.pairs["boot_ci_low"], direct.pairs["boot_ci_low"], rtol=1e-12)


def test_a_study_file_names_the_key_of_a_bad_analysis_option(tmp_path: Path) -> None:
    from gengen.analyse.options import study_options

    read = {"fit": "cubic"}.get
    with pytest.raises(GengenError, match=r"^fit must be one of linear, gam, auto, got 'cubic'$"):
        study_options(lambda key, default: read(key, default), ("acc", "logprob"))
    with pytest.raises(GengenError, match=r"^metric must be one of acc, logprob, got 'f1'$"):
        study_options(lambda key, default: {"metric": "f1"}.get(key, default), ("acc", "logprob"))


# ------------------------------------------------------------------------------------------------ --study


def test_analyse_study_chooses_one_of_several_and_refuses_to_guess(tmp_path: Path) -> None:
    from gengen.store.database import Store

    store = tmp_path / "store"
    Store(store).write_scores(scores(studies=("copy", "study")))
    common = ["analyse", str(store), "--id", "id", "--inference", "t-test", "--fit", "linear"]
    runner = CliRunner()
    result = runner.invoke(app, [*common, "--out", str(tmp_path / "o1")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and lines == [f"error: --study is needed: {store} holds 2 studies (copy, study)"]
    result = runner.invoke(app, [*common, "--study", "nope", "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: --study 'nope' is not in {store}; its studies: copy, study"
    result = runner.invoke(app, [*common, "--study", "copy", "--out", str(tmp_path / "o3")])
    assert result.exit_code == 0, result.output
    analysed = gengen.Analysis.from_dir(tmp_path / "o3")
    assert set(analysed.scores["study"]) == {"copy"}
    one = gengen.analyse(scores(), id_testset="id", inference="t-test", fit="linear")
    np.testing.assert_allclose(analysed.pairs["r_partial"], one.pairs["r_partial"], rtol=1e-12)
    table = tmp_path / "two.csv"
    scores(studies=("x", "y")).to_csv(table, index=False)
    assert set(load_scores(table, study="y")["study"]) == {"y"}


# ------------------------------------------------------------------------------- score tables as DataFrames


def _duplicate(df: pd.DataFrame) -> pd.DataFrame:
    out = df.assign(extra=1.0)
    out.columns = [*df.columns, "value"]
    return out


def _multi(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out.columns = pd.MultiIndex.from_tuples([(name, "x") for name in df.columns])
    return out


def _nullable_step(df: pd.DataFrame) -> pd.DataFrame:
    out = df.assign(step=pd.array(df["step"], dtype="Int64"))
    out.loc[5, "step"] = pd.NA
    return out


def _float_step(df: pd.DataFrame) -> pd.DataFrame:
    out = df.assign(step=df["step"].astype(float))
    out.loc[5, "step"] = np.nan
    return out


def _missing_testset(df: pd.DataFrame) -> pd.DataFrame:
    out = df.assign(testset=df["testset"].astype(object))
    out.loc[5, "testset"] = None
    return out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_duplicate, r"^scores: column 'value' appears 2 times; a score table's columns are unique$"),
        (_multi, r"^scores: the columns are a MultiIndex of 2 levels \(\('model', 'x'\), .*flatten them"),
        (_nullable_step, r"^scores: model 'm', run 'main', step <NA>, test set '\w+': column 'step' is empty$"),
        (_float_step, r"^scores: model 'm', run 'main', step nan, test set '\w+': column 'step' is empty$"),
        (_missing_testset, r"^scores: column 'testset' is empty in row 5 \(1 of 96 rows\)$"),
    ],
    ids=["duplicate-columns", "multiindex-columns", "nullable-int64-step", "float-nan-step", "missing-testset"],
)
def test_a_frame_whose_columns_cannot_be_read_is_one_line_naming_the_column(damage: Any, message: str) -> None:
    with pytest.raises(GengenError, match=message):
        gengen.analyse(damage(scores()), id_testset="id", inference="t-test")


def test_a_nullable_step_without_missing_values_is_analysed_as_the_integers() -> None:
    df = scores()
    plain = gengen.analyse(df, id_testset="id", inference="t-test", fit="linear").pairs
    nullable = gengen.analyse(
        df.assign(step=pd.array(df["step"], dtype="Int64")), id_testset="id", inference="t-test", fit="linear"
    ).pairs
    pd.testing.assert_frame_equal(plain, nullable)


def test_the_residuals_of_an_analysis_use_its_gam_options() -> None:
    from gengen.stats import Gam, residualise
    from tests.test_analyse_gam_options import curved

    df = curved()
    analysis = gengen.analyse(df, id_testset="id", inference="t-test", fit="gam", gam_k=5, max_edf=3.0)
    residuals = analysis.residuals("m", "r")
    wide = df.pivot_table(index="step", columns="testset", values="value")
    expected = residualise(wide["t0"].to_numpy(), wide[["id"]].to_numpy(), fit=Gam(k=5, max_edf=3.0))
    np.testing.assert_allclose(residuals["t0"].to_numpy(), np.asarray(expected), rtol=1e-10, atol=1e-12)
    default = residualise(wide["t0"].to_numpy(), wide[["id"]].to_numpy(), fit=Gam())
    assert not np.allclose(residuals["t0"].to_numpy(), np.asarray(default), atol=1e-6)
