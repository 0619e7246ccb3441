"""No p-value is written as 0: the smallest p any table of gengen holds is :data:`P_FLOOR`.

A p-value of exactly 0 claims a certainty no test has. Resampling p-values cannot reach 0 by construction
(``(b + 1)/(B + 1)``, whose floor 1/(B + 1) is the method's resolution); analytic tails (Student's t, F, χ², the
normal) underflow to 0.0 below about 1e-308 when the statistic is huge. Every p-value column of the tables that
are written (the pairs and pooled tables, the verdict's and the comparison's) goes through
:func:`floor_p_columns`: a p below :data:`P_FLOOR` is stored as :data:`P_FLOOR` and read as "< 1e-300"
(:func:`p_text`); an exact tail above it is kept as computed.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

__all__ = ["P_FLOOR", "floor_p_columns", "is_p_column", "p_text"]

#: The smallest p-value written: p-values below it (an analytic tail that underflows) are stored as it.
P_FLOOR = 1e-300

_P_COLUMN = re.compile(r"(^p$)|(^p_)|(_p$)|(_p_)")


def is_p_column(name: object) -> bool:
    """Whether a column named ``name`` holds p-values (``p``, ``p_*``, ``*_p``, ``*_p_*``; not ``*_method``)."""
    text = str(name)
    return bool(_P_COLUMN.search(text)) and not text.endswith(("_method", "_from", "_floor"))


def floor_p_columns(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every p-value below :data:`P_FLOOR` in its numeric p-value columns raised to it (NaN kept;
    the table itself when nothing is that small)."""
    low = {}
    for name in table.columns:
        if is_p_column(name) and pd.api.types.is_float_dtype(table[name].dtype):
            values = table[name].to_numpy(dtype=float)
            with np.errstate(invalid="ignore"):
                if (values < P_FLOOR).any():
                    low[name] = np.where(values < P_FLOOR, P_FLOOR, values)
    return table.assign(**low) if low else table


def p_text(p: float, digits: int = 2) -> str:
    """A p-value as text: ``"< 1e-300"`` at the floor, else ``f"{p:.{digits}g}"``."""
    return f"< {P_FLOOR:.0e}" if np.isfinite(p) and p <= P_FLOOR else f"{p:.{digits}g}"
