"""Which OOD test sets move together once ID performance is accounted for: the per-pair analysis.

``gengen.analyse(df, id_testset=...)`` returns an :class:`Analysis` with the per-pair table, the pooled
(meta-analysis and pooled-residuals) tables and warnings; :func:`gengen.pipeline.run_study_analysis` goes from a
store to the report in one call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gengen.stats._lazy import lazy_names

if TYPE_CHECKING:
    from gengen.analyse.core import PAIR_COLUMNS, analyse, analyse_group
    from gengen.analyse.options import LOWER_IS_BETTER, Settings
    from gengen.analyse.result import Analysis, package_versions
    from gengen.analyse.study import load_scores
    from gengen.stats.meta import MetaResult, fisher_meta

# Public name -> the module defining it, imported on first use (PEP 562): the command line reads the analysis'
# option vocabulary from gengen.analyse.options without loading numpy, pandas and the statistics.
_MODULE_OF: dict[str, str] = {
    "PAIR_COLUMNS": "gengen.analyse.core",
    "analyse": "gengen.analyse.core",
    "analyse_group": "gengen.analyse.core",
    "LOWER_IS_BETTER": "gengen.analyse.options",
    "Settings": "gengen.analyse.options",
    "Analysis": "gengen.analyse.result",
    "package_versions": "gengen.analyse.result",
    "load_scores": "gengen.analyse.study",
    "MetaResult": "gengen.stats.meta",
    "fisher_meta": "gengen.stats.meta",
}

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


__getattr__, __dir__ = lazy_names(__name__, _MODULE_OF, globals(), __all__)
