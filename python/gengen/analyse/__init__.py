"""Which OOD test sets move together once ID performance is accounted for: the per-pair analysis.

``gengen.analyse(df, id_testset=...)`` returns an :class:`Analysis` with the per-pair table, the pooled
(meta-analysis and pooled-residuals) tables and warnings; :func:`gengen.pipeline.run_study_analysis` goes from a
store to the report in one call.
"""

from __future__ import annotations

from gengen.analyse.core import PAIR_COLUMNS, analyse, analyse_group
from gengen.analyse.options import LOWER_IS_BETTER, Settings
from gengen.analyse.result import Analysis, package_versions
from gengen.analyse.study import load_scores
from gengen.stats.meta import MetaResult, fisher_meta

__all__ = [
    "LOWER_IS_BETTER",
    "PAIR_COLUMNS",
    "Analysis",
    "MetaResult",
    "Settings",
    "analyse",
    "analyse_group",
    "fisher_meta",
    "load_scores",
    "package_versions",
]
