"""Read a data set (registered or a user's file) into a ``premise, hypothesis, label`` table.

``label`` is 1 for entailment (answer " Yes") and 0 for not entailment (answer " No").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen.data.registry import DROP, REGISTRY, YES, RegisteredDataset
from gengen.errors import ConfigError, InputError
from gengen.study.tables import DataSpec

__all__ = ["DEFAULT_FILE_LABELS", "balanced_sample", "cap_examples", "few_shot_sample", "load_examples", "map_labels"]

DEFAULT_FILE_LABELS: Mapping[str, str] = {
    **{v: "Yes" for v in ("1", "true", "yes", "entailment", "entails", "entailed")},
    **{
        v: "No"
        for v in (
            "0",
            "false",
            "no",
            "not_entailment",
            "non-entailment",
            "not entailment",
            "contradiction",
            "neutral",
        )
    },
}
"""How a file's labels are read when its data spec gives no ``labels`` mapping (case-insensitive)."""

COLUMNS = ("premise", "hypothesis", "label")


def _label_text(value: Any) -> str:
    """A label value as the text the mappings are keyed by (``1.0`` -> ``"1"``, ``True`` -> ``"true"``)."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def map_labels(
    frame: pd.DataFrame,
    *,
    premise: str,
    hypothesis: str,
    label: str,
    labels: Mapping[Any, str],
    where: str,
    strict: bool,
    case_insensitive: bool = False,
) -> pd.DataFrame:
    """Select the three roles of ``frame`` and map its labels to 1 (Yes) / 0 (No), dropping the rest.

    Parameters
    ----------
    frame : DataFrame
        The raw rows.
    premise, hypothesis, label : str
        The columns holding each role.
    labels : mapping
        Raw label -> ``"Yes"``, ``"No"`` or ``"drop"`` (keys compared as text).
    where : str
        The data set's name, for error messages.
    strict : bool
        Whether a label value absent from ``labels`` is an error (else the row is dropped).
    case_insensitive : bool
        Compare label texts in lower case.

    Returns
    -------
    DataFrame
        Columns ``premise, hypothesis, label`` (int64), index reset.
    """
    missing = [c for c in (premise, hypothesis, label) if c not in frame.columns]
    if missing:
        raise InputError(f"{where}: no column {missing[0]!r} (columns: {', '.join(map(str, frame.columns))})")
    table = {_label_text(k).lower() if case_insensitive else _label_text(k): v for k, v in labels.items()}
    texts = frame[label].map(_label_text)
    if case_insensitive:
        texts = texts.str.lower()
    targets = texts.map(table)
    if strict and targets.isna().any():
        bad = texts[targets.isna()].iloc[0]
        raise InputError(
            f"{where}: column {label!r}: label {bad!r} has no mapping (known: {', '.join(sorted(table))}; "
            "add it to the test set's 'labels' table, mapped to Yes, No or drop)"
        )
    keep = targets.notna() & (targets != DROP)
    out = pd.DataFrame(
        {
            "premise": frame.loc[keep, premise].astype(str).to_numpy(),
            "hypothesis": frame.loc[keep, hypothesis].astype(str).to_numpy(),
            "label": (targets[keep] == YES).astype("int64").to_numpy(),
        }
    )
    if out.empty:
        raise InputError(f"{where}: no example left after mapping the labels")
    return out


def _read_file(path: Path, split: str | None, where: str) -> pd.DataFrame:
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            return pd.read_json(path, lines=True, dtype=False)
        if suffix == ".json":
            try:
                return pd.read_json(path, dtype=False)
            except ValueError:
                return pd.read_json(path, lines=True, dtype=False)
        if suffix in (".csv", ".tsv"):
            return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", keep_default_na=False)
        if suffix == ".parquet":
            return pd.read_parquet(path)
    except ValueError as error:
        raise InputError(f"{where}: {path}: cannot read ({error})") from None
    raise InputError(f"{where}: {path}: unsupported file type {suffix!r} (use .jsonl, .json, .csv, .tsv, .parquet)")


def _read_local(path: Path, split: str | None, where: str) -> pd.DataFrame:
    """A local file, or a folder holding ``<split>.<ext>``, the hub's parquet files or a ``save_to_disk`` output."""
    if path.is_file():
        return _read_file(path, split, where)
    if not path.is_dir():
        raise InputError(f"{where}: {path}: no such file or folder")
    if split is not None:
        for ext in (".jsonl", ".json", ".csv", ".tsv", ".parquet"):
            candidate = path / f"{split}{ext}"
            if candidate.is_file():
                return _read_file(candidate, split, where)
    if split is not None:
        # A copy of the hub's parquet files: data/<split>-00000-of-00001.parquet (datasets' push_to_hub layout),
        # or <split>/*.parquet and <config>/<split>/*.parquet (the refs/convert/parquet branch).
        shards = sorted(path.glob(f"data/{split}-*.parquet")) or sorted(path.glob(f"{split}/*.parquet"))
        shards = shards or sorted(path.glob(f"*/{split}/*.parquet"))
        if shards:
            try:
                return pd.concat([pd.read_parquet(shard) for shard in shards], ignore_index=True)
            except (OSError, ValueError) as error:
                raise InputError(f"{where}: {shards[0]}: cannot read ({error})") from None
    if (path / "dataset_dict.json").is_file() or (path / "dataset_info.json").is_file():
        import datasets

        try:
            loaded = datasets.load_from_disk(str(path))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            # A damaged or planted dataset_dict.json / dataset_info.json: whatever datasets makes of it.
            reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
            raise InputError(f"{where}: {path}: not a readable datasets.save_to_disk folder ({reason})") from None
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise InputError(f"{where}: {path}: no split {split!r} (splits: {', '.join(loaded)})")
            loaded = loaded[split]
        return loaded.to_pandas()
    raise InputError(f"{where}: {path}: no {split}.jsonl/.csv/.parquet and no datasets.save_to_disk output")


def _load_hub(entry: RegisteredDataset, split: str) -> pd.DataFrame:
    """Download (or read from the Hugging Face cache) one split of a registered data set."""
    import datasets

    # Data sets that ship a loading script (HANS) are read from the hub's parquet conversion instead: datasets
    # >= 3 no longer runs loading scripts.
    options = {"revision": entry.revision, "data_dir": entry.data_dir}
    loaded = datasets.load_dataset(
        entry.hub_id, entry.config, split=split, **{k: v for k, v in options.items() if v is not None}
    )
    return loaded.to_pandas()


def cap_examples(frame: pd.DataFrame, cap: int | None, seed: int = 0) -> pd.DataFrame:
    """At most ``cap`` rows: a fixed random subset (same for every run), in the original order."""
    if cap is None or len(frame) <= cap:
        return frame.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(frame), size=cap, replace=False))
    return frame.iloc[keep].reset_index(drop=True)


def load_examples(spec: DataSpec, *, cap: int | None = None, seed: int = 0) -> pd.DataFrame:
    """Read a data set as ``premise, hypothesis, label`` (1 = Yes, 0 = No).

    Parameters
    ----------
    spec : DataSpec
        A registered source (read from the hub, or from ``spec.path`` in the hub's schema) or a file with a
        column and label mapping.
    cap : int, optional
        Default cap on the number of examples (``spec.max_examples`` takes precedence).
    seed : int
        Seed of the capped subset (``evaluation.subsample_seed``; see :func:`cap_examples`).

    Returns
    -------
    DataFrame
    """
    where = f"data set {spec.name!r}"
    if spec.source is not None:
        entry = REGISTRY[spec.source]
        split = spec.split or entry.test_split
        raw = _read_local(Path(spec.path), split, where) if spec.path else _load_hub(entry, split)
        labels: Mapping[Any, str] = entry.labels
        if spec.neutral is not None and entry.neutral is not None:
            labels = {**entry.labels, entry.neutral: spec.neutral}
        frame = map_labels(
            raw,
            premise=entry.premise,
            hypothesis=entry.hypothesis,
            label=entry.label,
            # The study's own mapping replaces the registry's; then every label must be mapped.
            labels=spec.labels if spec.labels is not None else labels,
            where=where,
            strict=spec.labels is not None,
        )
    else:
        if spec.path is None:
            raise ConfigError(f"{where}: needs 'source' or 'path'")
        raw = _read_local(Path(spec.path), spec.split, where)
        frame = map_labels(
            raw,
            premise=spec.columns["premise"],
            hypothesis=spec.columns["hypothesis"],
            label=spec.columns["label"],
            labels=spec.labels or DEFAULT_FILE_LABELS,
            where=where,
            strict=True,
            case_insensitive=spec.labels is None,
        )
    return cap_examples(frame, spec.max_examples if spec.max_examples is not None else cap, seed)


def balanced_sample(frame: pd.DataFrame, shots: int, seed: int) -> pd.DataFrame:
    """A few-shot training sample: ``shots`` rows, half Yes and half No (Yes gets the odd one), fixed by ``seed``.

    Raises
    ------
    InputError
        A class has fewer rows than asked for.
    """
    rng = np.random.default_rng(seed)
    per_class = {1: shots - shots // 2, 0: shots // 2}
    parts = []
    for label, count in per_class.items():
        rows = np.flatnonzero(frame["label"].to_numpy() == label)
        if len(rows) < count:
            raise InputError(f"few-shot sample of {shots}: only {len(rows)} training examples with label {label}")
        parts.append(rng.choice(rows, size=count, replace=False))
    order = rng.permutation(np.concatenate(parts))
    return frame.iloc[order].reset_index(drop=True)


def few_shot_sample(frame: pd.DataFrame, shots: int, seed: int, *, balanced: bool = True) -> pd.DataFrame:
    """A few-shot training sample of ``shots`` rows drawn by ``seed``.

    Parameters
    ----------
    frame : DataFrame
        The training set (``label`` 1 = Yes, 0 = No).
    shots : int
        Rows to draw.
    seed : int
        The run's data seed.
    balanced : bool
        Half Yes and half No (:func:`balanced_sample`), or ``shots`` rows drawn uniformly without replacement
        whatever their labels (llmft's ``np.random.choice`` draw; here from ``numpy.random.default_rng(seed)``,
        so the rows differ from llmft's for the same seed).

    Returns
    -------
    DataFrame
        The sample, in a random order.

    Raises
    ------
    InputError
        The training set has fewer rows (of a class, when balanced) than asked for.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"premise": list("abcdefgh"), "hypothesis": "h", "label": [1, 0] * 4})
    >>> int(few_shot_sample(frame, 4, seed=0)["label"].sum())
    2
    >>> len(few_shot_sample(frame, 5, seed=0, balanced=False))
    5
    """
    if balanced:
        return balanced_sample(frame, shots, seed)
    if len(frame) < shots:
        raise InputError(f"few-shot sample of {shots}: only {len(frame)} training examples")
    rows = np.random.default_rng(seed).choice(len(frame), size=shots, replace=False)
    return frame.iloc[rows].reset_index(drop=True)
