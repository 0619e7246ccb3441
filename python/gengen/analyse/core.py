"""The per-pair table: for every group and pair of OOD test sets, raw and partial correlation with tests.

Every number comes from :mod:`gengen.stats`: the partial correlations, t statistics and p-values from
:func:`~gengen.stats.partial_corr_matrix` (raw correlations: the same without covariates); Fisher-z
intervals from :func:`~gengen.stats.partial_corr`; permutation p-values from :func:`~gengen.stats.permutation_test`
(Freedman–Lane); bootstrap intervals from :func:`~gengen.stats.bootstrap_ci`; adjusted p-values from
:func:`~gengen.stats.p_adjust`; residuals for the autocorrelation check from
:func:`~gengen.stats.residualise`.

:func:`analyse` is the sequence of named steps: check the options (:mod:`gengen.analyse.options`), prepare the
scores and their groups (:mod:`gengen.analyse.data`), choose each group's control, build each group's pairs
(:mod:`gengen.analyse.pairs`, from :mod:`~gengen.analyse.group_plan`, :mod:`~gengen.analyse.inference`,
:mod:`~gengen.analyse.untestable` and :mod:`~gengen.analyse.leave_one_out`), then pool
(:mod:`gengen.analyse.pooled`). The names those modules define are importable from here too.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from gengen.analyse.across_runs import across_run_groups, is_single_score_per_run
from gengen.analyse.data import Group, prepare, run_groups
from gengen.analyse.group_plan import (
    GROUP_MODES,
    PAIR_COLUMNS,
    GroupMode,
    GroupPlan,
    check_size,
    group_mode,
    minimum_rows,
    pair_columns,
    plan_group,
)
from gengen.analyse.group_pool import map_groups, worker_count
from gengen.analyse.inference import uncalibrated_path_warning
from gengen.analyse.options import (
    DEFAULT_BY,
    AnalyseOptions,
    ResolvedMode,
    Settings,
    make_settings,
    options_signature,
)
from gengen.analyse.pairs import analyse_group, independence_methods, repeated_diagnostics
from gengen.analyse.pooled import meta_table, pooled_residual_groups
from gengen.analyse.related import mark_related, measurement_sd, related_pairs, stacked_series
from gengen.analyse.result import Analysis
from gengen.analyse.runs import CONDITION, label_keys, pooled_over, with_run_design
from gengen.stats.control_choice import CurvatureTest, choose_pooled_control, curvature_test
from gengen.stats.options import Fit, FitChoice
from gengen.stats.pfloor import floor_p_columns

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; the annotation is never evaluated

__all__ = [
    "GROUP_MODES",
    "PAIR_COLUMNS",
    "GroupMode",
    "GroupPlan",
    "analyse",
    "analyse_group",
    "check_size",
    "control_summary",
    "group_control",
    "group_controls",
    "group_mode",
    "independence_methods",
    "minimum_rows",
    "plan_group",
    "repeated_diagnostics",
]


def _usable(group: Group) -> list[str]:
    """The group's test sets that are testable (no untestable reason): those its control is chosen from."""
    return [name for name in group.scores.columns if not getattr(group.information.get(name), "reason", "")]


def _cell_key(group: Group, settings: Settings) -> tuple[Any, ...]:
    """The pooling cell a group belongs to (its ``by`` values; runs of one cell are seeds of one condition)."""
    return (group.level, *(str(group.meta.get(column)) for column in settings.by))


def group_controls(groups: Sequence[Group], settings: Settings) -> list[Group]:
    """Under ``fit="auto"``, every group with its control chosen (``Group.control``): once per pooling cell,
    from all its runs' curvature evidence (:func:`gengen.stats.choose_pooled_control`), so that the runs of one
    condition share one control and no run's control follows its own noise. Other fits: ``groups`` unchanged."""
    if settings.fit != "auto":
        return list(groups)
    cells: dict[tuple[Any, ...], list[int]] = {}
    for number, group in enumerate(groups):
        cells.setdefault(_cell_key(group, settings), []).append(number)
    controls: dict[int, tuple[str, str]] = {}
    for members in cells.values():
        fit, reason = _cell_control([groups[number] for number in members])
        controls.update(dict.fromkeys(members, (fit, reason)))
    return [replace(group, control=controls[number]) for number, group in enumerate(groups)]


def _cell_control(groups: list[Group]) -> tuple[str, str]:
    """The control of one pooling cell's groups and why: each run's curvature test on its testable test sets
    (NaN for the others), Stouffer-pooled per test set over the runs that could test it."""
    names = list(dict.fromkeys(name for group in groups for name in _usable(group)))
    tests = []
    for group in groups:
        usable = _usable(group)
        if not usable or len(group.id_values) < minimum_rows(1):
            continue
        test = curvature_test(group.scores[usable].to_numpy(dtype=float), group.id_values)
        tests.append(_aligned(test, [names.index(name) for name in usable], len(names)))
    if not tests:
        return "linear", "too few testable test sets or checkpoints to test for curvature; linear control"
    unit = "seed" if groups[0].level == "run" else "group"
    choice = choose_pooled_control(tests, unit=unit)
    return choice.fit, choice.reason


def _aligned(test: CurvatureTest, where: list[int], m: int) -> CurvatureTest:
    """``test`` (of some test sets) spread over all ``m`` of the cell's, at positions ``where`` (NaN elsewhere)."""

    def spread(values: np.ndarray) -> np.ndarray:
        out = np.full(m, np.nan)
        out[where] = values
        return out

    return CurvatureTest(spread(test.statistic), spread(test.p_value), test.df, spread(test.phi), spread(test.phi_raw))


def group_control(group: Group, settings: Settings) -> tuple[Settings, str]:
    """The settings one group is analysed with, and why: under ``fit="auto"``, the control
    :func:`group_controls` chose for its pooling cell (chosen for the group alone when it has none yet)."""
    if settings.fit != "auto":
        return settings, ""
    fit, reason = group.control or _cell_control([group])
    return replace(settings, fit=cast(Fit, fit), fit_chosen=True), f"fit='auto': {reason}"


def group_pairs(group: Group, settings: Settings) -> tuple[pd.DataFrame, list[str], FitChoice]:
    """One group's pairs table (:func:`analyse_group` under :func:`group_control`'s control, with
    ``fit_reason``), its warnings and the control it got: the work of one turn of the group loop."""
    group_settings, reason = group_control(group, settings)
    table, warnings = analyse_group(group, group_settings)
    if reason and len(table):
        table["fit_reason"] = reason
    return table, warnings, group_settings.fit


def control_summary(groups: list[Group], chosen: Sequence[str]) -> str:
    """One line: which control ``fit="auto"`` gave how many groups (the reasons are in ``fit_reason``)."""
    gam = [group.label for group, fit in zip(groups, chosen, strict=True) if fit == "gam"]
    if not gam:
        return (
            f"control (fit='auto'): linear for all {len(groups)} groups (no majority of test sets curves in ID over "
            "their condition's seeds)"
        )
    shown = "; ".join(gam[:3]) + (f"; … ({len(gam) - 3} more)" if len(gam) > 3 else "")
    return (
        f"control (fit='auto'): the capped GAM for {len(gam)} of {len(groups)} groups, where most test sets curve "
        f"in ID over their condition's seeds ({shown}); linear for the rest (fit_reason says why per row; "
        "--fit linear or --fit gam to choose)"
    )


#: Seconds between progress lines when stderr is not a terminal (a log file, a pipe, a batch job).
PROGRESS_EVERY = 5.0


def _progress(items: Iterable[Any], total: int, *, enabled: bool, description: str) -> Iterable[Any]:
    """Iterate ``items`` (``total`` of them), with a rich progress bar on stderr when ``enabled``: on a terminal
    a bar, otherwise a line ``analyse: [k/total] description`` at most every :data:`PROGRESS_EVERY` seconds and
    at the end (a long analysis sent to a file used to print nothing for half a minute)."""
    if not enabled:
        return items
    if not sys.stderr.isatty():
        return _progress_lines(items, total, description)
    from rich.progress import track

    return track(items, total=total, description=description, transient=True)


def _progress_lines(items: Iterable[Any], total: int, description: str) -> Iterator[Any]:
    last = time.monotonic()
    done = 0
    for item in items:
        yield item
        done += 1
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY or done == total:
            print(f"analyse: [{done}/{total}] {description}", file=sys.stderr, flush=True)
            last = now


def analyse(df: pd.DataFrame, *, progress: bool = False, **options: Unpack[AnalyseOptions]) -> Analysis:
    r"""Partial correlations of every pair of OOD test sets, controlling for ID performance.

    For each run (model, run), the OOD scores across its checkpoints are correlated pairwise after the ID
    score has been regressed out (linear or GAM fit); each pair gets the raw and the partial correlation, the
    t statistic with its degrees of freedom and p-value, a permutation p-value, a bootstrap interval and an
    adjusted p-value, with the method that produced each. Runs of the same ``by`` cell are then pooled.

    Parameters
    ----------
    df : DataFrame
        The score table (columns ``model, run, step, testset, metric, value``; others such as ``size``,
        ``seed``, ``shots`` are carried along).
    id_testset : str
        The in-domain test set whose score is regressed out.
    ood : str or list of str, optional
        OOD test sets (comma-separated string or list); default every other test set with ``metric``.
    metric : str
        Metric of the OOD scores.
    id_metric : str, optional
        Metric of the ID score (default ``metric``).
    fit : {"auto", "linear", "gam"}, Linear or Gam
        How ID is regressed out: least squares on [1, ID], a penalised regression spline of ID whose effective
        degrees of freedom are capped (:func:`gengen.stats.default_max_edf`), or (default) per group the one
        :func:`gengen.stats.choose_pooled_control` picks once per condition (``by`` cell) from all its seeds' curvature
        tests: the GAM when most test sets (and at least two) curve in ID at a pooled p ≤ 0.20, else the line
        (``fit`` then records the choice and ``fit_reason`` why). A control value (``gengen.Linear()``,
        ``gengen.Gam(k=5)``) is taken as in :mod:`gengen.stats`: the GAM's settings come with it.
    method : {"pearson", "spearman", "kendall"}
        Correlation.
    inference : str or list of str
        Any of ``"sieve"`` (default), ``"lagged"``, ``"t-test"``, ``"permutation"``, ``"bootstrap"``. The first
        of sieve, lagged, permutation, t-test that was asked for gives the p-value that is adjusted and decides
        ``significant`` (across runs and for pooled residuals, which have no order, the permutation or t-test
        p). The sieve (:mod:`gengen.stats.sieve`) tests ``r_partial`` itself with an AR-sieve standard error that
        stays valid on autocorrelated trajectories and gives its interval (``ci_low``, ``ci_high``); the lagged
        test is about another estimand, the correlation of the innovations (``r_innovation``), and has its own
        interval columns. Each row names its ``estimand``, the deciding p and its method, and ``diagnostics``
        where the default's assumptions look doubtful (docs/analysis.md, docs/calibration.md).
    scheme : {"block", "circular", "free", "iid"}
        Resampling scheme of the permutation test and the bootstrap (``free`` and ``iid`` are the same
        independent scheme). Block schemes respect the autocorrelation of checkpoint trajectories.
    block_length : int, optional
        Block length (default :func:`gengen.stats.default_block_length` of the number of checkpoints).
    n_perm, n_boot : int
        Permutations, and sieve or bootstrap resamples, per group.
    ci_level : float
        Confidence level of intervals.
    boot_ci_method : {"percentile", "bca"}
        Bootstrap interval.
    adjust : str
        Multiple-testing adjustment across the pairs of each group (R ``p.adjust`` names).
    alpha : float
        Level for the ``significant`` column.
    by : str or list of str, optional
        Run attributes that define a pooling cell: runs of the same cell are pooled (in across-run mode a cell
        is one group). Any column of the score table (study, model, family, size, shots, seed, data_seed, run…)
        or key of the run labels (``lr`` of ``"lr=1e-4,seed=1"``); default model, size and shots (those the
        table has). Runs of different conditions are never pooled (:mod:`gengen.analyse.runs`): the cells are
        split by ``condition`` whatever ``by`` says.
    replicate_key : str or list of str
        The run attributes that vary between replicates of one condition (default ``seed`` and ``data_seed``;
        ``"run"``: the run labels themselves name replicates). Every other attribute is the run's condition.
    pooling : str or list of str, optional
        ``"meta"`` (Fisher-z fixed and random effects with I², in :attr:`Analysis.pooled`) and/or
        ``"residuals"`` (residualise within each run and correlate the pooled residuals, in
        :attr:`Analysis.pooled_residuals`); empty for none.
    mode : {"auto", "checkpoints", "across_runs"}
        ``auto`` correlates across runs when every run has a single step, else across checkpoints.
    lower_is_better, higher_is_better : list of str, optional
        Metric names (or name parts) to read as lower- or higher-is-better, beyond the name parts of
        :data:`~gengen.analyse.options.LOWER_IS_BETTER` (see :func:`~gengen.analyse.options.is_lower_better`
        and the sign convention in :mod:`gengen.analyse.data`); ``higher_is_better`` wins.
    models, runs, sizes, shots : str or list, optional
        Analyse only the rows whose model, run key, size or shot count matches one of these glob patterns
        (``"pythia-*"``, ``"seed=[0-4]"``, ``64``); each pattern must match something.
    seed : int
        Seed of every permutation and bootstrap.
    leave_one_out : bool
        No single checkpoint decides a verdict: a run's deciding p-value (sieve, or t-test) is the largest over
        the full estimate and every deletion of one checkpoint (``p_loo_max``, with ``influential_step``), and
        its interval the hull of theirs (:func:`gengen.stats.leave_one_out_test`). Default True.
    min_step : int, optional
        Leave out the checkpoints before this step (``1`` leaves out step 0, the model before fine-tuning).
        Default: every checkpoint, as the paper scores step 0 (the leave-one-out rule keeps its jump from
        deciding a verdict on its own).
    gam_k : int
        The GAM control's basis dimension (mgcv's ``k``, default 10), wherever the control is a GAM (the lagged
        test keeps its own small basis, k = 5).
    gam_method : {"gcv", "reml"}
        The GAM's smoothing-parameter criterion.
    gam_basis : {"cr", "tp"}
        The GAM's basis.
    max_edf : float, "auto" or None
        Cap on each smooth's effective degrees of freedom: ``"auto"`` (:func:`gengen.stats.default_max_edf` of
        n), None (uncapped), or a number of at least 2.
    related_groups : mapping of str to list of str, or list of str, optional
        Declared groups of related test sets (group name -> test sets, or texts ``"NAME=A,B,..."``): every two
        of a group's test sets are related (``related_reason`` "declared group NAME").
    keep_related : bool
        Keep pairs of related test sets (splits of one task, nested sets, near-duplicate series:
        :func:`gengen.analyse.related.related_pairs`; ``related`` and ``related_reason`` in the pairs table) in the
        verdict. They are always in the pairs table.
    jobs : int, optional
        Groups analysed at once, each in a worker process (:mod:`gengen.analyse.group_pool`; the tables are the
        same for any number). Default: one per available CPU when there are at least 4 groups with enough work
        between them to pay for starting the workers, else 1 (in this process).
    progress : bool
        Show a progress bar over groups.

    Returns
    -------
    Analysis
        ``pairs`` (one row per group × pair), ``pooled``, ``pooled_residuals``, ``warnings``, ``settings``.

    Raises
    ------
    GengenError
        Unknown test set, the ID listed as OOD, a bad option, or too few checkpoints for the tests.

    Notes
    -----
    The partial correlation of OOD scores :math:`a, b` given ID score :math:`c` is the correlation of the
    residuals of :math:`a` and :math:`b` after regressing each on :math:`[1, c]`; the t statistic is
    :math:`t = r\sqrt{(n - 2 - k)/(1 - r^2)}` on :math:`n - 2 - k` degrees of freedom (ppcor's ``pcor.test``).

    Examples
    --------
    Three OOD test sets that curve in ID and share part of their noise
    (:func:`gengen.calibration.simulate.simulate_trajectories`):

    >>> import gengen
    >>> from gengen.calibration.simulate import simulate_trajectories
    >>> scores = simulate_trajectories(n=40, n_testsets=3, shape="saturating", shared=0.5, seed=0)
    >>> result = gengen.analyse(scores, id_testset="id", metric="accuracy", n_boot=199)
    >>> result.pairs[["testset_a", "testset_b", "fit", "r_partial", "p_deciding", "significant"]].round(2)
      testset_a testset_b  fit  r_partial  p_deciding  significant
    0     ood_1     ood_2  gam       0.79         0.0         True
    1     ood_1     ood_3  gam       0.57         0.0         True
    2     ood_2     ood_3  gam       0.62         0.0         True
    """
    requested: dict[str, Any] = dict(options)
    if requested.get("by") is None:  # the default cells' columns the table has, or its run labels give (five-shot)
        present = set(df.columns) | label_keys(df) if isinstance(df, pd.DataFrame) else set()
        requested["by"] = tuple(column for column in DEFAULT_BY if column in present)
    settings = make_settings(**requested)
    scores, ood_names = prepare(df, settings)
    # across runs, the runs of a cell are the observations: exchangeable, so labels need not name replicates
    across = settings.mode == "across_runs" or (settings.mode == "auto" and is_single_score_per_run(scores))
    scores, design = with_run_design(scores, settings.by, settings.replicate_key, unnamed_apart=not across)
    given = settings
    if design.has_conditions and CONDITION not in settings.by:
        settings = replace(settings, by=(*settings.by, CONDITION))  # conditions are never pooled as replicates
    resolved_mode, groups, warnings = _groups(scores, settings, ood_names)
    groups = group_controls(groups, settings)
    warnings[:0] = design.warnings
    tables, chosen = [], []
    workers = worker_count(settings.jobs, groups)
    show = partial(_progress, enabled=progress, description="analysing groups")
    for table, group_warnings, fit in map_groups(group_pairs, groups, settings, workers, show):
        tables.append(table)
        warnings.extend(group_warnings)
        chosen.append(fit)
    if settings.fit == "auto" and chosen:
        warnings.insert(0, control_summary(groups, chosen))
    if resolved_mode == "checkpoints" and (path_warning := uncalibrated_path_warning(settings)):
        warnings.insert(0, path_warning)
    pairs = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=list(PAIR_COLUMNS))
    related = related_pairs(
        ood_names,
        scores=stacked_series(scores, ood_names),
        groups=dict(settings.related_groups),
        noise=measurement_sd(scores, ood_names),
    )
    pairs = mark_related(pairs, related)
    order = pair_columns()
    extra = [column for column in settings.by if column in pairs.columns and column not in order]
    columns = [column for column in order if column in pairs.columns]
    after = columns.index("run") + 1
    pairs = pairs[[*columns[:after], *extra, *columns[after:]]]
    pooled = pd.DataFrame()
    pooled_residuals = pd.DataFrame()
    if resolved_mode == "checkpoints" and "meta" in settings.pooling:
        pooled = pooled_over(meta_table(pairs, settings), design, settings.replicate_key)
    if resolved_mode == "checkpoints" and "residuals" in settings.pooling:
        pooled_residuals = _pooled_residuals(groups, settings, chosen)
    record = replace(
        given,
        pooling_cells=settings.by,
        conditions=tuple(sorted(set(design.runs[CONDITION]) - {""})),
        mode_resolved=resolved_mode,
        ood_resolved=tuple(ood_names),
        related_pairs=tuple(related.to_dict(orient="records")),
    )
    if len(related):
        verdict_use = "kept in the verdict (keep_related)" if settings.keep_related else "left out of the verdict"
        warnings.append(
            f"{len(related)} pair(s) of related OOD test sets ({_related_summary(related)}): marked in the pairs "
            f"table's related column and {verdict_use}"
        )
    return Analysis(
        pairs=floor_p_columns(pairs),
        pooled=floor_p_columns(pooled),
        pooled_residuals=floor_p_columns(pooled_residuals),
        warnings=warnings,
        settings=record,
        scores=scores,
    )


# What help(), IDEs without PEP 692 and the numpydoc check show: every option as a keyword with its default.
analyse.__signature__ = options_signature(analyse, AnalyseOptions)  # type: ignore[attr-defined]


def _related_summary(related: pd.DataFrame) -> str:
    """'3 splits of one task, 2 nested, e.g. arc_easy_test / arc_easy_val': the kinds of related pairs."""
    kinds = related["reason"].str.split(r"[:(]", n=1, regex=True).str[0].str.strip().value_counts()
    first = related.iloc[0]
    counted = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    return f"{counted}; e.g. {first['testset_a']} / {first['testset_b']}: {first['reason']}"


def _groups(
    scores: pd.DataFrame, settings: Settings, ood: tuple[str, ...]
) -> tuple[ResolvedMode, list[Group], list[str]]:
    """The analysis' mode (``mode="auto"`` resolved), its groups (each checked for size) and their warnings."""
    mode: ResolvedMode
    if settings.mode == "auto":
        mode = "across_runs" if is_single_score_per_run(scores) else "checkpoints"
    else:
        mode = settings.mode
    if mode == "across_runs":
        groups, warnings = across_run_groups(scores, settings, ood)
    else:
        groups, warnings = run_groups(scores, settings, ood)
    for group in groups:
        check_size(group, 1)
    return mode, groups, warnings


def _pooled_residuals(groups: list[Group], settings: Settings, chosen: list[FitChoice]) -> pd.DataFrame:
    """The pairs of each cell's pooled within-run residuals (under ``fit="auto"``, the control most runs got)."""
    pooled_settings = replace(settings, fit=max(set(chosen), key=chosen.count)) if settings.fit == "auto" else settings
    tables = []
    for group, covar, note, residuals in pooled_residual_groups(groups, pooled_settings):
        table, _ = analyse_group(group, pooled_settings, covar=covar, residuals=residuals, p_value_note=note)
        tables.append(table)
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
