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


#: The column whose values name the model of each row (as in gengen's score tables).
MODEL_COLUMN = "model"


def _one_model(path: Path, frame: pd.DataFrame, model: str | None) -> pd.DataFrame:
    """The rows of ``model`` (all rows when None)."""
    if model is None:
        return frame
    chosen = frame[frame[MODEL_COLUMN].astype(str) == model]
    if chosen.empty:
        known = sorted(frame[MODEL_COLUMN].astype(str).unique())
        raise InputError(f"{path}: --model {model!r} is not in its model column (models: {', '.join(known)})")
    return chosen


def _refuse_several_models(path: Path, x: str, y: str, covariates: list[str], method: str) -> None:
    """Refuse a file whose ``model`` column names several models, with each model's r (pooling mixes them:
    two models at r = -0.79 and +0.37 pooled to -0.33)."""
    from gengen._files import read_csv

    frame = read_csv(path)
    if MODEL_COLUMN not in frame.columns or frame[MODEL_COLUMN].nunique() < 2:
        return
    values = []
    for name, rows in frame.groupby(MODEL_COLUMN, sort=True):
        try:
            result = stats.partial_corr(
                rows[x],
                rows[y],
                rows[covariates] if covariates else None,
                method=method,  # type: ignore[arg-type]
            )
            values.append(f"{name}: r = {result.r:+.3f}, n = {result.n}")
        except GengenError:
            values.append(f"{name}: n = {len(rows)}, too few rows")
    raise InputError(
        f"{path}: holds {len(values)} models ({'; '.join(values)}); one correlation over all of them mixes "
        "theirs: name one with --model"
    )


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
    model: Annotated[
        str | None,
        typer.Option(
            help="Only the rows whose 'model' column is this model. Required when the file holds several models: "
            "pooling them mixes their correlations."
        ),
    ] = None,
) -> None:
    """Partial correlation of two columns given others, with ppcor's test (as R's pcor.test/spcor.test)."""
    covariates = [name for name in covar.split(",") if name]
    frame = _one_model(csv, _read_columns(csv, [x, y, *covariates, *([MODEL_COLUMN] if model else [])]), model)
    if model is None:
        _refuse_several_models(csv, x, y, covariates, method)
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
    from gengen.stats.pfloor import p_text

    typer.echo(f"r = {result.r:.7g}  statistic = {result.statistic:.7g}  p = {p_text(result.p_value, 7)}")
    typer.echo(
        f"n = {result.n}  k = {result.k}  df = {result.df:g}  method = {result.method}"
        f"  {result.ci_level:.0%} CI = [{result.ci[0]:.4f}, {result.ci[1]:.4f}]"
    )


def register(app: typer.Typer) -> None:
    app.command("partial-corr")(partial_corr_command)
