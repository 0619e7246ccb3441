"""``gengen analyse``: partial correlations of every pair of OOD test sets, written to a folder.

The command's analysis options are built from the option table (:data:`gengen.analyse.options.ANALYSIS_OPTIONS`):
each entry's flag, type, default, bounds and help become one :class:`~gengen.cli._common.CliOption` (one
``typer.Option``), so that nothing about an option is written here a second time. An option's error from the
library names it by its flag (:data:`FLAGS`, rendered by :func:`gengen.cli._common.user_errors_exit`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gengen.analyse.options import ANALYSIS_OPTIONS, OPTIONS, Option
from gengen.cli._common import REQUIRED, CliOption, answer_line, check_output_folder, table_signature, user_errors_exit

#: Library option name -> this command's flag (``id_testset`` -> ``--id``).
FLAGS: dict[str, str] = {option.name: option.cli_flag for option in ANALYSIS_OPTIONS}

_LISTS = ("patterns", "metric_names")
#: Repeatable flags whose every value is kept whole (``--related-group hans=hans,hans_ln``).
_WHOLE = ("groups",)


def _annotation(option: Option) -> tuple[Any, Any]:
    """The option's command-line type and default (:data:`~gengen.cli._common.REQUIRED` for a required one)."""
    if option.kind in _LISTS or option.kind in _WHOLE:
        return list[str] | None, None
    if option.kind in ("choices", "names", "columns"):
        return str | None, None if option.default is None else ",".join(option.default)
    if option.kind == "edf":
        return str, str(option.default)
    base: Any = {"integer": int, "level": float, "flag": bool}.get(option.kind, str)
    default = REQUIRED if option.required else option.default
    return (base | None if option.optional else base), default


def cli_option(option: Option) -> CliOption:
    """The command-line declaration of one entry of the option table."""
    annotation, default = _annotation(option)
    low, high = option.bounds
    flags = (option.flag,) if option.flag else ()
    return CliOption(annotation, option.cli_help, default, flags, low, high)


def library_value(option: Option, value: Any) -> Any:
    """A command-line value as :func:`gengen.analyse` takes it: repeated and comma-separated lists as one list,
    ``--max-edf 3`` as a number (every check is the library's)."""
    if option.kind in _LISTS:
        return [item.strip() for text in value for item in text.split(",") if item.strip()] if value else None
    if option.kind in _WHOLE:
        return list(value) if value else None
    if option.kind == "edf":
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _analyse(store: Path, *, study: str | None = None, out: Path = Path("gengen-analysis"), **options: Any) -> None:
    """Correlate every pair of OOD test sets across checkpoints after regressing out the ID score.

    Writes pairs.csv/.parquet, pooled tables, scores.parquet and summary.json to --out.
    """
    from gengen.analyse import analyse
    from gengen.analyse.study import load_study_scores

    scores = load_study_scores(store, study)
    check_output_folder(out)
    values = {name: library_value(OPTIONS[name], value) for name, value in options.items()}
    analysis = analyse(scores, **values, progress=True)  # a bar on a terminal, else a line every few seconds
    analysis.to_dir(out)
    for warning in analysis.warnings:
        typer.echo(f"warning: {warning}", err=True)
    from gengen.across.verdict import build_verdict

    verdict = build_verdict(analysis, seed=values["seed"])
    verdict.to_dir(out)  # verdict.json, verdict_pairs.csv, and "verdict" in summary.json
    typer.echo(answer_line(verdict))  # the global answer first
    for line in verdict.lines():
        if not line.startswith("answer: "):
            typer.echo(line)
    ood = analysis.settings["ood_resolved"]
    typer.echo(f"OOD test sets ({len(ood)}, metric {analysis.settings['metric']}): {', '.join(ood)}")
    for group in analysis.summary()["groups"]:
        typer.echo(
            f"{group['model']} / {group['run']}: {group['n_pairs']} pairs, n = {group['n']}, "
            f"{group['n_significant']} significant ({group['n_significant_positive']} positive, "
            f"{group['n_significant_negative']} negative)"
            + (f", {group['n_untestable']} untestable" if group.get("n_untestable") else "")
        )
    typer.echo(f"wrote {out}")


#: The command's parameters, in the order of its help: the store, every analysis option from the table,
#: ``--study`` and ``--out``.
PARAMETERS: dict[str, CliOption] = {
    "store": CliOption(Path, "Study folder, .sqlite store, or a score table (.csv/.parquet).", REQUIRED, argument=True),
    **{option.name: cli_option(option) for option in ANALYSIS_OPTIONS},
    "study": CliOption(str | None, "The study to analyse when the store holds several (see `gengen export --study`)."),
    "out": CliOption(Path, "Output folder.", Path("gengen-analysis")),
}


analyse_command = user_errors_exit(_analyse, flags=FLAGS)
analyse_command.__signature__ = table_signature(PARAMETERS)  # type: ignore[attr-defined]


def register(app: typer.Typer) -> None:
    """Add ``gengen analyse`` to the CLI."""
    app.command("analyse")(analyse_command)
