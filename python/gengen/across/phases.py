r"""Does a pair align early in training and decouple late? The partial correlation of each phase, compared.

Each run's checkpoints are split into an early and a late phase (:func:`phase_labels`):

* ``split="fraction"``: by training progress, :math:`f = (s - s_\min) / (s_\max - s_\min)` of the run's steps
  :math:`s`; early when :math:`f \le` ``at``;
* ``split="id"``: by progress of the in-domain score, :math:`g_t = (\max_{u \le t} y_u - y_1) / (\max_u y_u -
  y_1)` (the share of the run's ID gain reached by checkpoint :math:`t`); early while :math:`g_t <` ``at``.

Each phase is analysed on its own with :func:`gengen.analyse` (the same options, so the same AR-sieve inference),
and for each run and pair (:func:`compare_phases`):

.. math::

    d = \operatorname{artanh} r_\text{early} - \operatorname{artanh} r_\text{late}, \quad
    \mathrm{se}_d = \sqrt{\mathrm{se}_{z,\text{early}}^2 + \mathrm{se}_{z,\text{late}}^2}, \quad
    p = 2\,\Phi(-|d| / \mathrm{se}_d),

adjusted across the pairs of each run with the analysis' method. The two phases are disjoint stretches of one
series, so their estimates are treated as independent (the dependence through the checkpoints next to the split
is small when each phase has many checkpoints). The same difference is also given per model, each phase's
estimate pooled over the model's seeds as in :func:`gengen.across.heterogeneity.group_estimates` (``level="model"``).
The calibration under the null (no difference between phases) is in ``docs/calibration.md``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gengen import _core
from gengen.across.per_pair import oriented_pairs
from gengen.errors import GengenError
from gengen.stats.pfloor import floor_p_columns

if TYPE_CHECKING:
    from gengen.analyse.result import Analysis

__all__ = ["PHASE_COLUMNS", "SPLITS", "PhaseComparison", "compare_phases", "parse_phases", "phase_labels"]

SPLITS = ("fraction", "id")
#: Fewest checkpoints a run may have in one phase.
MIN_PHASE_CHECKPOINTS = 8
#: The options of an analysis that its phase analyses repeat (when recorded in its settings).
FORWARDED = (
    "metric",
    "id_metric",
    "fit",
    "method",
    "inference",
    "scheme",
    "block_length",
    "n_perm",
    "n_boot",
    "ci_level",
    "adjust",
    "alpha",
    "lower_is_better",
    "higher_is_better",
    "seed",
)
PHASE_COLUMNS = (
    "level",
    "model",
    "run",
    "testset_a",
    "testset_b",
    "n_early",
    "n_late",
    "r_early",
    "r_late",
    "se_z_early",
    "se_z_late",
    "z_difference",
    "se_difference",
    "statistic",
    "p_phase",
    "p_phase_adjusted",
    "significant_phase",
)


def parse_phases(text: str) -> tuple[str, float]:
    """``"fraction:0.5"`` or ``"id:0.8"`` as (split, at).

    Parameters
    ----------
    text : str
        ``SPLIT[:AT]``, SPLIT one of :data:`SPLITS`, AT in (0, 1) (default 0.5).

    Returns
    -------
    tuple of (str, float)
        The split and the point.

    Examples
    --------
    >>> parse_phases("id:0.8")
    ('id', 0.8)
    """
    split, _, at = text.partition(":")
    split = split.strip()
    if split not in SPLITS:
        raise GengenError(f"option phases: {text!r} does not start with one of {', '.join(SPLITS)}")
    try:
        point = float(at) if at.strip() else 0.5
    except ValueError:
        raise GengenError(f"option phases: {at!r} is not a number (expected e.g. fraction:0.5)") from None
    if not 0.0 < point < 1.0:
        raise GengenError(f"option phases: the split point must lie strictly between 0 and 1, got {point}")
    return split, point


def phase_labels(
    scores: pd.DataFrame, *, id_testset: str, split: str = "fraction", at: float = 0.5, id_metric: str | None = None
) -> pd.Series:
    """``"early"`` or ``"late"`` for every row of a long score table (the same for all test sets of a checkpoint).

    Parameters
    ----------
    scores : DataFrame
        Long scores: ``model, run, step, testset, value`` (and ``metric``).
    id_testset : str
        The in-domain test set (for ``split="id"``).
    split : {"fraction", "id"}
        By the share of the run's steps, or of its ID gain.
    at : float
        The split point, in (0, 1).
    id_metric : str, optional
        The ID score's metric when the table has several.

    Returns
    -------
    Series
        Aligned with ``scores``.

    Examples
    --------
    >>> import pandas as pd
    >>> scores = pd.DataFrame({"model": "m", "run": "r", "step": [0, 10, 20, 30], "testset": "id",
    ...                        "value": [0.1, 0.5, 0.6, 0.9]})
    >>> phase_labels(scores, id_testset="id", split="id", at=0.5).tolist()
    ['early', 'late', 'late', 'late']
    """
    if split not in SPLITS:
        raise GengenError(f"option phases: {split!r} is not one of {', '.join(SPLITS)}")
    if not 0.0 < at < 1.0:
        raise GengenError(f"option phases: the split point must lie strictly between 0 and 1, got {at}")
    early_steps: dict[tuple[Any, Any], set[Any]] = {}
    for (model, run), rows in scores.groupby(["model", "run"], sort=False):
        steps = np.sort(rows["step"].unique())
        if split == "fraction":
            span = steps[-1] - steps[0]
            fraction = (steps - steps[0]) / span if span > 0 else np.zeros(len(steps))
            early = steps[fraction <= at]
        else:
            id_rows = rows[rows["testset"] == id_testset]
            if id_metric is not None and "metric" in id_rows.columns:
                id_rows = id_rows[id_rows["metric"] == id_metric]
            if id_rows.empty:
                raise GengenError(f"option phases: run {model}/{run} has no score on {id_testset!r}")
            curve = id_rows.groupby("step")["value"].mean().sort_index()
            best = np.maximum.accumulate(curve.to_numpy(dtype=float))
            gain = best[-1] - curve.iloc[0]
            progress = (best - curve.iloc[0]) / gain if gain > 0 else np.zeros(len(best))
            early = curve.index.to_numpy()[progress < at]
        early_steps[(model, run)] = set(early.tolist())
    keys = list(zip(scores["model"], scores["run"], scores["step"], strict=True))
    return pd.Series(
        ["early" if step in early_steps[(model, run)] else "late" for model, run, step in keys],
        index=scores.index,
        name="phase",
    )


@dataclass
class PhaseComparison:
    """Result of :func:`compare_phases`.

    Attributes
    ----------
    table : DataFrame
        One row per level (``"run"``, ``"model"``) × group × pair: the columns of :data:`PHASE_COLUMNS`.
    early, late : Analysis
        The analyses of each phase.
    settings : dict
        ``split``, ``at``, ``alpha``, ``adjust`` and the checkpoints per phase of each run.
    """

    table: pd.DataFrame
    early: Analysis
    late: Analysis
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dir(self, out: str | Path) -> dict[str, Path]:
        """Write ``compare_phases.csv`` to ``out``.

        Parameters
        ----------
        out : str or Path
            The folder.

        Returns
        -------
        dict
            File role → path.
        """
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        from gengen._files import inside

        path = inside(folder, "compare_phases.csv")
        floor_p_columns(self.table).to_csv(path, index=False)  # no p written as 0
        return {"compare_phases.csv": path}


def _difference(
    early: pd.DataFrame, late: pd.DataFrame, keys: list[str], alpha: float, adjust: str, group: list[str]
) -> pd.DataFrame:
    """Merge the two phases' (r, se_z, n) on ``keys`` and test the z difference, adjusted within ``group``."""
    from gengen.stats import p_adjust

    merged = early.merge(late, on=keys, suffixes=("_early", "_late"))
    with np.errstate(invalid="ignore", divide="ignore"):
        z_early = np.arctanh(merged["r_early"].to_numpy(dtype=float))
        z_late = np.arctanh(merged["r_late"].to_numpy(dtype=float))
        se = np.sqrt(merged["se_z_early"].to_numpy(dtype=float) ** 2 + merged["se_z_late"].to_numpy(dtype=float) ** 2)
        statistic = (z_early - z_late) / se
    p = np.array([float(_core.normal_two_sided(x)) if np.isfinite(x) else np.nan for x in statistic])
    merged["z_difference"] = z_early - z_late
    merged["se_difference"] = se
    merged["statistic"] = statistic
    merged["p_phase"] = p
    adjusted = np.full(len(merged), np.nan)
    for index in merged.groupby(group, sort=False).indices.values():
        adjusted[index] = p_adjust(p[index], adjust)  # type: ignore[arg-type]
    merged["p_phase_adjusted"] = adjusted
    merged["significant_phase"] = adjusted < alpha
    return merged


def _run_rows(analysis: Analysis) -> pd.DataFrame:
    rows = analysis.pairs[analysis.pairs["level"] == "run"]
    if "testable" in rows.columns:
        rows = rows[rows["testable"].fillna(True).astype(bool)]
    rows = oriented_pairs(rows)
    se = rows["se_z"] if "se_z" in rows.columns else pd.Series(np.nan, index=rows.index)
    return pd.DataFrame(
        {
            "model": rows["model"],
            "run": rows["run"],
            "testset_a": rows["testset_a"],
            "testset_b": rows["testset_b"],
            "n": rows["n"],
            "r": rows["r_partial"],
            "se_z": se,
        }
    )


def _model_rows(analysis: Analysis) -> pd.DataFrame:
    from gengen.across.heterogeneity import group_estimates

    estimates = group_estimates(analysis.pairs)
    return pd.DataFrame(
        {
            "model": estimates["unit"],
            "run": "pooled",
            "testset_a": estimates["testset_a"],
            "testset_b": estimates["testset_b"],
            "n": estimates["n_runs"],
            "r": estimates["r"],
            "se_z": np.sqrt(estimates["variance"]),
        }
    )


def compare_phases(
    source: pd.DataFrame | Analysis,
    *,
    id_testset: str | None = None,
    split: str = "fraction",
    at: float = 0.5,
    **options: Any,
) -> PhaseComparison:
    """Analyse the early and late checkpoints of every run apart, and test each pair's difference between them.

    Parameters
    ----------
    source : DataFrame or Analysis
        A long score table (as for :func:`gengen.analyse`), or an analysis whose scores and options are reused.
    id_testset : str, optional
        The in-domain test set (needed with a score table).
    split : {"fraction", "id"}
        Phases by the share of the run's steps or of its ID gain (:func:`phase_labels`).
    at : float
        The split point, in (0, 1).
    **options
        Passed to :func:`gengen.analyse` for both phases (with an analysis: its recorded options, which these
        override).

    Returns
    -------
    PhaseComparison
        The per-run and per-model differences (``table``) and both phases' analyses.

    Examples
    --------
    >>> from gengen.calibration.simulate import simulate_trajectories
    >>> scores = simulate_trajectories(n=40, n_testsets=2, phi=0.3, seed=2)
    >>> phases = compare_phases(scores, id_testset="id", metric="accuracy", n_boot=199)
    >>> phases.table[["level", "n_early", "n_late"]].values.tolist()
    [['run', 20, 20], ['model', 1, 1]]
    """
    from gengen.analyse import analyse

    if isinstance(source, pd.DataFrame):
        if id_testset is None:
            raise GengenError("option id_testset: needed to split a score table into phases")
        scores = source
        forwarded: dict[str, Any] = {}
    else:
        settings = source.settings
        id_testset = id_testset or str(settings["id_testset"])
        accepted = set(inspect.signature(analyse).parameters)
        forwarded = {key: settings[key] for key in FORWARDED if key in settings and key in accepted}
        forwarded["ood"] = list(settings.get("ood_resolved", [])) or None
        # the stored scores are sign-adjusted (lower-is-better metrics negated): undo it, analyse negates again
        scores = source.scores.drop(columns=["role"], errors="ignore")
        if "sign" in scores.columns:
            scores = scores.assign(value=scores["value"] * scores["sign"]).drop(columns="sign")
    forwarded.update(options)
    forwarded["pooling"] = None
    phase = phase_labels(scores, id_testset=id_testset, split=split, at=at, id_metric=forwarded.get("id_metric"))
    counts: dict[str, dict[str, int]] = {}
    for (model, run), rows in scores.assign(phase=phase).groupby(["model", "run"], sort=False):
        per_phase = rows.groupby("phase")["step"].nunique().to_dict()
        counts[f"{model}/{run}"] = {name: int(per_phase.get(name, 0)) for name in ("early", "late")}
        for name in ("early", "late"):
            if per_phase.get(name, 0) < MIN_PHASE_CHECKPOINTS:
                raise GengenError(
                    f"option phases: run {model}/{run} has {per_phase.get(name, 0)} checkpoint(s) in its {name} "
                    f"phase ({split}:{at}); each phase needs {MIN_PHASE_CHECKPOINTS}: move the split point"
                )
    early = analyse(scores[phase == "early"], id_testset=id_testset, **forwarded)
    late = analyse(scores[phase == "late"], id_testset=id_testset, **forwarded)
    alpha = float(early.settings.get("alpha", 0.05))
    adjust = str(early.settings.get("adjust", "holm"))
    adjust = "holm" if adjust == "maxT" else adjust
    keys = ["model", "run", "testset_a", "testset_b"]
    tables = []
    for level, rows_of in (("run", _run_rows), ("model", _model_rows)):
        table = _difference(rows_of(early), rows_of(late), keys, alpha, adjust, ["model", "run"])
        tables.append(table.assign(level=level))
    table = pd.concat(tables, ignore_index=True)
    return PhaseComparison(
        table=table[list(PHASE_COLUMNS)],
        early=early,
        late=late,
        settings={"split": split, "at": at, "alpha": alpha, "adjust": adjust, "checkpoints": counts},
    )
