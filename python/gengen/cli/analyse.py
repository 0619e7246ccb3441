"""``gengen analyse``: partial correlations of every pair of OOD test sets, written to a folder."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from gengen.analyse.options import (
    ADJUST_METHODS,
    ANALYSIS_FITS,
    DEFAULT_ALPHA,
    DEFAULT_ANALYSIS_FIT,
    DEFAULT_BY,
    DEFAULT_INFERENCE,
    DEFAULT_LEAVE_ONE_OUT,
    DEFAULT_METRIC,
    DEFAULT_MODE,
    DEFAULT_POOLING,
    DEFAULT_SCHEME,
    MODES,
    POOLING,
)
from gengen.cli._common import SEED_RANGE, check_output_folder, either, user_errors_exit
from gengen.errors import GengenError
from gengen.limits import MAX_RESAMPLES
from gengen.stats.options import (
    DEFAULT_ADJUSTMENT,
    DEFAULT_CI_LEVEL,
    DEFAULT_GAM_BASIS,
    DEFAULT_GAM_K,
    DEFAULT_GAM_MAX_EDF,
    DEFAULT_GAM_METHOD,
    DEFAULT_METHOD,
    DEFAULT_N_BOOT,
    DEFAULT_N_PERM,
    GAM_BASES,
    GAM_METHODS,
    METHODS,
)

#: Library option names whose flag is not ``--`` plus the name with ``-`` for ``_``.
OPTION_FLAGS = {"id_testset": "--id", "models": "--model", "runs": "--run", "sizes": "--size", "shots": "--shots"}


def cli_terms(message: str) -> str:
    """A library error message with its option names written as this command's flags (``option id_testset``
    -> ``--id``)."""

    def flag(name: str) -> str:
        return OPTION_FLAGS.get(name, "--" + name.replace("_", "-"))

    message = re.sub(r"\boption ([a-z_]+)\b", lambda m: flag(m.group(1)), message)
    return re.sub(r"\((id_testset|lower_is_better|higher_is_better)\)", lambda m: f"({flag(m.group(1))})", message)


def _max_edf(text: str) -> float | str | None:
    """``--max-edf``: auto, none, or a number (checked by the analysis)."""
    if text.lower() in ("auto", "none"):
        return text.lower()
    try:
        return float(text)
    except ValueError:
        raise GengenError(f"--max-edf: expected auto, none or a number, got {text!r}") from None


def _names(values: list[str] | None) -> list[str] | None:
    """Repeated and comma-separated option values as one list (None when not given)."""
    if not values:
        return None
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


@user_errors_exit
def analyse_command(
    store: Annotated[Path, typer.Argument(help="Study folder, .sqlite store, or a score table (.csv/.parquet).")],
    id_testset: Annotated[str, typer.Option("--id", help="The in-domain test set whose score is regressed out.")],
    ood: Annotated[str | None, typer.Option(help="OOD test sets, comma-separated (default: all others).")] = None,
    metric: Annotated[str, typer.Option(help="Metric of the OOD scores.")] = DEFAULT_METRIC,
    id_metric: Annotated[str | None, typer.Option(help="Metric of the ID score (default: --metric).")] = None,
    fit: Annotated[
        str,
        typer.Option(
            help=f"How ID is regressed out: {either(ANALYSIS_FITS)} (auto: per run, the capped GAM when most test "
            "sets curve in ID, else linear)."
        ),
    ] = DEFAULT_ANALYSIS_FIT,
    method: Annotated[str, typer.Option(help=f"{either(METHODS)}.")] = DEFAULT_METHOD,
    inference: Annotated[
        str,
        typer.Option(
            help="Comma-separated: sieve (default: AR-sieve test and interval of r_partial, calibrated for "
            "autocorrelated checkpoints), lagged (tests r_innovation, another estimand), t-test, permutation, "
            "bootstrap. The first of sieve, lagged, permutation, t-test decides 'significant'."
        ),
    ] = ",".join(DEFAULT_INFERENCE),
    scheme: Annotated[str, typer.Option(help="Resampling scheme: block, circular, free (= iid).")] = DEFAULT_SCHEME,
    block_length: Annotated[int | None, typer.Option(help="Block length (default: from n).")] = None,
    n_perm: Annotated[int, typer.Option(help="Permutations per group.", max=MAX_RESAMPLES)] = DEFAULT_N_PERM,
    n_boot: Annotated[
        int, typer.Option(help="Sieve and bootstrap resamples per group.", max=MAX_RESAMPLES)
    ] = DEFAULT_N_BOOT,
    adjust: Annotated[str, typer.Option(help=f"p-value adjustment: {', '.join(ADJUST_METHODS)}.")] = DEFAULT_ADJUSTMENT,
    alpha: Annotated[float, typer.Option(help="Significance level on adjusted p-values.")] = DEFAULT_ALPHA,
    ci_level: Annotated[
        float,
        typer.Option(help="Level of the intervals (the deciding p is below 1 - level exactly when they exclude 0)."),
    ] = DEFAULT_CI_LEVEL,
    by: Annotated[
        str | None,
        typer.Option(help=f"Columns defining a pooling cell, comma-separated (default: {','.join(DEFAULT_BY)})."),
    ] = None,
    pooling: Annotated[str, typer.Option(help=f"{', '.join(POOLING)}, both comma-separated, or none.")] = ",".join(
        DEFAULT_POOLING
    ),
    mode: Annotated[str, typer.Option(help=f"{either(MODES)}.")] = DEFAULT_MODE,
    model: Annotated[
        list[str] | None, typer.Option("--model", help="Analyse only these models (glob; repeatable).")
    ] = None,
    run: Annotated[list[str] | None, typer.Option("--run", help="Analyse only these runs (glob; repeatable).")] = None,
    size: Annotated[
        list[str] | None, typer.Option("--size", help="Analyse only these model sizes (glob; repeatable).")
    ] = None,
    shots: Annotated[
        list[str] | None, typer.Option("--shots", help="Analyse only these shot counts (glob; repeatable).")
    ] = None,
    lower_is_better: Annotated[
        list[str] | None,
        typer.Option(
            "--lower-is-better",
            help="Metric names (or name parts) to negate, beyond loss, perplexity, ppl, bpb, error... (repeatable).",
        ),
    ] = None,
    higher_is_better: Annotated[
        list[str] | None,
        typer.Option(
            "--higher-is-better", help="Metric names (or name parts) never to negate; wins over the rule (repeatable)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every permutation and bootstrap.", **SEED_RANGE)] = 0,
    leave_one_out: Annotated[
        bool,
        typer.Option(
            help="No single checkpoint decides a verdict: the deciding p is the largest over deleting any one "
            "checkpoint (--no-leave-one-out: the full estimate's p alone)."
        ),
    ] = DEFAULT_LEAVE_ONE_OUT,
    min_step: Annotated[
        int | None,
        typer.Option(
            help="Leave out checkpoints before this step (1 leaves out step 0, the model before training).", min=0
        ),
    ] = None,
    gam_k: Annotated[
        int, typer.Option(help="GAM control: basis dimension (mgcv's k).", min=3, max=200)
    ] = DEFAULT_GAM_K,
    gam_method: Annotated[str, typer.Option(help=f"GAM control: smoothing criterion, {either(GAM_METHODS)}.")] = (
        DEFAULT_GAM_METHOD
    ),
    gam_basis: Annotated[str, typer.Option(help=f"GAM control: basis, {either(GAM_BASES)}.")] = DEFAULT_GAM_BASIS,
    max_edf: Annotated[
        str,
        typer.Option(
            help="GAM control: cap on each smooth's effective degrees of freedom: auto (from n), none, or a number."
        ),
    ] = str(DEFAULT_GAM_MAX_EDF),
    out: Annotated[Path, typer.Option(help="Output folder.")] = Path("gengen-analysis"),
) -> None:
    """Correlate every pair of OOD test sets across checkpoints after regressing out the ID score.

    Writes pairs.csv/.parquet, pooled tables, scores.parquet and summary.json to --out.
    """
    from gengen.analyse import analyse, load_scores

    scores = load_scores(store)
    check_output_folder(out)
    try:
        analysis = analyse(
            scores,
            id_testset=id_testset,
            ood=ood,
            metric=metric,
            id_metric=id_metric,
            fit=fit,
            method=method,
            inference=inference,
            scheme=scheme,
            block_length=block_length,
            n_perm=n_perm,
            n_boot=n_boot,
            adjust=adjust,
            alpha=alpha,
            ci_level=ci_level,
            by=by,
            pooling=None if pooling == "none" else pooling,
            mode=mode,
            seed=seed,
            leave_one_out=leave_one_out,
            min_step=min_step,
            gam_k=gam_k,
            gam_method=gam_method,
            gam_basis=gam_basis,
            max_edf=_max_edf(max_edf),
            models=_names(model),
            runs=_names(run),
            sizes=_names(size),
            shots=_names(shots),
            lower_is_better=_names(lower_is_better),
            higher_is_better=_names(higher_is_better),
            progress=sys.stderr.isatty(),
        )
    except GengenError as error:
        raise GengenError(cli_terms(str(error))) from None
    analysis.to_dir(out)
    for warning in analysis.warnings:
        typer.echo(f"warning: {warning}", err=True)
    for group in analysis.summary()["groups"]:
        typer.echo(
            f"{group['model']} / {group['run']}: {group['n_pairs']} pairs, n = {group['n']}, "
            f"{group['n_significant']} significant ({group['n_significant_positive']} positive, "
            f"{group['n_significant_negative']} negative)"
            + (f", {group['n_untestable']} untestable" if group.get("n_untestable") else "")
        )
    from gengen.verdict import build_verdict

    verdict = build_verdict(analysis, seed=seed)
    verdict.to_dir(out)  # verdict.json, verdict_pairs.csv, and "verdict" in summary.json
    typer.echo(f"wrote {out}")
    for line in verdict.lines():
        typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add ``gengen analyse`` to the CLI."""
    app.command("analyse")(analyse_command)
