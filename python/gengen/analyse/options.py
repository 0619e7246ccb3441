"""The options of :func:`gengen.analyse`, checked once and carried as one frozen record.

Every option is validated here, before any number is computed, so that a bad option fails fast with one line
naming it (:class:`gengen.errors.GengenError`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gengen.errors import GengenError

#: Metrics where a lower value is better; gengen negates them so that "higher = better" everywhere.
LOWER_IS_BETTER: frozenset[str] = frozenset(
    {
        "loss",
        "eval_loss",
        "nll",
        "perplexity",
        "ppl",
        "word_perplexity",
        "byte_perplexity",
        "bits_per_byte",
        "error",
        "error_rate",
        "wer",
        "cer",
        "brier",
    }
)

INFERENCE_METHODS = ("lagged", "t-test", "permutation", "bootstrap")
#: The inference of the analysis unless told otherwise: the lagged regression, which the calibration study
#: (docs/calibration.md) found to keep its type-I error on autocorrelated trajectories where ppcor's t-test,
#: block permutations and block bootstraps do not.
DEFAULT_INFERENCE = ("lagged",)
SCHEMES = ("free", "iid", "block", "circular")
FITS = ("linear", "gam")
METHODS = ("pearson", "spearman", "kendall")
ADJUST_METHODS = ("holm", "hochberg", "hommel", "bonferroni", "BH", "fdr", "BY", "none", "maxT")
POOLING = ("meta", "residuals")
MODES = ("auto", "checkpoints", "across_runs")
BOOT_CI_METHODS = ("percentile", "bca")
#: Pooling cells when ``by`` is not given (the columns the score table has).
DEFAULT_BY = ("model", "size", "shots")
#: Columns of the score table that may define pooling cells (``by``).
BY_COLUMNS = ("study", "model", "family", "size", "shots")

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

    @property
    def permutation_scheme(self) -> str:
        """The scheme name :func:`gengen.stats.permutation_test` takes (``iid`` becomes ``free``)."""
        return _PERMUTATION_SCHEME[self.scheme]

    @property
    def bootstrap_scheme(self) -> str:
        """The scheme name :func:`gengen.stats.bootstrap_ci` takes (``free`` becomes ``iid``)."""
        return _BOOTSTRAP_SCHEME[self.scheme]

    @property
    def primary_p(self) -> str:
        """The column whose p-values are adjusted for checkpoint trajectories: ``p_lagged`` when the lagged test
        was asked for, else ``p_perm`` when a permutation test was, else the t-test's ``p_value``."""
        if "lagged" in self.inference:
            return "p_lagged"
        return "p_perm" if "permutation" in self.inference else "p_value"

    def sign(self, metric: str) -> int:
        """-1 when ``metric`` is lower-is-better (its values are negated), else +1."""
        return -1 if metric.lower() in self.lower_is_better else 1

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
    if method == "kendall" and {"lagged", "permutation", "bootstrap"} & set(inference_names):
        raise GengenError(
            "option method: kendall comes with the t-test only (normal approximation); the lagged test, "
            "permutation and bootstrap take pearson or spearman (use --inference t-test)"
        )
    if adjust == "maxT" and "permutation" not in inference_names:
        raise GengenError("option adjust: 'maxT' (family-wise max-|r| permutation p) needs inference 'permutation'")
    lower = LOWER_IS_BETTER | {name.lower() for name in _as_tuple(lower_is_better, "lower_is_better")}
    return Settings(
        id_testset=id_testset,
        ood=ood_names,
        metric=metric,
        id_metric=id_metric or metric,
        fit=_choice(fit, FITS, "fit"),
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
    )
