"""Orders and labels for the report: models by size, test sets by clustering, short test-set labels.

Pure numpy (scipy is only a test dependency): average-linkage (UPGMA) clustering of a correlation matrix,
model sizes parsed from names such as ``pythia-1.4b`` or ``OLMo-2-7B``, and test-set labels with the prefix
every name shares (``eval/downstream/``) stripped and every token that tells two names apart kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

#: Multipliers of the size suffixes in model names (70m, 1.4b, 7B, 1.1T).
SIZE_UNITS = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
#: A number with a size suffix standing alone between separators ("v1.1" and "gpt2" are not sizes).
_SIZE = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)([kKmMbBtT])(?![A-Za-z0-9])")
#: Characters that end a name's token.
SEPARATORS = "-_/:.= "
#: Characters that end a namespace (``eval/downstream/``, ``mmlu:``): only a namespace every name shares is
#: stripped; ``arc_`` of ``arc_easy`` is part of the task's name, even where every task is an ARC one.
NAMESPACE_SEPARATORS = "/:"
#: Longest label drawn (every Pythia and OLMo-2 task name fits); longer ones lose tokens from their middle
#: (the full name is on hover and in the tables).
MAX_LABEL = 50


def model_size(name: str) -> float | None:
    """Parameter count read from a model name (``"pythia-1.4b"`` → 1.4e9), or None when it names none.

    Examples
    --------
    >>> model_size("pythia-v1.1-160m"), model_size("OLMo-2-1124-7B"), model_size("gpt2")
    (160000000.0, 7000000000.0, None)
    """
    match = _SIZE.search(str(name))
    if match is None:
        return None
    return float(match.group(1)) * SIZE_UNITS[match.group(2).lower()]


def natural_key(text: str) -> tuple[tuple[int, float | str], ...]:
    """Sort key that orders the numbers inside ``text`` numerically (``seed=2`` before ``seed=10``)."""
    parts = re.split(r"(\d+(?:\.\d+)?)", str(text))
    return tuple((0, float(part)) if index % 2 else (1, part.lower()) for index, part in enumerate(parts) if part)


def model_key(name: str) -> tuple[int, float, tuple[tuple[int, float | str], ...]]:
    """Sort key of a model: by parameter count (named sizes first), then by name."""
    size = model_size(name)
    return (0 if size is not None else 1, size if size is not None else 0.0, natural_key(name))


def sort_models(names: Iterable[str]) -> list[str]:
    """``names`` ordered by numeric size then name: 70m < 410m < 1.4b < 2.8b < 6.9b < 12b."""
    return sorted(dict.fromkeys(names), key=model_key)


def group_key(model: str, run: str) -> tuple[object, ...]:
    """Sort key of a (model, run) group: model by size, then runs in natural order."""
    return (*model_key(model), natural_key(run))


def average_linkage(distance: np.ndarray) -> np.ndarray:
    """Average-linkage (UPGMA) agglomerative clustering of a distance matrix.

    Parameters
    ----------
    distance : ndarray, shape (m, m)
        Symmetric, non-negative, zero diagonal.

    Returns
    -------
    ndarray, shape (m - 1, 4)
        Linkage matrix in scipy's layout: row ``i`` merges clusters ``Z[i, 0]`` and ``Z[i, 1]`` (leaves are
        ``0 … m-1``, the cluster made at row ``i`` is ``m + i``) at height ``Z[i, 2]`` into a cluster of
        ``Z[i, 3]`` leaves.

    Notes
    -----
    The distance between clusters :math:`A` and :math:`B` is the mean of :math:`d(a, b)` over
    :math:`a \\in A, b \\in B`; after merging :math:`A` and :math:`B`, the distance to any :math:`C` is
    :math:`(|A| d(A, C) + |B| d(B, C)) / (|A| + |B|)` (Lance–Williams). O(m³), fine for the ≤ 1000 test sets
    of a report.
    """
    d = np.array(distance, dtype=float)
    m = d.shape[0]
    if d.ndim != 2 or d.shape[1] != m:
        raise ValueError(f"distance: expected a square matrix, got shape {d.shape}")
    if m < 2:
        return np.empty((0, 4))
    np.fill_diagonal(d, np.inf)
    ids = list(range(m))
    sizes = np.ones(m)
    active = np.ones(m, dtype=bool)
    out = np.empty((m - 1, 4))
    for step in range(m - 1):
        masked = np.where(active[:, None] & active[None, :], d, np.inf)
        i, j = np.unravel_index(int(np.argmin(masked)), masked.shape)
        i, j = (i, j) if ids[i] < ids[j] else (j, i)
        height = d[i, j]
        merged = (sizes[i] * d[i] + sizes[j] * d[j]) / (sizes[i] + sizes[j])
        out[step] = (ids[i], ids[j], height, sizes[i] + sizes[j])
        # The merged cluster takes slot i; slot j is retired.
        d[i, :] = merged
        d[:, i] = merged
        d[i, i] = np.inf
        active[j] = False
        sizes[i] += sizes[j]
        ids[i] = m + step
    return out


def leaf_order(linkage: np.ndarray, distance: np.ndarray) -> list[int]:
    """Leaves of a dendrogram, each merge oriented so that the two leaves meeting at the seam are closest."""
    m = linkage.shape[0] + 1
    leaves: dict[int, list[int]] = {i: [i] for i in range(m)}
    for step, (a, b, _, _) in enumerate(linkage):
        left, right = leaves.pop(int(a)), leaves.pop(int(b))
        # Of the four orientations, keep the one whose touching ends are most alike (a cheap optimal ordering).
        options = [
            (distance[left[-1], right[0]], left + right),
            (distance[left[-1], right[-1]], left + right[::-1]),
            (distance[left[0], right[0]], left[::-1] + right),
            (distance[left[0], right[-1]], left[::-1] + right[::-1]),
        ]
        leaves[m + step] = min(options, key=lambda option: option[0])[1]
    return next(iter(leaves.values())) if leaves else []


def cluster_order(correlation: np.ndarray) -> list[int]:
    """Order of the rows of a correlation matrix by average-linkage clustering on ``(1 - r) / 2``.

    Missing correlations count as 0 (distance 0.5), so test sets without data fall where uncorrelated ones do.
    """
    r = np.array(correlation, dtype=float)
    m = r.shape[0]
    if m < 3:
        return list(range(m))
    distance = (1.0 - np.clip(np.nan_to_num(r, nan=0.0), -1.0, 1.0)) / 2.0
    distance = (distance + distance.T) / 2.0
    np.fill_diagonal(distance, 0.0)
    return leaf_order(average_linkage(distance), distance)


def pooled_correlation(matrices: Sequence[np.ndarray]) -> np.ndarray:
    """Mean of correlation matrices on Fisher's z scale (NaN ignored; all-NaN cells stay NaN)."""
    stack = np.stack([np.clip(np.asarray(matrix, dtype=float), -0.999999, 0.999999) for matrix in matrices])
    with np.errstate(invalid="ignore"):
        z = np.arctanh(stack)
        counts = np.sum(np.isfinite(z), axis=0)
        mean = np.where(counts > 0, np.nansum(z, axis=0) / np.maximum(counts, 1), np.nan)
    return np.tanh(mean)


def _common_prefix(names: Sequence[str]) -> str:
    """Longest prefix of all ``names`` that ends at a separator."""
    first, last = min(names), max(names)
    length = 0
    while length < min(len(first), len(last)) and first[length] == last[length]:
        length += 1
    prefix = first[:length]
    cut = max(prefix.rfind(char) for char in SEPARATORS)
    return prefix[: cut + 1] if cut >= 0 else ""


def _readable(rest: str) -> bool:
    """Whether what is left of a name after a prefix still says something (a letter, two characters or more)."""
    return len(rest) >= 2 and re.search(r"[A-Za-z]", rest) is not None


def _tokens(name: str) -> list[str]:
    """``name`` cut after each separator: ``"arc_easy_val"`` → ``["arc_", "easy_", "val"]``."""
    return [part for part in re.split(f"(?<=[{re.escape(SEPARATORS)}])", name) if part]


def _elide(label: str, limit: int) -> str:
    """``label`` shortened to ``limit`` characters by whole tokens from its middle: its first token and as many
    of its last ones as fit stay (``"hendrycksTest-…_and_politics"``), so its start and end still read."""
    if len(label) <= limit:
        return label
    tokens = _tokens(label)
    head, tail = tokens[0], ""
    for token in reversed(tokens[1:]):
        if len(head) + 1 + len(token) + len(tail) > limit:
            break
        tail = token + tail
    if len(head) + 1 + len(tail) > limit or not tail:
        return label[: limit - 1] + "…"
    return head + "…" + tail


def short_labels(names: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Labels for many test-set names: the prefix every name shares stripped, every distinguishing token kept.

    Only a namespace all names share (``eval/downstream/``, ending in one of :data:`NAMESPACE_SEPARATORS`)
    says nothing about any one of them, so only that is stripped, and only when every name keeps a word after
    it. A prefix inside the task names is part of what tells them apart (``arc_`` of
    ``arc_easy_val_rc_5shot``, ``hendrycksTest-`` of the MMLU subjects) and stays. Labels longer than
    :data:`MAX_LABEL` characters lose whole tokens from their middle ("…"); labels that would collide keep
    their full names.

    Parameters
    ----------
    names : sequence of str
        The test-set names (duplicates count once).

    Returns
    -------
    labels : dict
        Name → label.
    stripped : list of str
        The prefixes removed (for a note beside the figure).

    Examples
    --------
    >>> labels, stripped = short_labels(["eval/downstream/arc_easy_5shot", "eval/downstream/arc_challenge_5shot"])
    >>> sorted(labels.values()), stripped
    (['arc_challenge_5shot', 'arc_easy_5shot'], ['eval/downstream/'])
    """
    names = list(dict.fromkeys(map(str, names)))
    labels = {name: name for name in names}
    stripped: list[str] = []
    if len(names) > 1:
        common = _common_prefix(names)
        common = common[: max(common.rfind(char) for char in NAMESPACE_SEPARATORS) + 1]
        # Back off to an earlier namespace while a remainder would carry no word ("runs/01" → "01").
        while common and not all(_readable(name[len(common) :]) for name in names):
            common = common[: max(common[:-1].rfind(char) for char in NAMESPACE_SEPARATORS) + 1]
        if common:
            labels = {name: name[len(common) :] for name in names}
            stripped.append(common)
    labels = {name: _elide(label, MAX_LABEL) for name, label in labels.items()}
    clashes = Counter(labels.values())
    return {name: (label if clashes[label] == 1 else name) for name, label in labels.items()}, stripped
