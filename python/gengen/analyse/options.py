"""The options of :func:`gengen.analyse`, checked once and carried as one frozen record.

Every option is validated here, before any number is computed, so that a bad option fails fast with one line
naming it (:class:`gengen.errors.GengenError`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, get_args

from gengen.errors import GengenError
from gengen.stats.options import (
    DEFAULT_FIT_CHOICE,
    DEFAULT_GAM_BASIS,
    DEFAULT_GAM_K,
    DEFAULT_GAM_MAX_EDF,
    DEFAULT_GAM_METHOD,
    FIT_CHOICES,
    GAM_BASES,
    GAM_METHODS,
    INTERVAL_METHODS,
    METHODS,
    Adjustment,
)

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

#: The analysis' controls: the statistics' two, and ``"auto"``, which chooses one per group
#: (:func:`gengen.stats.choose_control`: the capped GAM when most test sets curve in ID, else the line).
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
#: The tests that correlate residuals (all but ppcor's t-test): Kendall's partial τ has no residual form.
RESIDUAL_INFERENCE: tuple[Inference, ...] = tuple(name for name in INFERENCE_METHODS if name != "t-test")
#: Which p-value decides ``significant`` when several tests were asked for, best first.
DECIDING_ORDER: tuple[tuple[Inference, str], ...] = (
    ("sieve", "p_sieve"),
    ("lagged", "p_lagged"),
    ("permutation", "p_perm"),
    ("t-test", "p_value"),
)

_PERMUTATION_SCHEME = {"free": "free", "iid": "free", "block": "block", "circular": "circular"}
_BOOTSTRAP_SCHEME = {"free": "iid", "iid": "iid", "block": "block", "circular": "circular"}


def _as_tuple(value: str | Iterable[str] | None, option: str) -> tuple[str, ...]:
    """A comma-separated string or an iterable of strings as a tuple of stripped, non-empty names."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in items:
        if not isinstance(item, str):
            raise GengenError(f"option {option}: expected names (str), got {item!r}")
        if item.strip():
            out.append(item.strip())
    return tuple(out)


def _choice(value: str, allowed: Sequence[str], option: str) -> str:
    if value not in allowed:
        raise GengenError(f"option {option}: {value!r} is not one of {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class Settings:
    """Validated settings of one analysis (recorded verbatim in ``summary.json``)."""

    id_testset: str
    ood: tuple[str, ...] | None
    metric: str
    id_metric: str
    fit: str
    method: str
    inference: tuple[str, ...]
    scheme: str
    block_length: int | None
    n_perm: int
    n_boot: int
    ci_level: float
    boot_ci_method: str
    adjust: str
    alpha: float
    by: tuple[str, ...]
    pooling: tuple[str, ...]
    mode: str
    lower_is_better: tuple[str, ...]
    seed: int
    higher_is_better: tuple[str, ...] = ()
    #: Glob patterns selecting the rows analysed (empty = all): model names, run keys, sizes, shot counts.
    models: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    sizes: tuple[str, ...] = ()
    shots: tuple[str, ...] = ()
    #: The deciding p-value is the largest over deleting any one checkpoint (:mod:`gengen.stats.influence`).
    leave_one_out: bool = DEFAULT_LEAVE_ONE_OUT
    #: Checkpoints before this step are left out (1 leaves out the model before fine-tuning, step 0).
    min_step: int | None = None
    #: Set on a group's copy of the settings when ``fit="auto"`` chose its control (then ``fit`` is the choice).
    fit_chosen: bool = False
    #: The GAM control's basis dimension, smoothing criterion, basis and cap on its effective degrees of freedom
    #: (:func:`gengen.stats.gam_fit`): they apply wherever the control is a GAM (``fit="gam"``, or chosen).
    gam_k: int = DEFAULT_GAM_K
    gam_method: str = DEFAULT_GAM_METHOD
    gam_basis: str = DEFAULT_GAM_BASIS
    max_edf: float | str | None = DEFAULT_GAM_MAX_EDF

    @property
    def gam_options(self) -> dict[str, Any]:
        """The GAM options as the statistics take them (``k``, ``gam_method``, ``gam_basis``, ``max_edf``), or
        none under the linear control."""
        if self.fit != "gam":
            return {}
        return {"k": self.gam_k, "gam_method": self.gam_method, "gam_basis": self.gam_basis, "max_edf": self.max_edf}

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
        for name, column in DECIDING_ORDER:
            if name in self.inference:
                return column
        return "p_value"

    def sign(self, metric: str) -> int:
        """-1 when ``metric`` is lower-is-better (its values are negated), else +1 (see :func:`is_lower_better`)."""
        return -1 if is_lower_better(metric, self.lower_is_better, self.higher_is_better) else 1

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form (tuples become lists)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        out["primary_p"] = self.primary_p
        out["permutation_scheme"] = self.permutation_scheme
        out["bootstrap_scheme"] = self.bootstrap_scheme
        return out


def make_settings(
    *,
    id_testset: str,
    ood: str | Iterable[str] | None,
    metric: str,
    id_metric: str | None,
    fit: str,
    method: str,
    inference: str | Iterable[str],
    scheme: str,
    block_length: int | None,
    n_perm: int,
    n_boot: int,
    ci_level: float,
    boot_ci_method: str,
    adjust: str,
    alpha: float,
    by: str | Iterable[str],
    pooling: str | Iterable[str] | None,
    mode: str,
    lower_is_better: Iterable[str] | None,
    seed: int,
    higher_is_better: Iterable[str] | None = None,
    models: str | Iterable[str] | None = None,
    runs: str | Iterable[str] | None = None,
    sizes: str | Iterable[str] | None = None,
    shots: str | int | Iterable[str | int] | None = None,
    leave_one_out: bool = True,
    min_step: int | None = None,
    gam_k: int = DEFAULT_GAM_K,
    gam_method: str = DEFAULT_GAM_METHOD,
    gam_basis: str = DEFAULT_GAM_BASIS,
    max_edf: float | str | None = DEFAULT_GAM_MAX_EDF,
) -> Settings:
    """Check every option of :func:`gengen.analyse` and return them as :class:`Settings`.

    Raises
    ------
    GengenError
        One line naming the first bad option.
    """
    if not isinstance(id_testset, str) or not id_testset:
        raise GengenError("option id_testset: give the in-domain test set's name")
    ood_names = _as_tuple(ood, "ood") if ood is not None else None
    if ood_names is not None:
        if id_testset in ood_names:
            raise GengenError(f"option ood: {id_testset!r} is the in-domain test set (id_testset) and cannot be OOD")
        if len(ood_names) < 2:
            raise GengenError(f"option ood: need at least two OOD test sets to form a pair, got {len(ood_names)}")
        duplicates = sorted({name for name in ood_names if ood_names.count(name) > 1})
        if duplicates:
            raise GengenError(f"option ood: test set {duplicates[0]!r} is listed twice")
    inference_names = _as_tuple(inference, "inference")
    if not inference_names:
        raise GengenError(f"option inference: choose at least one of {', '.join(INFERENCE_METHODS)}")
    for name in inference_names:
        _choice(name, INFERENCE_METHODS, "inference")
    pooling_names = _as_tuple(pooling, "pooling")
    for name in pooling_names:
        _choice(name, POOLING, "pooling")
    by_names = _as_tuple(by, "by")
    for name in by_names:
        _choice(name, BY_COLUMNS, "by")
    if block_length is not None and (not isinstance(block_length, int) or block_length < 1):
        raise GengenError(f"option block_length: must be a positive integer, got {block_length!r}")
    for option, count in (("n_perm", n_perm), ("n_boot", n_boot)):
        if not isinstance(count, int) or count < 1:
            raise GengenError(f"option {option}: must be a positive integer, got {count!r}")
    if not 0.0 < ci_level < 1.0:
        raise GengenError(f"option ci_level: must lie strictly between 0 and 1, got {ci_level!r}")
    if not 0.0 < alpha < 1.0:
        raise GengenError(f"option alpha: must lie strictly between 0 and 1, got {alpha!r}")
    if method == "kendall" and set(RESIDUAL_INFERENCE) & set(inference_names):
        raise GengenError(
            "option method: kendall comes with the t-test only (normal approximation); the sieve, the lagged "
            "test, permutation and bootstrap take pearson or spearman (use --inference t-test)"
        )
    if adjust == "maxT" and "permutation" not in inference_names:
        raise GengenError("option adjust: 'maxT' (family-wise max-|r| permutation p) needs inference 'permutation'")
    lower_names = _sign_names(lower_is_better, "lower_is_better")
    higher_names = _sign_names(higher_is_better, "higher_is_better")
    both = sorted({name.lower() for name in lower_names} & {name.lower() for name in higher_names})
    if both:
        raise GengenError(f"option higher_is_better: {both[0]!r} is also listed in lower_is_better")
    lower = LOWER_IS_BETTER | set(lower_names)
    if not isinstance(leave_one_out, bool):
        raise GengenError(f"option leave_one_out: must be true or false, got {leave_one_out!r}")
    if min_step is not None and (isinstance(min_step, bool) or not isinstance(min_step, int) or min_step < 0):
        raise GengenError(f"option min_step: must be a non-negative integer step, got {min_step!r}")
    if isinstance(gam_k, bool) or not isinstance(gam_k, int) or not 3 <= gam_k <= 200:
        raise GengenError(f"option gam_k: must be an integer from 3 to 200 (the GAM's basis dimension), got {gam_k!r}")
    if isinstance(max_edf, str) and max_edf.lower() == "none":
        max_edf = None
    if not (
        max_edf is None or max_edf == "auto" or (isinstance(max_edf, int | float) and not isinstance(max_edf, bool))
    ):
        raise GengenError(f"option max_edf: must be 'auto', 'none' or a number of at least 2, got {max_edf!r}")
    if isinstance(max_edf, int | float) and not (max_edf >= 2 and math.isfinite(max_edf)):
        raise GengenError(f"option max_edf: must be at least 2 (a straight line's degrees of freedom), got {max_edf!r}")
    return Settings(
        id_testset=id_testset,
        ood=ood_names,
        metric=metric,
        id_metric=id_metric or metric,
        fit=_choice(fit, ANALYSIS_FITS, "fit"),
        method=_choice(method, METHODS, "method"),
        inference=tuple(name for name in INFERENCE_METHODS if name in inference_names),
        scheme=_choice(scheme, SCHEMES, "scheme"),
        block_length=block_length,
        n_perm=n_perm,
        n_boot=n_boot,
        ci_level=float(ci_level),
        boot_ci_method=_choice(boot_ci_method, BOOT_CI_METHODS, "boot_ci_method"),
        adjust=_choice(adjust, ADJUST_METHODS, "adjust"),
        alpha=float(alpha),
        by=by_names,
        pooling=pooling_names,
        mode=_choice(mode, MODES, "mode"),
        lower_is_better=tuple(sorted(lower)),
        seed=int(seed),
        higher_is_better=tuple(sorted(higher_names)),
        models=_patterns(models, "models"),
        runs=_patterns(runs, "runs"),
        sizes=_patterns(sizes, "sizes"),
        shots=_patterns(shots, "shots"),
        leave_one_out=leave_one_out,
        min_step=min_step,
        gam_k=gam_k,
        gam_method=_choice(gam_method, GAM_METHODS, "gam_method"),
        gam_basis=_choice(gam_basis, GAM_BASES, "gam_basis"),
        max_edf=float(max_edf) if isinstance(max_edf, int | float) else max_edf,
    )


def _patterns(value: str | int | Iterable[str | int] | None, option: str) -> tuple[str, ...]:
    """Selection patterns (globs) as a tuple of strings; integers (shot counts) are written out."""
    if isinstance(value, bool):
        raise GengenError(f"option {option}: expected names or patterns, got {value!r}")
    if isinstance(value, int):
        return (str(value),)
    if value is None or isinstance(value, str):
        return _as_tuple(value, option)
    items = [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return _as_tuple(items, option)  # type: ignore[arg-type]


def _sign_names(names: Iterable[str] | None, option: str) -> tuple[str, ...]:
    """User metric names for the sign convention; each must hold a letter or digit."""
    out = []
    for name in _as_tuple(names, option):
        if not name_parts(name):
            raise GengenError(f"option {option}: {name!r} names no metric (it has no letters or digits)")
        out.append(name)
    return tuple(out)
