"""Commands that declare their options in a table (issue 27) pass each one on to a function that takes it."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import get_args

import pytest
import typer

from gengen.cli import ingest, score, simulate
from gengen.cli._common import REQUIRED, CliOption, table_signature


def _named(function: object) -> set[str]:
    """The parameters a function names (not its ``**`` catch-all)."""
    parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    return {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD}


def test_table_signature_keeps_the_table_order_defaults_and_declarations() -> None:
    table = {
        "paths": CliOption(list[Path], "The files.", REQUIRED, argument=True),
        "quiet": CliOption(bool, "No progress bar.", False, ("--quiet", "-q")),
        "seed": CliOption(int, "The seed.", 7, min=0, max=9),
    }
    parameters = list(table_signature(table).parameters.values())
    assert [p.name for p in parameters] == list(table)
    assert [p.default for p in parameters] == [inspect.Parameter.empty, False, 7]
    kind, info = get_args(parameters[2].annotation)
    assert kind is int and (info.help, info.min, info.max) == ("The seed.", 0, 9)
    assert isinstance(get_args(parameters[0].annotation)[1], type(typer.Argument()))
    assert isinstance(get_args(parameters[1].annotation)[1], type(typer.Option()))


def test_score_passes_every_option_it_does_not_name_to_score_request() -> None:
    from gengen.scoring import ScoreRequest

    fields = {field.name for field in dataclasses.fields(ScoreRequest)}
    passed = set(score.OPTIONS) - _named(score._score)
    assert passed and passed <= fields
    assert _named(score._score) <= set(score.OPTIONS)


def test_ingest_passes_every_option_it_does_not_name_to_ingest() -> None:
    from gengen.ingest import ingest as library_ingest

    passed = set(ingest.OPTIONS) - _named(ingest._ingest)
    assert passed and passed <= _named(library_ingest)
    assert _named(ingest._ingest) <= set(ingest.OPTIONS)


@pytest.mark.parametrize("study", ["_methods_command", "_grid_command", "_realistic_command", "_items_command"])
def test_simulate_studies_take_only_options_of_the_table(study: str) -> None:
    assert _named(getattr(simulate, study)) <= set(simulate.OPTIONS) - _named(simulate._simulate)


def test_commands_read_their_signature_from_their_table() -> None:
    for module, command in ((ingest, ingest.ingest_command), (score, score.score_command)):
        assert list(inspect.signature(command).parameters) == list(module.OPTIONS)
    assert list(inspect.signature(simulate.simulate_command).parameters) == list(simulate.OPTIONS)
