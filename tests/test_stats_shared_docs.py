"""The stats functions' shared parameter docs (gengen.stats._docs) are filled in, whole and in place."""

from __future__ import annotations

import inspect
import re

import pytest

from gengen import stats
from gengen.stats._docs import FRAGMENTS, shared_doc


def test_no_public_docstring_keeps_a_marker() -> None:
    left = [name for name in stats.__all__ if "%(" in (inspect.getdoc(getattr(stats, name)) or "")]
    assert not left, left


def test_a_fragment_stands_whole_at_the_markers_indentation() -> None:
    doc = stats.permutation_test_batch.__doc__ or ""
    expected = "\n".join("    " + line for line in FRAGMENTS["runs"].splitlines())
    assert expected in doc
    assert re.search(r"^    \*\*gam_options\n        Deprecated: ``k``", doc, re.MULTILINE)


def test_an_unknown_fragment_fails_when_the_function_is_defined() -> None:
    def f() -> None:
        """Nothing.

        Parameters
        ----------
        %(no_such_fragment)s
        """

    with pytest.raises(KeyError, match="no_such_fragment"):
        shared_doc(f)
