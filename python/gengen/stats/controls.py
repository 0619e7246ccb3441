"""The control of a statistic as a typed value: :class:`Linear` or :class:`Gam`, checked once when made.

Every function of :mod:`gengen.stats` that regresses covariates out takes ``fit=``: a control value
(``fit=Gam(k=6, method="reml")``) or the name ``"linear"`` or ``"gam"`` (the GAM with its defaults). The GAM's
options as keywords beside the name (``fit="gam", k=6, gam_method="reml"``) are deprecated: they still give the
same value, with a ``FutureWarning`` naming the control to pass instead (:func:`keyword_control`). The
function converts its argument once and hands the one value to the Rust core (``gengen._core``), whose binding
turns it into the core's ``Control::{Linear, Gam(GamOptions)}``: no name or option is checked twice.

This module imports nothing heavy (no numpy), so option layers and the command line can build controls.
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final, TypeAlias

from gengen.errors import InvalidArgumentError
from gengen.stats.options import (
    DEFAULT_GAM_BASIS,
    DEFAULT_GAM_K,
    DEFAULT_GAM_MAX_EDF,
    DEFAULT_GAM_METHOD,
    FITS,
    GAM_BASES,
    GAM_METHODS,
    GAM_OPTIONS,
    Fit,
    GamBasis,
    GamMaxEdf,
    GamMethod,
)

__all__ = [
    "MAX_GAM_K",
    "MIN_GAM_K",
    "Control",
    "FitArgument",
    "Gam",
    "Linear",
    "as_control",
    "gam_of",
    "keyword_control",
]

#: The smallest basis dimension of a penalised cubic regression spline.
MIN_GAM_K: Final = 3
#: The largest basis dimension: far beyond what a run's checkpoints support (the core lowers k to the distinct
#: control values), and small enough that no later step overflows (``k = 2**64`` did, in the Rust core).
MAX_GAM_K: Final = 200

#: The keyword option of ``fit="gam"`` that sets each field of :class:`Gam` (for errors in the caller's terms).
_KEYWORD_OF: Final = {"k": "k", "method": "gam_method", "basis": "gam_basis", "max_edf": "max_edf"}


@dataclass(frozen=True)
class Linear:
    """The linear control: least squares on ``[1, covar]`` (ppcor's).

    Examples
    --------
    >>> from gengen.stats import Linear
    >>> Linear().name
    'linear'
    """

    #: The control's name, as results and tables record it.
    name: ClassVar[str] = "linear"


@dataclass(frozen=True)
class Gam:
    """The GAM control: an intercept plus one penalised regression spline per covariate (mgcv's ``gam``).

    Parameters
    ----------
    k : int, default 10
        Basis dimension per covariate (mgcv's ``k``), from 3 to 200; the core lowers it to what the data support.
    method : {"gcv", "reml"}, default "gcv"
        Smoothing-parameter criterion (mgcv's ``method = "GCV.Cp"`` or ``"REML"``).
    basis : {"cr", "tp"}, default "cr"
        Spline basis (mgcv's ``bs``): cubic regression or thin plate.
    max_edf : float, "auto" or None, default "auto"
        Cap on each fit's effective degrees of freedom, intercept included: ``"auto"`` for
        :func:`gengen.stats.default_max_edf` of the data, a number (at least 1 + q), or None for no cap.

    Raises
    ------
    InvalidArgumentError
        When a field is out of range or not one of its choices; the error's ``option`` names the field.

    Examples
    --------
    >>> from gengen.stats import Gam
    >>> Gam(k=6, method="reml")
    Gam(k=6, method='reml', basis='cr', max_edf='auto')
    >>> Gam(k=2)
    Traceback (most recent call last):
    ...
    gengen.errors.InvalidArgumentError: k must be an integer >= 3, got 2
    """

    k: int = DEFAULT_GAM_K
    method: GamMethod = DEFAULT_GAM_METHOD
    basis: GamBasis = DEFAULT_GAM_BASIS
    max_edf: GamMaxEdf = DEFAULT_GAM_MAX_EDF

    #: The control's name, as results and tables record it.
    name: ClassVar[str] = "gam"

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", _check_k(self.k))
        _check_choice("method", self.method, GAM_METHODS)
        _check_choice("basis", self.basis, GAM_BASES)
        object.__setattr__(self, "max_edf", _check_max_edf(self.max_edf))

    def keywords(self) -> dict[str, Any]:
        """The control as the keyword options of ``fit="gam"`` (``k``, ``gam_method``, ``gam_basis``, ``max_edf``).

        Returns
        -------
        dict
            One entry per field, keyed by its keyword option.
        """
        return {keyword: getattr(self, field) for field, keyword in _KEYWORD_OF.items()}


#: A statistic's control.
Control: TypeAlias = Linear | Gam
#: What a statistic's ``fit=`` takes: a control value or its name (the GAM's options then as keywords).
FitArgument: TypeAlias = Linear | Gam | Fit


def as_control(fit: FitArgument, gam_options: Mapping[str, Any] | None = None) -> Control:
    """The control a statistic was asked for: a control value as given, or the one a name and options describe.

    Parameters
    ----------
    fit : Linear, Gam, "linear" or "gam"
        The control, or its name.
    gam_options : mapping, optional
        With ``fit="gam"``, the keyword options ``k``, ``gam_method``, ``gam_basis`` and ``max_edf`` (defaults
        for those left out); none with ``"linear"`` or a control value (which carries its own).

    Returns
    -------
    Linear or Gam
        The checked control.

    Raises
    ------
    InvalidArgumentError
        For an unknown name or option, a GAM option without ``fit="gam"``, or an option out of range; the
        error's ``option`` is the keyword at fault.

    Examples
    --------
    >>> from gengen.stats.controls import as_control
    >>> as_control("gam", {"k": 6})
    Gam(k=6, method='gcv', basis='cr', max_edf='auto')
    >>> as_control("linear")
    Linear()
    """
    options = dict(gam_options or {})
    unknown = sorted(set(options) - set(GAM_OPTIONS))
    if unknown:
        raise InvalidArgumentError(
            option=unknown[0], problem=f"is not an option; the GAM options are {', '.join(GAM_OPTIONS)}"
        )
    if isinstance(fit, Linear | Gam):
        if options:
            name = sorted(options)[0]
            raise InvalidArgumentError(
                option=name, problem="is given twice: set it in the control value (Gam(...)) instead"
            )
        return fit
    if not isinstance(fit, str) or fit not in FITS:
        raise InvalidArgumentError(option="fit", problem=f'must be "linear", "gam", Linear() or Gam(...), got {fit!r}')
    if fit == "linear":
        if options:
            raise InvalidArgumentError(option=sorted(options)[0], problem='is a GAM option and needs fit="gam"')
        return Linear()
    return gam_of(options)


def keyword_control(fit: FitArgument, gam_options: Mapping[str, Any]) -> Control:
    """The control of a public statistic's ``fit=`` and its deprecated ``**gam_options`` keywords.

    The same value as :func:`as_control`; when GAM options came as keywords, a ``FutureWarning`` pointing at
    the user's call names the statistic and the control value to pass instead (``fit=Gam(k=6, ...)``): the
    controls are the one way GAM options travel, and the keywords will be removed.

    Parameters
    ----------
    fit : Linear, Gam, "linear" or "gam"
        The statistic's ``fit=``.
    gam_options : mapping
        Its ``**gam_options`` keywords (``k``, ``gam_method``, ``gam_basis``, ``max_edf``).

    Returns
    -------
    Linear or Gam
        The checked control.

    Raises
    ------
    InvalidArgumentError
        As :func:`as_control` (before any warning).

    Examples
    --------
    >>> import warnings
    >>> from gengen.stats.controls import keyword_control
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     control = keyword_control("gam", {"k": 6})
    >>> control, caught[0].category.__name__
    (Gam(k=6, method='gcv', basis='cr', max_edf='auto'), 'FutureWarning')
    """
    control = as_control(fit, gam_options)
    if gam_options:
        function, stacklevel = _public_caller()
        given = ", ".join(f"{name}={value!r}" for name, value in gam_options.items())
        warnings.warn(
            f"gengen.stats.{function}: GAM options as keywords ({given}) are deprecated and will be removed; "
            f"pass fit={control!r} instead",
            FutureWarning,
            stacklevel=stacklevel,
        )
    return control


_STATS = Path(__file__).resolve().parent


def _public_caller() -> tuple[str, int]:
    """The outermost function of :mod:`gengen.stats` on the stack (the one the user called) and the
    ``stacklevel`` of its caller, for a warning raised by :func:`keyword_control`."""
    frame = sys._getframe(1)  # keyword_control, whose warnings.warn is stacklevel 1
    level, name = 1, "?"
    while frame.f_back is not None and Path(frame.f_code.co_filename).resolve().parent == _STATS:
        name = frame.f_code.co_name
        frame = frame.f_back
        level += 1
    return name, level


def gam_of(options: Mapping[str, Any]) -> Gam:
    """The :class:`Gam` control that the keyword options of ``fit="gam"`` describe (defaults for those left out).

    Parameters
    ----------
    options : mapping
        Any of ``k``, ``gam_method``, ``gam_basis`` and ``max_edf``.

    Returns
    -------
    Gam
        The checked control.

    Raises
    ------
    InvalidArgumentError
        For an option out of range; its ``option`` is the keyword (``gam_method``), not the field (``method``).
    """
    fields = {field: options[keyword] for field, keyword in _KEYWORD_OF.items() if keyword in options}
    try:
        return Gam(**fields)
    except InvalidArgumentError as error:
        keyword = _KEYWORD_OF.get(error.option or "", error.option)
        raise InvalidArgumentError(option=keyword, problem=error.problem, hint=error.hint) from None


def _check_k(value: Any) -> int:
    try:
        k = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        k = None
    if k is None or k < MIN_GAM_K:
        raise InvalidArgumentError(option="k", problem=f"must be an integer >= {MIN_GAM_K}, got {value!r}")
    if k > MAX_GAM_K:
        raise InvalidArgumentError(option="k", problem=f"must be at most {MAX_GAM_K}, got {value!r}")
    return k


def _check_choice(field: str, value: Any, choices: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:
        expected = ", ".join(repr(choice) for choice in choices)
        raise InvalidArgumentError(option=field, problem=f"must be one of {expected}, got {value!r}")


def _check_max_edf(value: Any) -> GamMaxEdf:
    """``"auto"``, None (no cap), or a number (the core refuses one below 1 + q, which depends on the data)."""
    if value is None:
        return None
    if isinstance(value, str) and value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(float(value)):
        raise InvalidArgumentError(option="max_edf", problem=f'must be a number, "auto" or None, got {value!r}')
    return float(value)
