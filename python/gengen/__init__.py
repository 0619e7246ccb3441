"""gengen: do your out-of-distribution results generalise?

Fine-tune and score language models across checkpoints, then measure, for every pair of out-of-distribution
test sets, how their scores move together once in-domain performance is regressed out.

``import gengen`` stays light: the statistics (``gengen.stats``, backed by the Rust extension
``gengen._core``) load here; training and scoring modules import torch only when used.
"""

from __future__ import annotations

from gengen import stats
from gengen._core import __version__
from gengen.analyse import Analysis, analyse
from gengen.compare import Comparison, compare
from gengen.errors import GengenError
from gengen.store import Store, load

__all__ = ["Analysis", "Comparison", "GengenError", "Store", "__version__", "analyse", "compare", "load", "stats"]
