"""Scoring a checkpoint on test sets: accuracy from the two answer logits and the gold answer's log-probability.

For each example the prompt is fed to the model and the logits at its last token are read:

* ``acc``: the share of examples whose gold answer has the larger of the two answer logits
  (the prediction is " Yes" when ``logit(Yes) > logit(No)``, " No" when it is smaller, and
  ``evaluation.ties`` — " No" by default — when the two are equal, which low-precision logits make common);
* ``logprob``: the mean over examples of ``log softmax(logits)[gold answer]`` over the full vocabulary.

Examples are scored in batches, without gradients, sorted by length (longest first) so that a batch holds
prompts of similar lengths, right-padded; the logits of each row are read at its own last real token.

:func:`score_checkpoints` scores an existing series of checkpoints (local folders or hub revisions) without
training and commits each checkpoint's scores to the store as soon as they are computed: the series loop of
:func:`gengen.scoring.score_series` with :class:`GengenBackend`, this scorer as a scoring backend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
import pandas as pd
import torch

from gengen.errors import GengenError, InputError
from gengen.scoring.checkpoints import Checkpoint, find_checkpoints
from gengen.scoring.models import (
    Precision,
    answer_token_ids,
    encode_prompts,
    last_token_logits,
    load_adapter,
    load_model,
    load_tokenizer,
    pad_batch,
    precision_for,
    select_device,
)
from gengen.study.config import StudyConfig
from gengen.study.tables import METRICS
from gengen.study.training_config import DEVICES

if TYPE_CHECKING:
    from gengen.scoring.series import ScoreRequest, SeriesLabels

__all__ = [
    "Checkpoint",
    "GengenBackend",
    "ScoreResult",
    "SeriesLoader",
    "find_checkpoints",
    "length_batches",
    "score_checkpoints",
    "score_encoded",
    "score_rows",
    "tally_encoded",
]


@dataclass(frozen=True)
class ScoreResult:
    """The scores of one checkpoint on one test set.

    Attributes
    ----------
    acc : float
        Accuracy from the two answer logits.
    logprob : float
        Mean log-probability of the gold answer (natural log, full vocabulary).
    n_examples : int
        Examples scored.
    seconds : float
        Wall time of the scoring.
    """

    acc: float
    logprob: float
    n_examples: int
    seconds: float

    def metric(self, name: str) -> float:
        """The value of metric ``name`` (``"acc"`` or ``"logprob"``)."""
        return {"acc": self.acc, "logprob": self.logprob}[name]


def length_batches(lengths: Sequence[int], batch_size: int, max_tokens: int | None = None) -> list[list[int]]:
    """Batches of example indices, longest prompts first, each at most ``batch_size`` rows and, with
    ``max_tokens``, at most that many padded tokens (rows × longest prompt; a longer prompt goes alone).

    Sorting by length keeps padding small; the token budget keeps the memory of a batch of long prompts
    as small as that of a batch of short ones.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = lengths[current[0]] if current else lengths[index]
        too_many = len(current) >= batch_size
        too_long = max_tokens is not None and current and (len(current) + 1) * longest > max_tokens
        if current and (too_many or too_long):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def score_encoded(
    model: Any,
    encoded: Sequence[Sequence[int]],
    labels: np.ndarray,
    answer_ids: tuple[int, int],
    *,
    pad_id: int,
    batch_size: int = 32,
    device: torch.device | None = None,
    max_tokens: int | None = None,
    ties: str = "No",
) -> ScoreResult:
    """Score tokenised prompts.

    Parameters
    ----------
    model : transformers causal LM
        In eval mode or not (it is put in eval mode and restored).
    encoded : sequence of token-id lists
        One prompt per example.
    labels : array of int
        1 where the gold answer is Yes, 0 where it is No.
    answer_ids : (int, int)
        Token ids of the Yes and No answers.
    pad_id : int
        Token id used for padding (masked out).
    batch_size : int
        Examples per forward pass.
    device : torch.device, optional
        Where to run (default: the model's device).
    max_tokens : int, optional
        Cap on the padded tokens of a batch (see :func:`length_batches`).
    ties : {"No", "Yes"}
        The answer predicted when the two answer logits are equal.

    Returns
    -------
    ScoreResult
    """
    if ties not in ("No", "Yes"):
        raise InputError(f"scoring: ties must be 'No' or 'Yes', got {ties!r}")
    labels = np.asarray(labels, dtype=np.int64)
    if len(encoded) != len(labels) or len(labels) == 0:
        raise InputError(f"scoring: {len(encoded)} prompts and {len(labels)} labels (need as many, at least one)")
    start = time.perf_counter()
    correct, total_logprob = tally_encoded(
        model, encoded, labels, answer_ids, pad_id=pad_id, batch_size=batch_size, device=device,
        max_tokens=max_tokens, ties=ties,
    )  # fmt: skip
    n = len(labels)
    return ScoreResult(correct / n, total_logprob / n, n, time.perf_counter() - start)


def tally_encoded(
    model: Any,
    encoded: Sequence[Sequence[int]],
    labels: np.ndarray,
    answer_ids: tuple[int, int],
    *,
    pad_id: int,
    batch_size: int = 32,
    device: torch.device | None = None,
    max_tokens: int | None = None,
    ties: str = "No",
) -> tuple[int, float]:
    """The sums behind :func:`score_encoded`: examples answered right, and the gold answers' summed log-probability.

    Sums, so that the shards of a test set scored by several processes add up to the whole set's; the
    arguments are :func:`score_encoded`'s (no examples: ``(0, 0.0)``).

    Returns
    -------
    (int, float)
        Correct answers, and the sum of ``log softmax(logits)[gold answer]`` over the examples.
    """
    if len(encoded) == 0:
        return 0, 0.0
    device = device or next(model.parameters()).device
    batches = length_batches([len(e) for e in encoded], batch_size, max_tokens)
    yes, no = answer_ids
    correct = 0
    total_logprob = 0.0
    was_training = model.training
    model.eval()
    try:
        # no_grad, not inference_mode: an FSDP-sharded model re-gathers its parameters in the forward pass, and
        # inference tensors made there could not be updated by the training steps that follow.
        with torch.no_grad():
            for rows in batches:
                ids, mask, lengths = pad_batch([encoded[i] for i in rows], pad_id, device)
                logits = last_token_logits(model, ids, mask, lengths)
                # Keep only what the scores need: the two answer logits and the log-normaliser.
                pair = logits[:, [yes, no]]
                normaliser = torch.logsumexp(logits, dim=-1)
                del logits
                gold_yes = torch.from_numpy(labels[rows] == 1).to(device)
                predict_yes = pair[:, 0] >= pair[:, 1] if ties == "Yes" else pair[:, 0] > pair[:, 1]
                correct += int((predict_yes == gold_yes).sum())
                gold_logit = torch.where(gold_yes, pair[:, 0], pair[:, 1])
                total_logprob += float((gold_logit - normaliser).sum(dtype=torch.float64))
    finally:
        model.train(was_training)
    return correct, total_logprob


@dataclass(frozen=True)
class EncodedTestset:
    """A test set ready for scoring: prompts as token ids and labels."""

    name: str
    encoded: list[list[int]]
    labels: np.ndarray


def encode_testsets(config: StudyConfig, tokenizer: Any) -> list[EncodedTestset]:
    """Load and tokenise every test set of a study (capped by ``evaluation.max_examples``, the subset drawn by
    ``evaluation.subsample_seed``; prompts cut to ``training.max_length`` on ``training.truncation``'s side)."""
    from gengen.data import load_examples

    out = []
    training, evaluation = config.training, config.evaluation
    for spec in config.testsets:
        frame = load_examples(spec, cap=evaluation.max_examples, seed=evaluation.subsample_seed)
        encoded = encode_prompts(tokenizer, frame, config.task.prompt, training.max_length, training.truncation)
        out.append(EncodedTestset(spec.name, encoded, frame["label"].to_numpy()))
    return out


def unscored(
    step: int, testsets: Sequence[str], metrics: Sequence[str], done: set[tuple[int, str, str]] | None
) -> list[str]:
    """The test sets of ``testsets`` to score at ``step``: those with *any* of ``metrics`` not in ``done``.

    A resumed run whose study asks for more metrics than it stored (``evaluation.metrics`` grew) scores each
    test set again; one whose every metric is stored is skipped. The trainer, :func:`score_rows` and
    ``gengen score`` decide with this one function.

    Parameters
    ----------
    step : int
        The checkpoint's step.
    testsets, metrics : sequence of str
        The names asked for.
    done : set of (step, testset, metric), or None
        What the store holds (None: nothing to skip).

    Returns
    -------
    list of str
        The test sets to score, in the order given.

    Examples
    --------
    >>> unscored(10, ["a", "b"], ["acc", "logprob"], {(10, "a", "acc"), (10, "b", "acc"), (10, "b", "logprob")})
    ['a']
    """
    if done is None:
        return list(testsets)
    return [name for name in testsets if any((step, name, metric) not in done for metric in metrics)]


def score_rows(
    model: Any,
    testsets: Sequence[EncodedTestset],
    answer_ids: tuple[int, int],
    *,
    pad_id: int,
    batch_size: int,
    metrics: Sequence[str],
    base: Mapping[str, Any],
    skip: set[tuple[int, str, str]] | None = None,
    log: Any = None,
    max_tokens: int | None = None,
    ties: str = "No",
) -> list[dict[str, Any]]:
    """Score a model on test sets and return score-table rows (``base`` supplies model, run, step, ...).

    Test sets whose every metric at ``base["step"]`` is in ``skip`` are not scored again (:func:`unscored`);
    ``ties`` is the answer predicted when the two answer logits are equal (see :func:`score_encoded`).
    """
    rows: list[dict[str, Any]] = []
    step = int(base["step"])
    wanted = set(unscored(step, [testset.name for testset in testsets], metrics, skip))
    for testset in testsets:
        if testset.name not in wanted:
            continue
        result = score_encoded(
            model,
            testset.encoded,
            testset.labels,
            answer_ids,
            pad_id=pad_id,
            batch_size=batch_size,
            max_tokens=max_tokens,
            ties=ties,
        )
        if log is not None:
            log(
                f"  step {step:>6} {testset.name:<24} acc {result.acc:.3f}  logprob {result.logprob:8.4f}  "
                f"({result.n_examples / max(result.seconds, 1e-9):,.0f} examples/s)"
            )
        for metric in metrics:
            rows.append(
                {
                    **base,
                    "testset": testset.name,
                    "metric": metric,
                    "value": result.metric(metric),
                    "n_examples": result.n_examples,
                }
            )
    return rows


# ---------------------------------------------------------------------------------------------- series


class SeriesLoader:
    """Loads the checkpoints of a series one after the other, loading a LoRA base only once.

    A checkpoint folder with ``adapter_config.json`` is a peft adapter over the base model named in it: the
    first such checkpoint loads the base (in ``precision.weights``) and its adapter; the next ones load their
    adapter next to it, switch to it and drop the previous one, so a series of N adapters costs one base
    load instead of N. Any other checkpoint is loaded whole.

    Parameters
    ----------
    precision : Precision
        From :func:`gengen.scoring.models.precision_for`, the same as training's.
    device : torch.device
    swap_adapters : bool
        False reloads the base for every adapter (the slow path, kept to check the fast one against).
    device_map : bool
        Spread each model over every visible GPU (``evaluation.device_map``).
    """

    def __init__(
        self, precision: Precision, device: torch.device, *, swap_adapters: bool = True, device_map: bool = False
    ):
        self.precision = precision
        self.device = device
        self.swap_adapters = swap_adapters
        self.device_map = "auto" if device_map else None
        self.model: Any = None
        self.base_path: str | None = None
        self.adapter: str | None = None
        self.base_loads = 0

    def load(self, checkpoint: Checkpoint) -> Any:
        """The model of ``checkpoint``, ready to score."""
        folder = Path(checkpoint.path)
        if checkpoint.revision is None and (folder / "adapter_config.json").is_file():
            return self._adapter(folder, checkpoint.step)
        self.model = None  # free the previous model before loading the next one
        self.base_path = self.adapter = None
        self.base_loads += 1
        self.model = load_model(
            checkpoint.path,
            revision=checkpoint.revision,
            dtype=self.precision.weights,
            device=self.device,
            device_map=self.device_map,
        )
        return self.model

    def _adapter(self, folder: Path, step: int) -> Any:
        import json

        try:
            base_path = str(json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise InputError(f"{folder}/adapter_config.json: no base model named in it ({error})") from None
        name = f"step{step}"
        if self.swap_adapters and self.base_path == base_path and self.model is not None:
            previous = self.adapter
            load_adapter(self.model, str(folder), name=name)
            self.model.set_adapter(name)
            if previous is not None and previous != name:
                self.model.delete_adapter(previous)
        else:
            self.model = None
            self.base_loads += 1
            base = load_model(base_path, dtype=self.precision.weights, device=self.device, device_map=self.device_map)
            self.model = load_adapter(base, str(folder), name=name)
            if self.device_map is None:
                self.model = self.model.to(self.device)
            self.base_path = base_path
        self.adapter = name
        return self.model


class GengenBackend:
    """gengen's own scorer as a scoring backend (:class:`gengen.scoring.ScoringBackend`, name ``"gengen"``).

    Scores each checkpoint on the study's test sets (the task's prompt and answers, ``evaluation.metrics``)
    with the dtypes of training's evaluations (:func:`gengen.scoring.models.precision_for`); all the test sets of a
    checkpoint are written in one transaction.

    Parameters
    ----------
    config : StudyConfig
        Supplies the task, test sets and evaluation settings (models and training's schedule are unused).
    store : gengen.store.database.Store, optional
        Default: the store in ``config.output``.
    tokenizer_path : str, optional
        Default: the first checkpoint's.
    swap_adapters : bool
        Load a LoRA base once for the whole series and swap adapters (see :class:`SeriesLoader`).
    """

    name: ClassVar[str] = "gengen"
    unit: ClassVar[str] = "test set"
    accepts: ClassVar[frozenset[str]] = frozenset({"device", "tokenizer", "threads"})

    def __init__(
        self,
        config: StudyConfig,
        *,
        store: Any = None,
        tokenizer_path: str | None = None,
        swap_adapters: bool = True,
    ):
        self.config = config
        self.store = store
        self.tokenizer_path = tokenizer_path
        self.swap_adapters = swap_adapters
        self.metrics = list(config.evaluation.metrics)
        self._session: _Session | None = None

    @classmethod
    def from_request(cls, request: ScoreRequest) -> GengenBackend:
        """:meth:`gengen.scoring.ScoringBackend.from_request`: the study is required; ``device`` replaces its
        ``training.device``, and the request's other options but the tokenizer and threads are refused."""
        from dataclasses import replace

        from gengen.scoring.series import refuse_options

        study = request.study
        if study is None:
            raise GengenError("the gengen backend scores a study's test sets: give the study file")
        refuse_options(request, cls)
        if request.device is not None:
            if request.device not in DEVICES:
                raise GengenError(f"--device: the gengen backend takes auto, cpu or cuda, got {request.device!r}")
            study = replace(study, training=replace(study.training, device=cast(Any, request.device)))
        return cls(study, tokenizer_path=request.tokenizer)

    @classmethod
    def check_trainable(cls, config: StudyConfig, *, trust_task_code: bool = False) -> None:
        """Nothing to check: the trainer scores each checkpoint with this backend as it makes it."""

    @classmethod
    def score_trained(
        cls, config: StudyConfig, runs: Sequence[Any], *, trust_task_code: bool = False, log: Any = print
    ) -> pd.DataFrame:
        """Nothing to score: the runs' checkpoints were scored during training (an empty table)."""
        return pd.DataFrame()

    @property
    def units(self) -> tuple[str, ...]:
        """The study's test sets."""
        return tuple(spec.name for spec in self.config.testsets)

    def open_store(self) -> Any:
        """The store given, else the study's."""
        from gengen.store.database import Store

        return self.store if self.store is not None else Store(self.config.output, study=self.config.name)

    def begin(self, store: Any, labels: SeriesLabels) -> None:
        """Nothing to check or record before the series."""

    def pending(self, step: int, done: set[tuple[int, str, str]]) -> list[str]:
        """The test sets with a metric of ``step`` not yet stored."""
        return unscored(step, self.units, self.metrics, done)

    def prepare(self, checkpoints: Sequence[Checkpoint]) -> SeriesLoader:
        """Device, dtypes, tokenizer (the first checkpoint's by default) and the encoded test sets."""
        config = self.config
        device = select_device(config.training.device)
        # The same dtypes as the evaluations during training (one function decides both).
        precision = precision_for(config.training.precision, config.training.method, device)
        first = checkpoints[0]
        tokenizer = load_tokenizer(self.tokenizer_path or first.path, None if self.tokenizer_path else first.revision)
        answer_ids = answer_token_ids(tokenizer, config.task.answers)
        self._session = _Session(
            device, precision, answer_ids, tokenizer.pad_token_id, encode_testsets(config, tokenizer)
        )
        return SeriesLoader(
            precision, device, swap_adapters=self.swap_adapters, device_map=config.evaluation.device_map
        )

    def attach(self, tokenizer: Any, device: torch.device, precision: Precision) -> None:
        """Score a live model: its tokenizer (the test sets encoded with it), device and autocast."""
        answer_ids = answer_token_ids(tokenizer, self.config.task.answers)
        testsets = encode_testsets(self.config, tokenizer)
        self._session = _Session(device, precision, answer_ids, tokenizer.pad_token_id, testsets)

    def _live(self) -> _Session:
        if self._session is None:
            raise RuntimeError("GengenBackend: call prepare (checkpoints) or attach (a live model) first")
        return self._session

    def tally(self, model: Any, units: Sequence[str], shard: Any) -> np.ndarray:
        """Per test set of ``units``, over this process's shard of its examples (``shard.indices``): examples,
        correct answers and summed gold log-probability (:func:`tally_encoded`); shape ``(len(units), 3)``."""
        session = self._live()
        evaluation = self.config.evaluation
        by_name = {testset.name: testset for testset in session.testsets}
        tallies = np.zeros((len(units), 3), dtype=np.float64)
        with session.precision.context(session.device):
            for row, name in enumerate(units):
                testset = by_name[name]
                mine = shard.indices(len(testset.labels))
                correct, logprob = tally_encoded(
                    model,
                    [testset.encoded[i] for i in mine],
                    testset.labels[mine],
                    session.answer_ids,
                    pad_id=session.pad_id,
                    batch_size=evaluation.batch_size,
                    device=session.device,
                    max_tokens=evaluation.max_tokens,
                    ties=evaluation.ties,
                )
                tallies[row] = (len(mine), correct, logprob)
        return tallies

    def rows(self, tallies: np.ndarray, units: Sequence[str], base: Mapping[str, Any]) -> pd.DataFrame:
        """Score-table rows of summed tallies: ``acc`` = correct / examples, ``logprob`` = summed / examples."""
        rows = []
        for (n, correct, logprob), name in zip(tallies, units, strict=True):
            values = {"acc": correct / n, "logprob": logprob / n}
            for metric in self.metrics:
                rows.append({**base, "testset": name, "metric": metric, "value": values[metric], "n_examples": int(n)})
        return pd.DataFrame(rows)

    def score_checkpoint(
        self, model: Any, checkpoint: Checkpoint, units: Sequence[str], *, base: dict[str, Any], log: Any
    ) -> Iterator[pd.DataFrame]:
        """The rows of ``units`` (test sets), all in one frame."""
        session = self._live()
        evaluation = self.config.evaluation
        with session.precision.context(session.device):
            rows = score_rows(
                model,
                [testset for testset in session.testsets if testset.name in units],
                session.answer_ids,
                pad_id=session.pad_id,
                batch_size=evaluation.batch_size,
                metrics=self.metrics,
                base=base,
                log=log,
                max_tokens=evaluation.max_tokens,
                ties=evaluation.ties,
            )
        if rows:
            yield pd.DataFrame(rows)


@dataclass(frozen=True)
class _Session:
    """What every checkpoint of a series shares under :class:`GengenBackend`."""

    device: torch.device
    precision: Precision
    answer_ids: tuple[int, int]
    pad_id: int
    testsets: list[EncodedTestset]


def score_checkpoints(
    config: StudyConfig,
    checkpoints: Sequence[Checkpoint],
    *,
    model_name: str,
    family: str = "",
    size: str = "",
    run: str = "main",
    store: Any = None,
    tokenizer_path: str | None = None,
    log: Any = print,
    swap_adapters: bool = True,
) -> pd.DataFrame:
    """Score a series of existing checkpoints on the study's test sets, committing each checkpoint's rows.

    :func:`gengen.scoring.score_series` with :class:`GengenBackend`.

    Parameters
    ----------
    config : StudyConfig
        Supplies the task (prompt, answers), test sets and evaluation settings; models and training are unused.
    checkpoints : sequence of Checkpoint
        From :func:`find_checkpoints`.
    model_name, family, size, run : str
        The labels of the scores in the store.
    store : gengen.store.database.Store, optional
        Default: the store in ``config.output``.
    tokenizer_path : str, optional
        Default: the first checkpoint.
    log : callable
        Progress messages.
    swap_adapters : bool
        Load a LoRA base once for the whole series and swap adapters (see :class:`SeriesLoader`).

    Returns
    -------
    DataFrame
        The rows written by this call (checkpoints already in the store are skipped).
    """
    from gengen.scoring.series import SeriesLabels, score_series

    backend = GengenBackend(config, store=store, tokenizer_path=tokenizer_path, swap_adapters=swap_adapters)
    labels = SeriesLabels(model_name, family, size, run, study=config.name)
    return score_series(backend, checkpoints, labels, log=log)


__all__ += ["METRICS", "EncodedTestset", "encode_testsets", "unscored"]
