"""A study's scores to its report: analyse, compare, state the verdict, report — what ``gengen run`` and the demo
end with.

This is the one module that chains the three steps; :mod:`gengen.analyse`, :mod:`gengen.across.compare` and
:mod:`gengen.report` each know only the data they are given (the report reads the analysis and comparison,
never the other way round).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["run_study_analysis"]


def run_study_analysis(
    store_path: str | Path,
    out_dir: str | Path,
    id_testset: str,
    *,
    log: Callable[[str], None] | None = None,
    **options: Any,
) -> Path:
    """Load a store, analyse it, compare the groups, state the verdict and write the report.

    Parameters
    ----------
    store_path : str or Path
        Study folder, ``*.sqlite`` store, or score-table file (see :func:`gengen.analyse.load_scores`).
    out_dir : str or Path
        Folder for ``pairs.csv``, ``summary.json``, the comparison tables, ``report.html`` and ``figures/``.
    id_testset : str
        The in-domain test set.
    log : callable, optional
        Called with each line of the verdict (e.g. ``print``); the verdict is also in ``summary.json``,
        ``verdict.json`` and at the top of the report.
    **options
        Passed to :func:`gengen.analyse` (e.g. ``metric``, ``n_perm``, ``ood``).

    Returns
    -------
    Path
        The report's path (``out_dir/report.html``).
    """
    from gengen.across.compare import compare
    from gengen.across.verdict import build_verdict
    from gengen.analyse import analyse, load_scores
    from gengen.report.build import report

    analysis = analyse(load_scores(store_path), id_testset=id_testset, **options)
    analysis.to_dir(out_dir)
    comparison = compare(analysis)
    comparison.to_dir(out_dir)
    verdict = build_verdict(analysis)
    verdict.to_dir(out_dir)
    if log is not None:
        from gengen.report.page import answer_of

        lines = verdict.lines()
        if not lines or not lines[0].startswith("answer: "):  # the sentence first, once (lines() may open with it)
            lines.insert(0, f"answer: {answer_of(verdict)}")
        for line in lines:  # then the counts and figures behind it
            log(line)
    return report(analysis, comparison, out_dir, verdict=verdict)
