"""`gengen partial-corr`: one partial correlation from two columns of a CSV file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gengen import stats
from gengen.cli._common import either, user_errors_exit
from gengen.errors import GengenError, InputError
from gengen.stats.options import DEFAULT_METHOD, METHODS

if TYPE_CHECKING:
    import pandas as pd  # the command reads its CSV with pandas; --help does not


def _read_columns(path: Path, names: list[str]) -> pd.DataFrame:
    from gengen._files import read_csv

    frame = read_csv(path)
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise InputError(f"{path}: no column {missing[0]!r} (columns: {', '.join(map(str, frame.columns))})")
    return frame[names]


def _in_columns(message: str, x: str, y: str, covariates: list[str]) -> str:
    """A statistics error about argument x, y or covar, told in terms of the CSV's columns."""
    for argument, column in (("x", x), ("y", y), ("covar", ",".join(covariates))):
        if message.startswith(f"{argument}:") or message.startswith(f"{argument} "):
            return f"--{argument} {column!r}{message[len(argument) :]}"
    return message


@user_errors_exit
def partial_corr_command(
    csv: Annotated[Path, typer.Argument(help="CSV file with one column per variable.", exists=True, dir_okay=False)],
    x: Annotated[str, typer.Option("--x", help="Column of the first variable.")],
    y: Annotated[str, typer.Option("--y", help="Column of the second variable.")],
    covar: Annotated[
        str, typer.Option("--covar", help="Comma-separated covariate columns (empty: plain correlation).")
    ] = "",
    method: Annotated[str, typer.Option(help=f"{either(METHODS)}.")] = DEFAULT_METHOD,
    semi: Annotated[
        str, typer.Option(help="Remove the covariates from 'x' or 'y' only (semi-partial); default both.")
    ] = "",
) -> None:
    """Partial correlation of two columns given others, with ppcor's test (as R's pcor.test/spcor.test)."""
    covariates = [name for name in covar.split(",") if name]
    frame = _read_columns(csv, [x, y, *covariates])
    try:
        result = stats.partial_corr(
            frame[x],
            frame[y],
            frame[covariates] if covariates else None,
            method=method,  # type: ignore[arg-type]
            semi=semi or None,  # type: ignore[arg-type]
        )
    except GengenError as error:
        raise InputError(f"{csv}: {_in_columns(str(error), x, y, covariates)}") from None
    from gengen._pfloor import p_text

    typer.echo(f"r = {result.r:.7g}  statistic = {result.statistic:.7g}  p = {p_text(result.p_value, 7)}")
    typer.echo(
        f"n = {result.n}  k = {result.k}  df = {result.df:g}  method = {result.method}"
        f"  {result.ci_level:.0%} CI = [{result.ci[0]:.4f}, {result.ci[1]:.4f}]"
    )


def register(app: typer.Typer) -> None:
    app.command("partial-corr")(partial_corr_command)
