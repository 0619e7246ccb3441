"""Which OOD test sets are related by construction, so that their partial correlation says nothing about
generalisation: splits of one task, a set nested in another (an aggregate beside its parts), declared task
groups, and near-duplicate series.

Two splits of one task (``arc_easy_test`` / ``arc_easy_val``), a benchmark and its own subsets (McCoy et al.'s
``hans`` against ``hans_lexical_nonent``, and that against ``hans_ln_subsequence``) or the same examples under two
names co-move because they measure the same thing, not because improvement on one carries over to another. On
OLMo-2 7B/13B every "consistent" pair of the default analysis was of this kind. :func:`related_pairs` finds them
from the names (and, given scores, from the series); the analysis marks them in the pairs table (``related``,
``related_reason``) and the verdict leaves them out unless asked to keep them (``keep_related``).

The rules, in the order a pair's reason is given:

1. **Declared groups** (``groups``, a study file's ``[analysis.related_groups]``): every two members of a group,
   and the group's own name beside a member.
2. **Splits of one task**: the names are equal once the split words ``test``, ``val``, ``valid``,
   ``validation`` and ``dev`` are removed (names are split into words at ``_``, ``-``, ``.``, ``/`` and blanks,
   compared case-insensitively): ``arc_easy_test`` / ``arc_easy_val``, ``mmlu_humanities_test`` /
   ``mmlu_humanities_val``, ``arc_easy_val_rc_5shot`` / ``arc_easy_test_rc_5shot``, ``c4_en-validation`` /
   ``c4_en``.
3. **Nested sets**: the words of one name (split words removed) are a proper prefix of the other's
   (``hans`` / ``hans_lexical_nonent``; ``crows_pairs_english`` / ``crows_pairs_english_age``), also when the
   trailing words of the shorter name are written as their initials in the longer (``hans_lexical_nonent`` /
   ``hans_ln_subsequence``); and lm-eval's groups beside their subtasks (:data:`LM_EVAL_GROUPS`: ``mmlu`` /
   ``hendrycksTest-anatomy``). Sibling subtasks of one group (``hendrycksTest-anatomy`` /
   ``hendrycksTest-astronomy``) are different examples of different subjects and are *not* related.
4. **Near-duplicate series** (only with ``scores``): raw correlation ≥ :data:`NEAR_DUPLICATE_R` *and* values
   equal within measurement noise: a mean absolute difference no larger than :data:`NEAR_DUPLICATE_NOISE` times
   what two independent measurements give, E|a − b| = √(2/π)·√(σ_a² + σ_b²), with each test set's σ from its
   standard errors or binomial noise (``noise``); without them, exactly equal values (as
   :mod:`gengen.analyse.information` compares scores without noise information). Both are needed: on the shared
   Pythia files (27 checkpoints, 2 sizes) distinct tasks reach a raw correlation of 0.994 (arc_easy / sciq,
   arc_easy / piqa) because training drives them all, but their values differ by 0.19–0.22 on average, 14–18
   times what their noise gives; the same examples under two names differ by nothing, a re-scored copy by its
   noise.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "LM_EVAL_GROUPS",
    "NEAR_DUPLICATE_NOISE",
    "NEAR_DUPLICATE_R",
    "RELATED_COLUMNS",
    "SPLIT_WORDS",
    "mark_related",
    "measurement_sd",
    "related_pairs",
    "stacked_series",
]

#: Words that name a split of a task rather than the task.
SPLIT_WORDS = frozenset({"test", "val", "valid", "validation", "dev"})
#: lm-eval group names and the name prefixes of their subtasks (v0.3 wrote MMLU's as ``hendrycksTest-<subject>``).
LM_EVAL_GROUPS: dict[str, tuple[str, ...]] = {
    "mmlu": ("hendrycksTest-", "mmlu_"),
    "hendrycksTest": ("hendrycksTest-",),
    "blimp": ("blimp_",),
    "crows_pairs": ("crows_pairs_",),
    "bbh": ("bbh_",),
    "agieval": ("agieval_",),
}
#: Raw correlation from which two series may be the same examples under two names (with near-equal values).
NEAR_DUPLICATE_R = 0.995
#: Largest mean absolute difference of two near-duplicate series, in units of what measurement noise alone gives.
NEAR_DUPLICATE_NOISE = 2.0
#: The columns of :func:`related_pairs`' table.
RELATED_COLUMNS = ("testset_a", "testset_b", "reason")

_WORD_SEPARATORS = re.compile(r"[\s_\-./]+")


def _words(name: str) -> tuple[str, ...]:
    """The words of a test set's name, lower-cased, split words left out."""
    return tuple(word for word in _WORD_SEPARATORS.split(name.lower()) if word and word not in SPLIT_WORDS)


def _abbreviations(words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The name with two or more trailing words written as their initials (``hans lexical nonent`` ->
    ``hans ln``), keeping at least one word whole."""
    return [(*words[:cut], "".join(word[0] for word in words[cut:])) for cut in range(1, len(words) - 1)]


def _is_proper_prefix(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    return len(short) < len(long) and long[: len(short)] == short


def _name_reason(a: str, b: str, groups: Mapping[str, Sequence[str]]) -> str:
    """Why ``a`` and ``b`` are related by their names (or a declared group), or ``""``."""
    for group, members in groups.items():
        names = {str(member) for member in members}
        if {a, b} <= names:
            return f"declared group {group!r}"
        if (a == group and b in names) or (b == group and a in names):
            return f"declared group {group!r} beside its member"
    words_a, words_b = _words(a), _words(b)
    if words_a and words_a == words_b:
        return f"splits of one task ({'_'.join(words_a)})"
    for short, long, outer, inner in ((words_a, words_b, a, b), (words_b, words_a, b, a)):
        if short and (_is_proper_prefix(short, long) or any(_is_proper_prefix(x, long) for x in _abbreviations(short))):
            return f"nested: {inner} within {outer}"
    for group, prefixes in LM_EVAL_GROUPS.items():
        for outer, inner in ((a, b), (b, a)):
            if outer.lower() == group.lower() and any(inner.startswith(prefix) for prefix in prefixes):
                return f"nested: {inner} is a subtask of lm-eval group {outer}"
    return ""


def _near_duplicates(scores: pd.DataFrame, noise: Mapping[str, float]) -> dict[tuple[str, str], str]:
    """Pairs of columns of ``scores`` (rows: checkpoints, possibly of several runs) that are near-duplicate
    series, with their reason. The correlations come from one pairwise-complete matrix; the values are compared
    only for the few pairs whose correlation qualifies."""
    out: dict[tuple[str, str], str] = {}
    if scores.shape[1] < 2:
        return out
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = scores.astype(float).corr(min_periods=3).to_numpy()
    names = [str(name) for name in scores.columns]
    rows, cols = np.nonzero(np.triu(np.nan_to_num(correlation, nan=-1.0) >= NEAR_DUPLICATE_R, k=1))
    values = scores.to_numpy(dtype=float)
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        both = np.isfinite(values[:, i]) & np.isfinite(values[:, j])
        a, b = values[both, i], values[both, j]
        gap = float(np.mean(np.abs(a - b)))
        sd = math.hypot(noise.get(names[i], 0.0), noise.get(names[j], 0.0))
        expected = math.sqrt(2 / math.pi) * sd
        exact = 1e-12 * max(1.0, float(np.abs(np.concatenate([a, b])).max(initial=0.0)))
        if gap <= max(NEAR_DUPLICATE_NOISE * expected, exact):
            within = f"{gap / expected:.1f}× the noise of two measurements" if expected > 0 else "equal values"
            out[(names[i], names[j])] = (
                f"near-duplicate series (raw r = {correlation[i, j]:.3f}, mean |difference| {gap:.3g}: {within})"
            )
    return out


def related_pairs(
    testsets: Iterable[str],
    scores: pd.DataFrame | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    noise: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """The pairs of test sets that are related by construction, with the reason (see the module's rules).

    Parameters
    ----------
    testsets : iterable of str
        The OOD test sets, in the order pairs are formed (``testset_a`` precedes ``testset_b`` in it).
    scores : DataFrame, optional
        One column per test set (others ignored), one row per checkpoint (the checkpoints of several runs may
        be stacked): near-duplicate series are looked for in it.
    groups : mapping of str to list of str, optional
        Declared task groups: group name -> its test sets.
    noise : mapping of str to float, optional
        Test set -> the standard deviation of one measurement of its score (:func:`measurement_sd`); without
        it, near-duplicates must have equal values.

    Returns
    -------
    DataFrame
        ``testset_a, testset_b, reason``, one row per related pair (none when nothing is related).

    Examples
    --------
    >>> names = ["arc_easy_test", "arc_easy_val", "hans", "hans_lexical_nonent", "hans_ln_subsequence", "piqa"]
    >>> for row in related_pairs(names).itertuples(index=False):
    ...     print(row.testset_a, row.testset_b, "|", row.reason)
    arc_easy_test arc_easy_val | splits of one task (arc_easy)
    hans hans_lexical_nonent | nested: hans_lexical_nonent within hans
    hans hans_ln_subsequence | nested: hans_ln_subsequence within hans
    hans_lexical_nonent hans_ln_subsequence | nested: hans_ln_subsequence within hans_lexical_nonent
    """
    names = list(dict.fromkeys(str(name) for name in testsets))
    declared = dict(groups or {})
    columns = [name for name in names if scores is not None and name in scores.columns]
    duplicates = {} if scores is None else _near_duplicates(scores[columns], dict(noise or {}))
    rows = []
    for a, b in itertools.combinations(names, 2):
        reason = _name_reason(a, b, declared) or duplicates.get((a, b), "") or duplicates.get((b, a), "")
        if reason:
            rows.append((a, b, reason))
    return pd.DataFrame(rows, columns=list(RELATED_COLUMNS))


def stacked_series(scores: pd.DataFrame, testsets: Sequence[str]) -> pd.DataFrame:
    """The OOD scores of a prepared long table (:func:`gengen.analyse.data.prepare`) as one column per test set,
    one row per (model, run, step): the series :func:`related_pairs` looks for near-duplicates in."""
    rows = scores[scores["testset"].isin(list(testsets))]
    # one value per (model, run, step, test set): prepare() refuses a table with more
    return rows.set_index(["model", "run", "step", "testset"])["value"].unstack("testset")


def mark_related(pairs: pd.DataFrame, related: pd.DataFrame) -> pd.DataFrame:
    """``pairs`` with ``related`` (bool) and ``related_reason`` columns from :func:`related_pairs`' table (a pair
    is matched whichever of its test sets comes first)."""
    reasons: dict[tuple[str, str], str] = {}
    for a, b, reason in related[list(RELATED_COLUMNS)].itertuples(index=False):
        reasons[(a, b)] = reasons[(b, a)] = reason
    keys = zip(pairs["testset_a"].astype(str), pairs["testset_b"].astype(str), strict=True)
    reason_column = [reasons.get(key, "") for key in keys]
    return pairs.assign(related=[bool(text) for text in reason_column], related_reason=reason_column)


def measurement_sd(scores: pd.DataFrame, testsets: Sequence[str]) -> dict[str, float]:
    """Each test set's measurement noise in a prepared long table: the median over its scores of the binomial
    sd √(p(1 − p)/N), N from ``n_examples`` or implied by lm-eval's ``stderr``
    (:func:`gengen.analyse.data.examples_per_row`); test sets without either are left out."""
    from gengen.analyse.data import examples_per_row

    examples = examples_per_row(scores)
    if examples is None:
        return {}
    p = (scores["value"] * scores["sign"]).to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.clip(p * (1 - p), 0, None) / examples)
    frame = pd.DataFrame({"testset": scores["testset"].to_numpy(), "sd": sd})
    frame = frame[frame["testset"].isin(list(testsets)) & np.isfinite(frame["sd"])]
    return {str(name): float(value) for name, value in frame.groupby("testset")["sd"].median().items()}
