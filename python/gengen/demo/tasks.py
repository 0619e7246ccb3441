"""The demo's NLI-style task, generated from templates: one ID distribution and six OOD shifts.

Every example is a premise about who did what to whom ("the tall doctor helped the lawyer") and a hypothesis
to be judged entailed (Yes) or not (No). In the **ID** data the lexical-overlap heuristic holds, as it largely
does in MNLI: an entailed hypothesis reuses the premise's words ("the doctor helped the lawyer", "the doctor
helped someone", "someone helped the lawyer"); a non-entailed one brings a new noun or verb, a negation ("the
doctor did not help the lawyer") or "nobody". As in real NLI data, some words are cues: "someone" only occurs
in entailed hypotheses, "not" and "nobody" only in non-entailed ones. Tiny models pick the cues up first and
learn the overlap comparisons more slowly.

The OOD test sets each apply one documented shift (all balanced, half Yes and half No):

``hans_overlap``
    HANS lexical overlap: the hypothesis swaps subject and object ("the lawyer helped the doctor" is No);
    every word of it is in the premise, so the overlap heuristic answers Yes.
``hans_subsequence``
    HANS subsequence: "the doctor near the pilot helped the lawyer" does not entail the contiguous
    "the pilot helped the lawyer" (No), but does entail "the doctor helped the lawyer" (Yes).
``negation``
    Negation moves into the premise: "the doctor did not help the lawyer" entails the same negated sentence
    (Yes) and contradicts "the doctor helped the lawyer" or "... helped someone" (No): the cues "not" and
    "someone" now point the wrong way.
``length``
    ID pairs whose premise carries long adjuncts ("in the morning after the long and busy day ...").
``unseen_vocab``
    ID pairs built on nouns that never occur in the training data (the tokenizer knows them; the fine-tuned
    embeddings do not).
``spelling_noise``
    ID pairs with one or two words of the premise or hypothesis misspelled (a swapped, dropped or doubled
    letter), which the tokenizer splits into unfamiliar pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["OOD_SHIFTS", "generate_id", "generate_ood", "tokenizer_corpus", "write_demo_data"]

NOUNS = (
    "doctor",
    "lawyer",
    "artist",
    "teacher",
    "student",
    "farmer",
    "pilot",
    "singer",
    "baker",
    "judge",
    "nurse",
    "actor",
    "banker",
    "author",
    "chef",
    "clerk",
)
UNSEEN_NOUNS = ("sailor", "dentist", "painter", "miner", "tailor", "poet", "guard", "monk")
VERBS = ("saw", "helped", "called", "thanked", "met", "paid", "visited", "followed", "admired", "avoided")
BASE_VERBS = dict(
    zip(
        VERBS,
        ("see", "help", "call", "thank", "meet", "pay", "visit", "follow", "admire", "avoid"),
        strict=True,
    )
)
ADJECTIVES = ("tall", "young", "old", "happy", "quiet", "brave")
ADJUNCTS = (
    "in the morning",
    "after the long and busy day",
    "near the old house by the river",
    "while the weather was cold and grey",
    "before the meeting in the town hall",
    "during the quiet evening at the station",
)
LEXICON = frozenset(
    [*NOUNS, *UNSEEN_NOUNS, *VERBS, *BASE_VERBS.values(), *ADJECTIVES, "the", "someone", "nobody", "did", "not"]
    + [word for adjunct in ADJUNCTS for word in adjunct.split()]
)
"""Every word the templates use."""

Row = tuple[str, str, int]


def _pick(rng: np.random.Generator, items: tuple[str, ...], k: int) -> list[str]:
    return [items[i] for i in rng.choice(len(items), size=k, replace=False)]


def _premise(rng: np.random.Generator, n1: str, verb: str, n2: str) -> str:
    adjective = f"{ADJECTIVES[rng.integers(len(ADJECTIVES))]} " if rng.random() < 0.5 else ""
    return f"the {adjective}{n1} {verb} the {n2}"


def _id_pair(rng: np.random.Generator, nouns: tuple[str, ...], label: int) -> tuple[str, str, str, str, Row]:
    """One ID example; also returns its subject, verb and object so shifts can rewrite it."""
    n1, n2, n3 = _pick(rng, nouns, 3)
    verb, other_verb = _pick(rng, VERBS, 2)
    premise = _premise(rng, n1, verb, n2)
    kind = int(rng.integers(3 if label else 5))
    if label:
        hypothesis = (f"the {n1} {verb} the {n2}", f"the {n1} {verb} someone", f"someone {verb} the {n2}")[kind]
    else:
        hypothesis = (
            f"the {n3} {verb} the {n2}",
            f"the {n1} {other_verb} the {n2}",
            f"the {n1} did not {BASE_VERBS[verb]} the {n2}",
            f"nobody {verb} the {n2}",
            f"the {n1} {verb} nobody",
        )[kind]
    return n1, verb, n2, premise, (premise, hypothesis, label)


def _balanced(n: int, make: Callable[[np.random.Generator, int], Row], seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % 2)
    rows = [make(rng, int(label)) for label in labels]
    return pd.DataFrame(rows, columns=["premise", "hypothesis", "label"])


def generate_id(n: int, seed: int) -> pd.DataFrame:
    """``n`` balanced ID examples (columns ``premise, hypothesis, label``; label 1 = Yes)."""
    return _balanced(n, lambda rng, label: _id_pair(rng, NOUNS, label)[-1], seed)


def _hans_overlap(rng: np.random.Generator, label: int) -> Row:
    n1, n2 = _pick(rng, NOUNS, 2)
    verb = VERBS[rng.integers(len(VERBS))]
    premise = _premise(rng, n1, verb, n2)
    return premise, f"the {n1} {verb} the {n2}" if label else f"the {n2} {verb} the {n1}", label


def _hans_subsequence(rng: np.random.Generator, label: int) -> Row:
    n1, n2, n3 = _pick(rng, NOUNS, 3)
    verb = VERBS[rng.integers(len(VERBS))]
    premise = f"the {n1} near the {n2} {verb} the {n3}"
    return premise, f"the {n1} {verb} the {n3}" if label else f"the {n2} {verb} the {n3}", label


def _negation(rng: np.random.Generator, label: int) -> Row:
    n1, n2 = _pick(rng, NOUNS, 2)
    verb = VERBS[rng.integers(len(VERBS))]
    negated = f"the {n1} did not {BASE_VERBS[verb]} the {n2}"
    if label:
        return negated, negated, label
    kind = int(rng.integers(3))
    return negated, (f"the {n1} {verb} the {n2}", f"the {n1} {verb} someone", f"someone {verb} the {n2}")[kind], label


def _length(rng: np.random.Generator, label: int) -> Row:
    premise, hypothesis, label = _id_pair(rng, NOUNS, label)[-1]
    adjuncts = _pick(rng, ADJUNCTS, 2)
    return f"{premise} {adjuncts[0]} , {adjuncts[1]}", hypothesis, label


def _unseen(rng: np.random.Generator, label: int) -> Row:
    return _id_pair(rng, UNSEEN_NOUNS, label)[-1]


def _misspell(rng: np.random.Generator, word: str) -> str:
    """``word`` with one typo: two neighbouring letters swapped, a letter dropped or a letter doubled."""
    i = int(rng.integers(1, len(word) - 1))
    kind = int(rng.integers(3))
    if kind == 0 and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == 2:
        return word[:i] + word[i] + word[i:]
    return word[:i] + word[i + 1 :]


def _noise(rng: np.random.Generator, label: int) -> Row:
    premise, hypothesis, label = _id_pair(rng, NOUNS, label)[-1]
    texts = [premise.split(), hypothesis.split()]
    for _ in range(int(rng.integers(1, 3))):
        words = texts[int(rng.integers(2))]
        candidates = [j for j, w in enumerate(words) if len(w) >= 4]
        j = candidates[int(rng.integers(len(candidates)))]
        typo = _misspell(rng, words[j])
        while typo in LEXICON:  # "banker" -> "baker" is no misspelling
            typo = _misspell(rng, words[j])
        words[j] = typo
    return " ".join(texts[0]), " ".join(texts[1]), label


OOD_SHIFTS: dict[str, Callable[[np.random.Generator, int], Row]] = {
    "hans_overlap": _hans_overlap,
    "hans_subsequence": _hans_subsequence,
    "negation": _negation,
    "length": _length,
    "unseen_vocab": _unseen,
    "spelling_noise": _noise,
}
"""The OOD shifts by test-set name (see the module docstring)."""


def generate_ood(name: str, n: int, seed: int) -> pd.DataFrame:
    """``n`` balanced examples of the OOD shift ``name``."""
    return _balanced(n, OOD_SHIFTS[name], seed)


def tokenizer_corpus(prompt: str, answers: tuple[str, str]) -> list[str]:
    """Clean text covering every word the demo uses (its tokenizer is trained on it, like a pre-trained one)."""
    words = [
        *NOUNS,
        *UNSEEN_NOUNS,
        *VERBS,
        *BASE_VERBS.values(),
        *ADJECTIVES,
        "the",
        "someone",
        "did",
        "not",
        "near",
        ",",
    ]
    texts = [" ".join(words), *ADJUNCTS]
    rng = np.random.default_rng(0)
    for _ in range(400):
        n1, n2 = _pick(rng, NOUNS + UNSEEN_NOUNS, 2)
        verb = VERBS[rng.integers(len(VERBS))]
        answer = answers[int(rng.integers(2))]
        texts.append(prompt.format(premise=f"the {n1} {verb} the {n2}", hypothesis=f"the {n2} {verb} someone") + answer)
    return texts


def write_demo_data(folder: Path, *, n_train: int, n_test: int, seed: int = 0) -> dict[str, Path]:
    """Write the demo's training set and test sets as JSONL files; return their paths by name."""
    folder.mkdir(parents=True, exist_ok=True)
    sets = {"train": generate_id(n_train, seed), "id": generate_id(n_test, seed + 1)}
    for offset, name in enumerate(OOD_SHIFTS, start=2):
        sets[name] = generate_ood(name, n_test, seed + offset)
    paths = {}
    for name, frame in sets.items():
        paths[name] = folder / f"{name}.jsonl"
        frame.to_json(paths[name], orient="records", lines=True)
    return paths
