"""The options of :func:`gengen.analyse`: one table, checked once and carried as one frozen record.

:data:`ANALYSIS_OPTIONS` declares every option once (name, kind, default, choices or bounds, help, flag, whether
a study file takes it). :func:`make_settings` checks options against it, ``gengen analyse`` builds its flags
from it (:mod:`gengen.cli.analyse`), a study file's ``[analysis]`` table reads its keys through
:func:`study_options`, and :class:`Settings` carries the checked values. Every option is validated before any
number is computed, so that a bad option fails fast with one line naming it (:class:`gengen.errors.GengenError`
with ``option`` set, which each front end renders in its own terms: ``n_perm``, ``--n-perm``,
``analysis.gam_k``).

This module imports nothing heavy: the command line builds its options from it without loading numpy.
"""

from __future__ import annotations

import inspect
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from numbers import Integral as _Integral
from numbers import Real as _Real
from typing import Any, Final, Literal, TypedDict, get_args

from gengen.errors import GengenError
from gengen.stats.controls import MAX_GAM_K, MIN_GAM_K, Control, Gam, Linear
from gengen.stats.limits import MAX_RESAMPLES
from gengen.stats.options import (
    DEFAULT_ADJUSTMENT,
    DEFAULT_CI_LEVEL,
    DEFAULT_FIT_CHOICE,
    DEFAULT_GAM_BASIS,
    DEFAULT_GAM_K,
    DEFAULT_GAM_MAX_EDF,
    DEFAULT_GAM_METHOD,
    DEFAULT_INTERVAL_METHOD,
    DEFAULT_METHOD,
    DEFAULT_N_BOOT,
    DEFAULT_N_PERM,
    FIT_CHOICES,
    INTERVAL_METHODS,
    Adjustment,
    FitChoice,
    GamBasis,
    GamMaxEdf,
    GamMethod,
    IntervalMethod,
    Method,
)
from gengen.store.run_keys import REPLICATE_KEYS

#: Name parts that make a metric lower-is-better; gengen negates such metrics so that "higher = better"
#: everywhere. A metric matches when these words appear, in order, among the words of its name (split at
#: non-alphanumerics and CamelCase, compared case-insensitively): ``CrossEntropyLoss``, ``eval/loss``,
#: ``val_bpb``, ``word_perplexity`` and ``WER`` all match; see :func:`is_lower_better`.
LOWER_IS_BETTER: frozenset[str] = frozenset(
    {
        "loss",
        "nll",
        "perplexity",
        "ppl",
        "bpb",
        "bits_per_byte",
        "error",
        "wer",
        "cer",
        "brier",
    }
)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def name_parts(name: str) -> tuple[str, ...]:
    """The lower-cased words of a name, split at non-alphanumerics and CamelCase (``"CrossEntropyLoss"`` ->
    ``("cross", "entropy", "loss")``, ``"val_BPB"`` -> ``("val", "bpb")``)."""
    return tuple(word.lower() for piece in re.split(r"[^A-Za-z0-9]+", name) for word in _WORD.findall(piece))


def _contains(words: tuple[str, ...], part: tuple[str, ...]) -> bool:
    """Whether ``part`` occurs as consecutive words of ``words``."""
    return any(words[i : i + len(part)] == part for i in range(len(words) - len(part) + 1))


def is_lower_better(metric: str, lower: Iterable[str] = LOWER_IS_BETTER, higher: Iterable[str] = ()) -> bool:
    """Whether a lower value of ``metric`` is better (gengen then negates it).

    Parameters
    ----------
    metric : str
        A metric name as stored (``"acc"``, ``"CrossEntropyLoss"``, ``"eval/val_bpb"``).
    lower : iterable of str
        Names or name parts that mark a metric lower-is-better (default :data:`LOWER_IS_BETTER`).
    higher : iterable of str
        Names or name parts that mark a metric higher-is-better; they win over ``lower``.

    Returns
    -------
    bool
        True when some entry of ``lower`` is ``metric`` (ignoring case) or its words occur, in order and
        adjacent, among the words of ``metric`` (see :func:`name_parts`), and no entry of ``higher`` does.

    Examples
    --------
    >>> is_lower_better("CrossEntropyLoss"), is_lower_better("val_bpb"), is_lower_better("acc_norm")
    (True, True, False)
    >>> is_lower_better("loss_reduction", higher=["loss_reduction"])
    False
    """
    words = name_parts(metric)

    def matches(name: str) -> bool:
        return name.lower() == metric.lower() or _contains(words, name_parts(name))

    if any(matches(name) for name in higher):
        return False
    return any(matches(name) for name in lower)


#: The tests an analysis can run on each pair, in the order the pairs table records them.
Inference = Literal["sieve", "lagged", "t-test", "permutation", "bootstrap"]
#: Resampling scheme of the permutation test and the bootstrap ("free" and "iid" are the same independent scheme).
Scheme = Literal["free", "iid", "block", "circular"]
#: R's ``p.adjust`` methods, and "maxT": the max-|r| family-wise permutation p-values.
AdjustMethod = Literal[Adjustment, "maxT"]
Pooling = Literal["meta", "residuals"]
Mode = Literal["auto", "checkpoints", "across_runs"]
#: The mode an analysis ran in, ``"auto"`` resolved.
ResolvedMode = Literal["checkpoints", "across_runs"]
#: Columns of the score table that may define pooling cells (``by``).
ByColumn = Literal["study", "model", "family", "size", "shots"]

INFERENCE_METHODS: tuple[Inference, ...] = get_args(Inference)
SCHEMES: tuple[Scheme, ...] = get_args(Scheme)
ADJUST_METHODS: tuple[AdjustMethod, ...] = get_args(AdjustMethod)
POOLING: tuple[Pooling, ...] = get_args(Pooling)
MODES: tuple[Mode, ...] = get_args(Mode)
BY_COLUMNS: tuple[ByColumn, ...] = get_args(ByColumn)
#: The bootstrap interval's choices are the statistics' (:mod:`gengen.stats.options`), as are fit's and method's.
BOOT_CI_METHODS = INTERVAL_METHODS

#: The analysis' controls: the statistics' two, and ``"auto"``, which chooses one per condition (pooling cell)
#: (:func:`gengen.stats.choose_pooled_control`: the capped GAM when most test sets curve in ID over the condition's
#: seeds, else the line).
ANALYSIS_FITS: tuple[str, ...] = FIT_CHOICES
#: The control unless told otherwise: chosen per group. Real learning curves make ID dependence curved (OLMo-2's
#: 27 downstream tasks against C4 loss: 351 of 351 pairs "significant" under the line, 82–100% of rows noted
#: non-linear); on straight dependence the choice keeps the line and its calibration (docs/calibration.md).
DEFAULT_ANALYSIS_FIT: Final = DEFAULT_FIT_CHOICE

#: The inference of the analysis unless told otherwise: the AR-sieve bootstrap of the partial correlation of
#: levels (:mod:`gengen.stats.sieve`), whose p-value and interval are about ``r_partial`` itself and which the
#: calibration study (docs/calibration.md) found to keep its type-I error on autocorrelated trajectories where
#: ppcor's t-test, block permutations and block bootstraps do not.
DEFAULT_INFERENCE: tuple[Inference, ...] = ("sieve",)
#: Block schemes respect the autocorrelation of checkpoint trajectories.
DEFAULT_SCHEME: Final = "block"
DEFAULT_POOLING: tuple[Pooling, ...] = ("meta",)
DEFAULT_MODE: Final = "auto"
DEFAULT_ALPHA: Final = 0.05
#: No single checkpoint decides a verdict: the deciding p-value of a run's row is the largest over deleting any
#: one checkpoint (docs/analysis.md, "What a row can tell").
DEFAULT_LEAVE_ONE_OUT: Final = True
DEFAULT_METRIC: Final = "acc"
#: Pooling cells when ``by`` is not given (the columns the score table has).
DEFAULT_BY: tuple[ByColumn, ...] = ("model", "size", "shots")
# ------------------------------------------------------------------------------------ the inference methods

_NA = float("nan")


@dataclass(frozen=True)
class InferenceMethod:
    """One inference method of the analysis: all the analysis needs to know of it beside the function that
    computes its columns (:data:`gengen.analyse.inference.COLUMNS_OF`). Adding a method is one entry of
    :data:`INFERENCE` (and its name in :data:`Inference`) plus that function: the deciding order, the pairs
    table's columns, the values of a row the method did not run for, where it runs and Kendall's refusal are
    read from the entry (docs/extending.md).

    Attributes
    ----------
    name : str
        The name ``inference=`` takes.
    p_column : str or None
        Its p-value's column in the pairs table (None: it gives no p-value, only an interval).
    columns : tuple of str
        Every column it adds to the pairs table, in order.
    not_applicable : mapping
        What a row gets in its columns when the method did not run for it (not asked for, or its group's level
        cannot have it): NaN for numbers, ``""`` for its method text.
    levels : tuple of str
        The group levels it runs on (``"run"``: checkpoints in order; ``"across_runs"``;
        ``"pooled_residuals"``).
    residual_based : bool
        Whether it correlates residuals (then Kendall's tau, which has no residual form, is refused with it).
    deciding_rank : int or None
        Its place in the order of the p-values that decide ``significant`` when several tests were asked for
        (0 first); None: it never decides.
    column_rank : int
        Where its columns stand among the methods' columns of the pairs table.
    estimand : str
        What its p-value is about (``r_partial``, or ``r_innovation`` for the lagged test).
    interval : tuple of str, optional
        Its columns of an interval of ``r_partial`` consistent with its p-value, when it has one: the row's
        ``ci_low``/``ci_high`` when it decides (dropped from the table afterwards).
    no_interval : str
        The row's ``ci_method`` when it decides and has no such interval.
    """

    name: str
    p_column: str | None
    columns: tuple[str, ...]
    not_applicable: Mapping[str, Any]
    levels: tuple[str, ...]
    residual_based: bool
    deciding_rank: int | None
    column_rank: int
    estimand: str = "r_partial"
    interval: tuple[str, str] | None = None
    no_interval: str = ""


#: The inference methods, in the order ``Settings.inference`` records them (the names of :data:`Inference`).
INFERENCE: dict[str, InferenceMethod] = {
    method.name: method
    for method in (
        InferenceMethod(
            "sieve",
            "p_sieve",
            ("se_z", "df_sieve", "p_sieve", "p_sieve_method", "ar_order_a", "ar_order_b", "p_null_above"),
            {"se_z": _NA, "df_sieve": _NA, "p_sieve": _NA, "p_sieve_method": "", "sieve_ci_low": _NA,
             "sieve_ci_high": _NA, "ar_order_a": _NA, "ar_order_b": _NA, "p_null_above": _NA},
            levels=("run",),
            residual_based=True,
            deciding_rank=0,
            column_rank=0,
            interval=("sieve_ci_low", "sieve_ci_high"),
        ),
        InferenceMethod(
            "lagged",
            "p_lagged",
            ("r_innovation", "df_lagged", "p_lagged", "p_lagged_method", "ci_low_innovation", "ci_high_innovation"),
            {"r_innovation": _NA, "df_lagged": _NA, "p_lagged": _NA, "p_lagged_method": "",
             "ci_low_innovation": _NA, "ci_high_innovation": _NA},
            levels=("run",),
            residual_based=True,
            deciding_rank=1,
            column_rank=4,
            estimand="r_innovation",
            no_interval="none: the lagged test is about r_innovation (its interval: ci_low_innovation, "
            "ci_high_innovation)",
        ),
        InferenceMethod(
            "t-test",
            "p_value",
            ("statistic", "p_value", "p_value_method"),
            {},  # always computed, with the correlations
            levels=("run", "across_runs", "pooled_residuals"),
            residual_based=False,
            deciding_rank=3,
            column_rank=1,
            no_interval="none: Kendall's tau has no interval consistent with its normal-approximation test",
        ),
        InferenceMethod(
            "permutation",
            "p_perm",
            ("p_perm", "p_perm_method"),
            {"p_perm": _NA, "p_perm_method": ""},
            levels=("run", "across_runs"),
            residual_based=True,
            deciding_rank=2,
            column_rank=2,
            no_interval="none: a permutation test gives no interval (ask for inference 'bootstrap': boot_ci_low, "
            "boot_ci_high)",
        ),
        InferenceMethod(
            "bootstrap",
            None,  # an interval, no p-value
            ("boot_ci_low", "boot_ci_high", "boot_ci_method", "n_boot_valid"),
            {"boot_ci_low": _NA, "boot_ci_high": _NA, "boot_ci_method": ""},
            levels=("run", "across_runs"),
            residual_based=True,
            deciding_rank=None,
            column_rank=3,
        ),
    )
}  # fmt: skip
#: The p-value that decides when no other asked for can run: ppcor's t-test's, always computed.
FALLBACK_P = "p_value"


def deciding_order() -> tuple[tuple[str, str], ...]:
    """(method, p-value column) of the methods that may decide ``significant``, best first (from
    :data:`INFERENCE`'s ``deciding_rank``)."""
    ranked = sorted((m.deciding_rank, m.name, m.p_column) for m in INFERENCE.values() if m.deciding_rank is not None)
    return tuple((name, column) for _, name, column in ranked if column)


def residual_inference() -> tuple[str, ...]:
    """The methods that correlate residuals (Kendall's partial tau has no residual form)."""
    return tuple(name for name, method in INFERENCE.items() if method.residual_based)


#: The tests that correlate residuals (all but ppcor's t-test): Kendall's partial τ has no residual form.
RESIDUAL_INFERENCE: tuple[str, ...] = residual_inference()
#: Which p-value decides ``significant`` when several tests were asked for, best first.
DECIDING_ORDER: tuple[tuple[str, str], ...] = deciding_order()

_PERMUTATION_SCHEME = {"free": "free", "iid": "free", "block": "block", "circular": "circular"}
_BOOTSTRAP_SCHEME = {"free": "iid", "iid": "iid", "block": "block", "circular": "circular"}

# ------------------------------------------------------------------------------------------ the option table

#: What an option's value is, which decides its check (:func:`check_option`) and its command-line form:
#: ``text`` a name; ``choice`` one of ``choices``; ``choices`` a comma-separated list of them; ``names`` a list
#: of test sets; ``columns`` a list of run attributes (score-table columns or run-label keys); ``groups`` named
#: lists of test sets (``NAME=A,B,...``, repeatable flag; a table in a study file); ``patterns``
#: glob patterns (repeatable flag); ``metric_names`` metric names (repeatable flag); ``integer`` a whole number
#: within ``bounds``; ``level`` a number strictly between 0 and 1; ``flag`` true or false; ``edf`` the GAM's
#: cap ("auto", "none" or a number >= 2).
Kind = Literal[
    "text",
    "choice",
    "choices",
    "names",
    "columns",
    "groups",
    "patterns",
    "metric_names",
    "integer",
    "level",
    "flag",
    "edf",
]


@dataclass(frozen=True)
class Option:
    """One option of the analysis: the single place its name, default, constraint and help are written.

    :func:`make_settings` checks it, ``gengen analyse`` builds its flag from it, a study file's ``[analysis]``
    table takes it as a key when ``study`` is set, and :class:`Settings` carries it (tests/test_analyse_options.py
    holds :func:`gengen.analyse`'s signature, the CLI, the study keys and the settings record to the table).

    Attributes
    ----------
    name : str
        The keyword of :func:`gengen.analyse` (and the key of ``summary.json``'s settings).
    kind : str
        What the value is (:data:`Kind`).
    default : object
        The value when not given (``None``: none, or derived from the data where ``help`` says so).
    help : str
        One sentence for ``--help``; ``{choices}`` is replaced by the choices.
    choices : tuple of str
        The allowed values (``choice``, ``choices``).
    bounds : tuple
        Smallest and largest allowed integer (``integer``; None: unbounded).
    optional : bool
        Whether None is allowed (the option is then left out).
    required : bool
        Whether the option must be given (no default).
    at_least : int
        Fewest names a list must hold (``choices``, ``names``).
    flag : str, optional
        The command-line flag when it is not ``--`` plus the name with dashes.
    study : bool
        Whether a study file's ``[analysis]`` table takes it as a key.
    since : str
        The gengen version that added it.
    """

    name: str
    kind: Kind
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    bounds: tuple[int | None, int | None] = (None, None)
    optional: bool = False
    required: bool = False
    at_least: int = 0
    flag: str | None = None
    study: bool = False
    since: str = "0.1.0"

    @property
    def cli_flag(self) -> str:
        """The option's command-line flag (``--id`` for ``id_testset``, ``--n-perm`` for ``n_perm``)."""
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def cli_help(self) -> str:
        """The help text with its choices written out."""
        return self.help.format(choices=", ".join(self.choices))

    def problem(self, what: str, value: Any) -> GengenError:
        """The option's error: ``<name> <what>, got <value>``."""
        return GengenError(option=self.name, problem=f"{what}, got {_shown(value)}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _names(option: Option, value: str | Iterable[Any] | None) -> tuple[str, ...]:
    """A comma-separated string or an iterable of strings as a tuple of stripped, non-empty names."""
    if value is None:
        return ()
    if not isinstance(value, str | Iterable) or isinstance(value, bytes):
        raise option.problem("must be a name or a list of names", value)
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in items:
        if not isinstance(item, str):
            raise option.problem("must hold names (str)", item)
        if item.strip():
            out.append(item.strip())
    return tuple(out)


def _check_choice(option: Option, value: Any) -> str:
    if not isinstance(value, str) or value not in option.choices:
        raise option.problem(f"must be one of {', '.join(option.choices)}", value)
    return value


def _check_choices(option: Option, value: Any) -> tuple[str, ...]:
    names = _names(option, value)
    if names == ("none",) and not option.at_least:
        return ()
    for name in names:
        _check_choice(option, name)
    if len(names) < option.at_least:
        raise option.problem(f"must list at least {option.at_least} of {', '.join(option.choices)}", value)
    return names


def _check_text(option: Option, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise option.problem("must be a non-empty name", value)
    return value


def _check_test_sets(option: Option, value: Any) -> tuple[str, ...]:
    names = _names(option, value)
    if len(names) < option.at_least:
        raise option.problem(f"needs at least {option.at_least} test sets to form a pair", value)
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise GengenError(option=option.name, problem=f"lists test set {duplicates[0]!r} twice")
    return names


def _check_columns(option: Option, value: Any) -> tuple[str, ...]:
    """Run attributes by name: checked against the score table when it is read (:func:`gengen.analyse.data.prepare`)."""
    names = _names(option, value)
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise GengenError(option=option.name, problem=f"lists {duplicates[0]!r} twice")
    return names


def _check_groups(option: Option, value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Named groups of test sets: a mapping name -> names, or texts ``"NAME=A,B,..."``; as ``((name, names), ...)``."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, str | Iterable) and not isinstance(value, bytes):
        items = []
        for text in [value] if isinstance(value, str) else list(value):
            if isinstance(text, tuple | list) and len(text) == 2 and isinstance(text[0], str):
                items.append((text[0], text[1]))  # an already checked (name, names) pair
                continue
            if not isinstance(text, str) or "=" not in text:
                raise option.problem("must be NAME=TESTSET,TESTSET,... (or a mapping of names to test sets)", text)
            name, _, members = text.partition("=")
            items.append((name, members))
    else:
        raise option.problem("must be a mapping of group names to test sets", value)
    groups = []
    for name, members in items:
        if not isinstance(name, str) or not name.strip():
            raise option.problem("needs a name for every group", name)
        names = _names(option, members)
        if len(names) < 2:
            raise option.problem(f"group {name.strip()!r} needs at least 2 test sets", members)
        groups.append((name.strip(), names))
    return tuple(groups)


def _check_patterns(option: Option, value: Any) -> tuple[str, ...]:
    """Selection patterns (globs) as a tuple of strings; integers (shot counts) are written out."""
    if isinstance(value, bool):
        raise option.problem("must be names or patterns", value)
    if isinstance(value, int):
        return (str(value),)
    if value is None or isinstance(value, str):
        return _names(option, value)
    if not isinstance(value, Iterable):
        raise option.problem("must be names or patterns", value)
    return _names(option, [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value])


def _check_metric_names(option: Option, value: Any) -> tuple[str, ...]:
    """User metric names for the sign convention; each must hold a letter or digit."""
    names = _names(option, value)
    for name in names:
        if not name_parts(name):
            raise GengenError(option=option.name, problem=f"{name!r} names no metric (it has no letters or digits)")
    return names


def _check_integer(option: Option, value: Any) -> int:
    low, high = option.bounds
    if isinstance(value, bool) or not isinstance(value, _Integral):
        raise option.problem(_integer_rule(low, high), value)
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise option.problem(_integer_rule(low, high), value)
    return number


def _integer_rule(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"must be an integer from {low} to {high}"
    if low is not None:
        return "must be a positive integer" if low == 1 else f"must be an integer >= {low}"
    return "must be an integer"


def _check_level(option: Option, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, _Real) or not 0.0 < float(value) < 1.0:
        raise option.problem("must lie strictly between 0 and 1", value)
    return float(value)


def _check_flag(option: Option, value: Any) -> bool:
    if not isinstance(value, bool):
        raise option.problem("must be true or false", value)
    return value


def _check_edf(option: Option, value: Any) -> float | str | None:
    if isinstance(value, str) and value.lower() in ("auto", "none"):
        return None if value.lower() == "none" else "auto"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, _Real):
        raise option.problem("must be 'auto', 'none' or a number of at least 2", value)
    if not (float(value) >= 2 and math.isfinite(float(value))):
        raise option.problem("must be at least 2 (a straight line's degrees of freedom)", value)
    return float(value)


_CHECKS: dict[str, Callable[[Option, Any], Any]] = {
    "text": _check_text,
    "choice": _check_choice,
    "choices": _check_choices,
    "names": _check_test_sets,
    "columns": _check_columns,
    "groups": _check_groups,
    "patterns": _check_patterns,
    "metric_names": _check_metric_names,
    "integer": _check_integer,
    "level": _check_level,
    "flag": _check_flag,
    "edf": _check_edf,
}


def check_option(option: Option, value: Any) -> Any:
    """``value`` checked against ``option`` and normalised (lists become tuples, numbers floats or ints).

    Parameters
    ----------
    option : Option
        The table's entry.
    value : object
        The value given.

    Returns
    -------
    object
        The value as :class:`Settings` records it.

    Raises
    ------
    GengenError
        With ``option`` set to the option's name and ``problem`` saying what is wrong.
    """
    if value is None and option.optional:
        return None
    return _CHECKS[option.kind](option, value)


_OPTION = "gengen.analyse.option"


def option(kind: Kind, default: Any, help: str, **rules: Any) -> Any:
    """A field of :class:`Settings` that is an option of the analysis (its field name and type give the rest).

    Parameters
    ----------
    kind : str
        What the value is (:data:`Kind`).
    default : object
        The value when not given.
    help : str
        One sentence for ``--help``.
    **rules
        The other fields of :class:`Option` (``bounds``, ``optional``, ``required``, ``at_least``, ``flag``,
        ``study``, ``since``).

    Returns
    -------
    dataclasses.Field
        A field without a default (settings are made by :func:`make_settings`), carrying the entry.
    """
    return field(metadata={_OPTION: (kind, default, help, rules)})


@dataclass(frozen=True)
class Settings:
    """Validated settings of one analysis (recorded in ``summary.json`` by :meth:`as_dict`).

    The declaration of the analysis' options: each field made by :func:`option` is one option, whose name,
    type (a ``Literal`` gives its choices), default, help and rules are written here once, in the order of
    :func:`gengen.analyse`'s keywords; :data:`ANALYSIS_OPTIONS` is read from these fields. Then ``fit_chosen``
    and what the analysis resolved from its data.
    """

    id_testset: str = option(
        "text", None, "The in-domain test set whose score is regressed out.", required=True, flag="--id"
    )
    ood: tuple[str, ...] | None = option(
        "names", None, "OOD test sets, comma-separated (default: all others).", optional=True, at_least=2
    )
    metric: str = option("text", DEFAULT_METRIC, "Metric of the OOD scores.", study=True)
    id_metric: str = option("text", None, "Metric of the ID score (default: --metric).", optional=True)
    fit: FitChoice = option(
        "choice",
        DEFAULT_ANALYSIS_FIT,
        "How ID is regressed out: {choices} (auto: per condition, the capped "
        "GAM when most test sets curve in ID over its seeds, p <= 0.20, else linear).",
        study=True,
    )
    method: Method = option("choice", DEFAULT_METHOD, "Correlation: {choices}.")
    inference: tuple[Inference, ...] = option(
        "choices",
        DEFAULT_INFERENCE,
        "Comma-separated: sieve (default: AR-sieve test and "
        "interval of r_partial, calibrated for autocorrelated checkpoints), lagged (tests r_innovation, "
        "another estimand), t-test, permutation, bootstrap. The first of sieve, lagged, permutation, t-test "
        "decides 'significant'.",
        at_least=1,
    )
    scheme: Scheme = option("choice", DEFAULT_SCHEME, "Resampling scheme: {choices} (free = iid).")
    block_length: int | None = option(
        "integer", None, "Block length (default: from n).", bounds=(1, None), optional=True
    )
    n_perm: int = option("integer", DEFAULT_N_PERM, "Permutations per group.", bounds=(1, MAX_RESAMPLES))
    n_boot: int = option(
        "integer", DEFAULT_N_BOOT, "Sieve and bootstrap resamples per group.", bounds=(1, MAX_RESAMPLES)
    )
    ci_level: float = option(
        "level",
        DEFAULT_CI_LEVEL,
        "Level of the intervals (the deciding p is below 1 - level exactly when they exclude 0).",
    )
    boot_ci_method: IntervalMethod = option("choice", DEFAULT_INTERVAL_METHOD, "Bootstrap interval: {choices}.")
    adjust: AdjustMethod = option("choice", DEFAULT_ADJUSTMENT, "p-value adjustment: {choices}.")
    alpha: float = option("level", DEFAULT_ALPHA, "Significance level on adjusted p-values.")
    by: tuple[str, ...] = option(
        "columns",
        None,
        "Run attributes defining a pooling cell, comma-separated: columns of the score "
        "table (study, model, family, size, shots, seed, data_seed, run...) or keys of run labels (lr in "
        f"'lr=1e-4,seed=1') (default: {','.join(DEFAULT_BY)}, those the table has). Runs of different "
        "conditions are never pooled, whatever it says.",
    )
    replicate_key: tuple[str, ...] = option(
        "columns",
        REPLICATE_KEYS,
        "Run attributes that vary between replicates of one "
        "condition, comma-separated (default: seed,data_seed; run: the run labels name replicates). Every other "
        "attribute of a run (shots, compute, lr, prompt...) is its condition.",
    )
    pooling: tuple[Pooling, ...] = option("choices", DEFAULT_POOLING, "{choices}, both comma-separated, or none.")
    mode: Mode = option("choice", DEFAULT_MODE, "{choices} (auto: across runs when every run has one step).")
    lower_is_better: tuple[str, ...] = option(
        "metric_names",
        None,
        "Metric names (or name parts) to negate, beyond loss, perplexity, ppl, bpb, error... (repeatable).",
    )
    higher_is_better: tuple[str, ...] = option(
        "metric_names", None, "Metric names (or name parts) never to negate; wins over the rule (repeatable)."
    )
    models: tuple[str, ...] = option("patterns", None, "Analyse only these models (glob; repeatable).", flag="--model")
    runs: tuple[str, ...] = option("patterns", None, "Analyse only these runs (glob; repeatable).", flag="--run")
    sizes: tuple[str, ...] = option(
        "patterns", None, "Analyse only these model sizes (glob; repeatable).", flag="--size"
    )
    shots: tuple[str, ...] = option(
        "patterns", None, "Analyse only these shot counts (glob; repeatable).", flag="--shots"
    )
    seed: int = option("integer", 0, "Seed of every permutation and bootstrap.", bounds=(0, 2**64 - 1))
    leave_one_out: bool = option(
        "flag",
        DEFAULT_LEAVE_ONE_OUT,
        "No single checkpoint decides a verdict: the "
        "deciding p is the largest over deleting any one checkpoint (--no-leave-one-out: the full "
        "estimate's p alone).",
    )
    min_step: int | None = option(
        "integer",
        None,
        "Leave out checkpoints before this step (1 leaves out step 0, the model before training).",
        bounds=(0, None),
        optional=True,
    )
    gam_k: int = option(
        "integer", DEFAULT_GAM_K, "GAM control: basis dimension (mgcv's k).", bounds=(MIN_GAM_K, MAX_GAM_K), study=True
    )
    gam_method: GamMethod = option(
        "choice", DEFAULT_GAM_METHOD, "GAM control: smoothing criterion, {choices}.", study=True
    )
    gam_basis: GamBasis = option("choice", DEFAULT_GAM_BASIS, "GAM control: basis, {choices}.", study=True)
    max_edf: GamMaxEdf = option(
        "edf",
        DEFAULT_GAM_MAX_EDF,
        "GAM control: cap on each smooth's effective degrees of freedom: auto (from n), none, or a number.",
        study=True,
    )
    related_groups: tuple[tuple[str, tuple[str, ...]], ...] = option(
        "groups",
        None,
        "Declared groups of related test sets, NAME=A,B,... (repeatable): "
        "their pairs are related and left out of the verdict like splits of one task.",
        study=True,
        flag="--related-group",
    )
    keep_related: bool = option(
        "flag",
        False,
        "Keep related test sets (splits of one task, nested sets, declared "
        "groups, near-duplicate series; marked in the pairs table's related column) in the verdict.",
        study=True,
    )
    jobs: int | None = option(
        "integer",
        None,
        "Groups analysed at once in worker processes (default: one per CPU when "
        "there are 4 or more groups with enough work; 1: in this process). The tables do not depend on it.",
        bounds=(1, 1024),
        optional=True,
    )
    #: Set on a group's copy of the settings when ``fit="auto"`` chose its control (then ``fit`` is the choice).
    fit_chosen: bool = False
    # What the analysis resolved from its data: set on :attr:`gengen.Analysis.settings` (empty, and
    # ``mode_resolved`` None, on settings that :func:`make_settings` made; then :meth:`as_dict` leaves them out).
    #: The columns that made the pooling cells: ``by``, and ``condition`` when runs differ in condition.
    pooling_cells: tuple[str, ...] = ()
    #: The run conditions the score table holds (``"compute=2xC"``...), sorted.
    conditions: tuple[str, ...] = ()
    #: The mode the analysis ran in (``mode="auto"`` resolved).
    mode_resolved: ResolvedMode | None = None
    #: The OOD test sets analysed, in the pairs table's order.
    ood_resolved: tuple[str, ...] = ()
    #: The pairs of related OOD test sets (``testset_a``, ``testset_b``, ``reason``), one mapping per pair.
    related_pairs: tuple[Mapping[str, Any], ...] = ()
    #: The options and resolved fields a stored ``summary.json`` did not record (written before they existed):
    #: they hold defaults here and stay out of :meth:`as_dict`, so that a record is never given a value it lacked.
    unrecorded: tuple[str, ...] = ()

    @cached_property
    def control(self) -> Control:
        """The control every statistic of the analysis takes as ``fit=`` (:class:`gengen.stats.Linear` or
        :class:`gengen.stats.Gam` with ``gam_k``, ``gam_method``, ``gam_basis`` and ``max_edf``), built once;
        ``fit="auto"`` is resolved per group first (:func:`gengen.analyse.core.group_control`)."""
        if self.fit == "auto":
            raise RuntimeError("fit='auto' has no control until a group's control is chosen (group_control)")
        return self.control_as(self.fit)

    def control_as(self, fit: str) -> Control:
        """The control ``fit`` (``"linear"`` or ``"gam"``) names, with these settings' GAM options (a stored
        analysis under ``fit="auto"`` redraws each run with the control chosen for it)."""
        return control_of(fit, asdict(self))

    @property
    def permutation_scheme(self) -> str:
        """The scheme name :func:`gengen.stats.permutation_test` takes (``iid`` becomes ``free``)."""
        return _PERMUTATION_SCHEME[self.scheme]

    @property
    def bootstrap_scheme(self) -> str:
        """The scheme name :func:`gengen.stats.bootstrap_ci` takes (``free`` becomes ``iid``)."""
        return _BOOTSTRAP_SCHEME[self.scheme]

    @property
    def p_adjust_method(self) -> Any:
        """The ``p.adjust`` method of the p-values that "maxT" does not cover (tests other than the permutation,
        pooled tables): Holm's, which controls the family-wise error rate as maxT does."""
        return "holm" if self.adjust == "maxT" else self.adjust

    @property
    def primary_p(self) -> str:
        """The column whose p-values are adjusted and decide ``significant``: the first of ``p_sieve``,
        ``p_lagged``, ``p_perm`` whose test was asked for, else the t-test's ``p_value``."""
        for name, column in deciding_order():
            if name in self.inference:
                return column
        return FALLBACK_P

    def sign(self, metric: str) -> int:
        """-1 when ``metric`` is lower-is-better (its values are negated), else +1 (see :func:`is_lower_better`)."""
        return -1 if is_lower_better(metric, self.lower_is_better, self.higher_is_better) else 1

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form, as ``summary.json`` records it (tuples become lists; the resolved fields only when the
        analysis set them; options in :attr:`unrecorded` left out)."""
        out = {
            field.name: _plain(getattr(self, field.name))
            for field in fields(self)
            if field.name not in RESOLVED_FIELDS and field.name not in self.unrecorded
        }
        out.pop("unrecorded")
        if "related_groups" in out:
            out["related_groups"] = {name: list(members) for name, members in self.related_groups}
        if "inference" in out:
            out["primary_p"] = self.primary_p
        if "scheme" in out:
            out["permutation_scheme"] = self.permutation_scheme
            out["bootstrap_scheme"] = self.bootstrap_scheme
        if self.ood_resolved:  # an analysis resolved them (it always has OOD test sets)
            out.update({name: _plain(getattr(self, name)) for name in RESOLVED_FIELDS if name not in self.unrecorded})
        return out


#: The fields of :class:`Settings` that :func:`gengen.analyse` resolves from the data, in ``summary.json``'s order.
RESOLVED_FIELDS = ("pooling_cells", "conditions", "mode_resolved", "ood_resolved", "related_pairs")


def _plain(value: Any) -> Any:
    """A settings value as JSON holds it: tuples as lists, mappings as dicts, recursively."""
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _option_table(record: type) -> tuple[Option, ...]:
    """The :class:`Option` of each field of ``record`` that :func:`option` declared, in field order; the choices
    of a ``choice`` are its ``Literal`` type's, those of ``choices`` its element type's."""
    namespace = vars(sys.modules[record.__module__])
    table = []
    for entry in fields(record):
        if _OPTION not in entry.metadata:
            continue
        kind, default, help_text, rules = entry.metadata[_OPTION]
        choices: tuple[str, ...] = ()
        if kind in ("choice", "choices"):  # only these annotations are evaluated: the CLI's start-up reads this
            annotation = eval(entry.type, namespace) if isinstance(entry.type, str) else entry.type
            choices = get_args(annotation if kind == "choice" else get_args(annotation)[0])
        table.append(Option(entry.name, kind, default, help_text, choices=choices, **rules))
    return tuple(table)


#: Every option of :func:`gengen.analyse`, in the order of its signature: the fields of :class:`Settings`.
ANALYSIS_OPTIONS: tuple[Option, ...] = _option_table(Settings)
#: The table by option name.
OPTIONS: dict[str, Option] = {option.name: option for option in ANALYSIS_OPTIONS}
#: The options a study file's ``[analysis]`` table takes as keys.
STUDY_OPTIONS: tuple[Option, ...] = tuple(option for option in ANALYSIS_OPTIONS if option.study)


class _RequiredOptions(TypedDict):
    id_testset: str


class AnalyseOptions(_RequiredOptions, total=False):
    """The keywords of :func:`gengen.analyse` as a caller gives them: one per option of :class:`Settings`, in its
    order, typed as accepted before checking (a list as a comma-separated string or any iterable; a control
    value for ``fit``); :func:`make_settings` turns them into the :class:`Settings` field types.
    tests/test_analyse_options.py holds the names and the choices to the table."""

    ood: str | Iterable[str] | None
    metric: str
    id_metric: str | None
    fit: FitChoice | Linear | Gam
    method: Method
    inference: Inference | str | Iterable[Inference]
    scheme: Scheme
    block_length: int | None
    n_perm: int
    n_boot: int
    ci_level: float
    boot_ci_method: IntervalMethod
    adjust: AdjustMethod
    alpha: float
    by: str | Iterable[str] | None
    replicate_key: str | Iterable[str]
    pooling: Pooling | str | Iterable[Pooling] | None
    mode: Mode
    lower_is_better: Iterable[str] | None
    higher_is_better: Iterable[str] | None
    models: str | Iterable[str] | None
    runs: str | Iterable[str] | None
    sizes: str | Iterable[str] | None
    shots: int | str | Iterable[int | str] | None
    seed: int
    leave_one_out: bool
    min_step: int | None
    gam_k: int
    gam_method: GamMethod
    gam_basis: GamBasis
    max_edf: float | str | None
    related_groups: Mapping[str, Iterable[str]] | Iterable[str] | None
    keep_related: bool
    jobs: int | None


def options_signature(function: Callable[..., Any], keywords: type) -> inspect.Signature:
    """``function``'s signature with its ``**options`` spelled out: one keyword-only parameter per option of the
    table, with its default (none for a required one) and its type from ``keywords``, before the function's
    other keywords.

    Parameters
    ----------
    function : callable
        A function taking the options as ``**options: Unpack[keywords]``.
    keywords : type
        The ``TypedDict`` of the options (:class:`AnalyseOptions`).

    Returns
    -------
    inspect.Signature
        What ``help()``, ``inspect.signature`` and the docs show.
    """
    own = inspect.signature(function)
    types = keywords.__annotations__
    spelled = [
        inspect.Parameter(
            option.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if option.required else option.default,
            annotation=getattr(types[option.name], "__forward_arg__", types[option.name]),
        )
        for option in ANALYSIS_OPTIONS
    ]
    positional = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    others = [p for p in own.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    positional = [p for p in positional if p.kind is not inspect.Parameter.VAR_KEYWORD]
    return own.replace(parameters=[*positional, *spelled, *others])


def settings_from_record(record: Mapping[str, Any]) -> Settings:
    """The :class:`Settings` of an analysis from its ``summary.json`` record (:meth:`Settings.as_dict`).

    Every recorded option is checked as :func:`make_settings` checks it; an option or resolved field the record
    lacks (it was written before it existed) takes its default and is listed in ``unrecorded``. The keys
    derived from others (``primary_p``, the scheme names) and keys of no option are not read.

    Parameters
    ----------
    record : mapping
        The ``settings`` object of ``summary.json``; ``id_testset`` and ``ood_resolved`` are required.

    Returns
    -------
    Settings
        The settings, with the resolved fields (``ood_resolved``, ``mode_resolved``...) as recorded.

    Raises
    ------
    GengenError
        With ``option`` set to the first key that is missing or holds a value the analysis does not take.
    """
    for required in ("id_testset", "ood_resolved"):
        if required not in record:
            raise GengenError(option=required, problem="is missing from the record")
    values: dict[str, Any] = {}
    for option in ANALYSIS_OPTIONS:
        given = record.get(option.name)
        if option.name == "by" and given is None:
            given = ()  # recorded as the cells' columns; never None after an analysis resolved it
        values[option.name] = check_option(option, given if option.name in record else option.default)
    values["id_metric"] = values["id_metric"] or values["metric"]
    if "lower_is_better" not in record:
        values["lower_is_better"] = tuple(sorted(LOWER_IS_BETTER))
    fit_chosen = record.get("fit_chosen", False)
    if not isinstance(fit_chosen, bool):
        raise GengenError(option="fit_chosen", problem=f"must be true or false, got {_shown(fit_chosen)}")
    mode = record.get("mode_resolved")
    if mode is not None and mode not in get_args(ResolvedMode):
        raise GengenError(option="mode_resolved", problem=f"must be checkpoints or across_runs, got {_shown(mode)}")
    related = record.get("related_pairs", [])
    if not isinstance(related, list) or not all(isinstance(pair, Mapping) for pair in related):
        raise GengenError(option="related_pairs", problem=f"must be a list of objects, got {_shown(related)}")
    return Settings(
        **values,
        fit_chosen=fit_chosen,
        pooling_cells=_recorded_names(record, "pooling_cells"),
        conditions=_recorded_names(record, "conditions"),
        mode_resolved=mode,
        ood_resolved=_recorded_names(record, "ood_resolved"),
        related_pairs=tuple(dict(pair) for pair in related),
        unrecorded=tuple(name for name in (*OPTIONS, *RESOLVED_FIELDS) if name not in record),
    )


def _recorded_names(record: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = record.get(key, [])
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise GengenError(option=key, problem=f"must be a list of names, got {_shown(value)}")
    return tuple(value)


def control_of(fit: str, options: Mapping[str, Any]) -> Control:
    """The control ``fit`` names, with the GAM options of an analysis' settings (or its ``summary.json`` record).

    Parameters
    ----------
    fit : {"linear", "gam"}
        The control.
    options : mapping
        ``gam_k``, ``gam_method``, ``gam_basis`` and ``max_edf`` (the table's defaults for those absent).

    Returns
    -------
    Linear or Gam
        The control value every statistic takes as ``fit=``.
    """
    if fit == "linear":
        return Linear()
    value = {name: options.get(name, OPTIONS[name].default) for name in ("gam_k", "gam_method", "gam_basis", "max_edf")}
    return Gam(k=value["gam_k"], method=value["gam_method"], basis=value["gam_basis"], max_edf=value["max_edf"])


def make_settings(**options: Any) -> Settings:
    """Check every option of :func:`gengen.analyse` and return them as :class:`Settings`.

    Parameters
    ----------
    **options
        Any of :data:`ANALYSIS_OPTIONS` by name (the others take their defaults).

    Returns
    -------
    Settings
        The checked, normalised options.

    Raises
    ------
    GengenError
        One line naming the first bad option (its ``option`` is the option's name).
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise GengenError(option=unknown[0], problem=f"is not an option of the analysis ({', '.join(OPTIONS)})")
    options = _control_as_options(options)
    values: dict[str, Any] = {}
    for option in ANALYSIS_OPTIONS:
        if option.required and option.name not in options:
            raise GengenError(option=option.name, problem="is required")
        values[option.name] = check_option(option, options.get(option.name, option.default))
    _check_together(values)
    values["id_metric"] = values["id_metric"] or values["metric"]
    # The tests in the pairs table's order; the sign rule's own words always among the lower-is-better names.
    values["inference"] = tuple(name for name in INFERENCE if name in values["inference"])
    values["lower_is_better"] = tuple(sorted(LOWER_IS_BETTER | set(values["lower_is_better"])))
    values["higher_is_better"] = tuple(sorted(values["higher_is_better"]))
    return Settings(**values)


def _control_as_options(options: dict[str, Any]) -> dict[str, Any]:
    """``fit=Linear()`` or ``fit=Gam(...)`` (as every statistic of :mod:`gengen.stats` takes) as the options
    ``fit``, ``gam_k``, ``gam_method``, ``gam_basis``, ``max_edf``; a GAM option given beside a control is refused
    (two answers to one question)."""
    fit = options.get("fit")
    if not isinstance(fit, (Linear, Gam)):
        return options
    # Callers such as gengen.analyse pass every option, at its default when not given: only a changed one counts.
    names = ("gam_k", "gam_method", "gam_basis", "max_edf")
    given = sorted(name for name in names if name in options and options[name] != OPTIONS[name].default)
    if given:
        raise GengenError(
            option=given[0], problem=f"is given beside fit={fit!r}: set it in the control (Gam(k=..., ...)) alone"
        )
    if isinstance(fit, Linear):
        return {**options, "fit": "linear"}
    return {**options, "fit": "gam", "gam_k": fit.k, "gam_method": fit.method, "gam_basis": fit.basis,
            "max_edf": fit.max_edf}  # fmt: skip


def _check_together(values: dict[str, Any]) -> None:
    """The checks that involve two options."""
    if values["ood"] is not None and values["id_testset"] in values["ood"]:
        raise GengenError(option="ood", problem=f"lists {values['id_testset']!r}, the in-domain test set")
    if values["method"] == "kendall" and set(residual_inference()) & set(values["inference"]):
        raise GengenError(
            option="method",
            problem="kendall comes with the t-test only (normal approximation); the sieve, the lagged test, "
            "permutation and bootstrap take pearson or spearman",
            hint="choose inference 't-test' for kendall",
        )
    if values["adjust"] == "maxT" and "permutation" not in values["inference"]:
        raise GengenError(option="adjust", problem="'maxT' (family-wise max-|r| permutation p) needs inference "
                          "'permutation'")  # fmt: skip
    lower = {name.lower() for name in values["lower_is_better"]}
    both = sorted(lower & {name.lower() for name in values["higher_is_better"]})
    if both:
        raise GengenError(option="higher_is_better", problem=f"{both[0]!r} is also listed as lower-is-better")


def study_options(read: Callable[[str, Any], Any], metrics: Sequence[str]) -> dict[str, Any]:
    """The ``[analysis]`` keys of a study file, checked as :func:`make_settings` checks them.

    Parameters
    ----------
    read : callable
        ``read(key, default)``: the key's value in the study file, or ``default`` when absent.
    metrics : sequence of str
        The metrics a study scores (the study's ``metric`` must be one of them).

    Returns
    -------
    dict
        Option name -> checked value, for every entry of :data:`STUDY_OPTIONS`.

    Raises
    ------
    GengenError
        With ``option`` set to the key.
    """
    values = {option.name: check_option(option, read(option.name, option.default)) for option in STUDY_OPTIONS}
    if values["metric"] not in metrics:
        raise GengenError(option="metric", problem=f"must be one of {', '.join(metrics)}, got {values['metric']!r}")
    return values
