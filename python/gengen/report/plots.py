"""The report's figures on their own, as matplotlib Figures of an analysis or a comparison.

Re-exported by :mod:`gengen.report` (``from gengen.report import plot_heatmaps``). The three figures of one
run share their parameters and return value, written once in :data:`_RUN_DOC`; the two figures of a comparison
share theirs in :data:`_COMPARISON_DOC`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.report import figures as fig

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from gengen.across.compare import Comparison
    from gengen.analyse.result import Analysis

#: The Returns section of every figure.
_RETURNS = """Returns
-------
matplotlib.figure.Figure
    The figure, not shown or saved (``figure.savefig(path)`` writes it).
"""

#: Docstring of the figures of one run: ``{summary}`` and ``{extra}`` (more parameters) filled in per figure.
_RUN_DOC = (
    """{summary}

Parameters
----------
analysis : Analysis
    From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
model : str
    The model whose run is drawn.
run : str, optional
    Needed only when ``model`` has several runs.{extra}

"""
    + _RETURNS
)

#: Docstring of the figures of a comparison: ``{summary}`` filled in per figure.
_COMPARISON_DOC = (
    """{summary}

Parameters
----------
comparison : Comparison
    From :func:`gengen.across.compare.compare`.

"""
    + _RETURNS
)


def plot_heatmaps(analysis: Analysis, value: str = "r_partial") -> Figure:
    """Per-group heatmaps of one pairs-table column side by side, with a dot on significant pairs.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
    value : str
        The column drawn (``"r_partial"``, ``"r_raw"``, ...).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved (``figure.savefig(path)`` writes it).
    """
    return fig.heatmaps(analysis, value=value)


def plot_raw_vs_partial(analysis: Analysis, model: str, run: str | None = None) -> Figure:
    return fig.raw_vs_partial(analysis, *analysis.resolve(model, run))


plot_raw_vs_partial.__doc__ = _RUN_DOC.format(
    summary="Raw and partial correlation heatmaps of one run, side by side (test sets clustered).", extra=""
)


def plot_residuals(
    analysis: Analysis, model: str, run: str | None = None, pairs: list[tuple[str, str]] | None = None
) -> Figure:
    return fig.residual_scatter(analysis, *analysis.resolve(model, run), pairs=pairs)


plot_residuals.__doc__ = _RUN_DOC.format(
    summary="Scatter plots of the residuals (after regressing out ID) of chosen pairs of one run, coloured by step.",
    extra="\npairs : list of (str, str), optional\n    The pairs drawn (default the run's strongest partial "
    "correlations).",
)


def plot_trajectories(analysis: Analysis, model: str, run: str | None = None) -> Figure:
    return fig.trajectories(analysis, *analysis.resolve(model, run))


plot_trajectories.__doc__ = _RUN_DOC.format(
    summary="ID and the OOD test sets whose scores move most, over the steps of one run.", extra=""
)


def plot_agreement(comparison: Comparison) -> Figure:
    return fig.agreement(comparison)


plot_agreement.__doc__ = _COMPARISON_DOC.format(
    summary="The cross-group agreement figure: partial correlations pair by pair, with Mantel r, p and sign agreement."
)


def plot_agreement_matrix(comparison: Comparison) -> Figure:
    from gengen.report.comparison_figures import agreement_matrix

    return agreement_matrix(comparison)


plot_agreement_matrix.__doc__ = _COMPARISON_DOC.format(summary="Model × model matrices of Mantel r and sign agreement.")


def plot_forest(analysis: Analysis, testset_a: str, testset_b: str) -> Figure:
    """Forest plot of one pair across models: estimate and interval per model, the common estimate, Q and p.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse`.
    testset_a, testset_b : str
        The pair.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved.
    """
    from gengen.across.heterogeneity import group_estimates
    from gengen.report.comparison_figures import forest

    return forest(group_estimates(analysis.pairs), testset_a, testset_b)


def plot_progress(analysis: Analysis, testsets: list[str] | None = None) -> Figure:
    """Scores over training of every run on its training progress (step / last step), one panel per test set.

    Parameters
    ----------
    analysis : Analysis
        From :func:`gengen.analyse` (or :meth:`Analysis.from_dir`).
    testsets : list of str, optional
        The OOD test sets drawn beside ID (default those whose scores move most).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, not shown or saved: runs of a model share its colour, each in its own shade and dash,
        named in the legend.
    """
    from gengen.report.trajectories import progress_figure

    return progress_figure(analysis, testsets)
