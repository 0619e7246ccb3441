"""The tables of a study file that say where data come from and where and how runs go: the data sets (the task's
training set and each ``[[testsets]]``), ``[evaluation]`` (with ``[evaluation.lm_eval]``), ``[resources]`` and
``[executor]``.

Each table is a frozen dataclass and a parser that reads it from a :class:`gengen.study.section.Section`, naming
the key of every problem; :func:`gengen.study.config.parse_config` calls them, and :mod:`gengen.study.config` re-exports
every name. Nothing here imports torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gengen.scoring.registry import BACKENDS
from gengen.stats.limits import MAX_SEED
from gengen.study.section import Section, choice_problem, show
from gengen.study.training_config import MAX_EVALUATIONS, MAX_STEPS

__all__ = [
    "BACKENDS",
    "EXECUTORS",
    "LABEL_TARGETS",
    "METRICS",
    "NEUTRAL",
    "SUBMITIT_CLUSTERS",
    "TIE_ANSWERS",
    "DataSpec",
    "EvaluationConfig",
    "ExecutorConfig",
    "LmEvalConfig",
    "ResourcesConfig",
    "data_spec",
    "parse_evaluation",
    "parse_executor",
    "parse_lm_eval",
    "parse_resources",
    "resolve_path",
]

METRICS = ("acc", "logprob")
LABEL_TARGETS = ("Yes", "No", "drop")
EXECUTORS = ("local", "ray", "slurm")
NEUTRAL = ("drop", "No")
TIE_ANSWERS = ("No", "Yes")
SUBMITIT_CLUSTERS = ("slurm", "local", "debug")


@dataclass(frozen=True)
class DataSpec:
    """Where a data set comes from and how its rows map to (premise, hypothesis, Yes/No).

    Attributes
    ----------
    name : str
        The test set's name in the score table (for the training set: ``"train"``).
    source : str or None
        A key of :data:`gengen.data.REGISTRY` (its hub id, split and label mapping apply).
    path : str or None
        A local file (``.jsonl``, ``.json``, ``.csv``, ``.parquet``) or folder (``datasets.save_to_disk``
        output, or one holding ``<split>.jsonl``). With ``source`` it replaces the hub download and must have
        the hub's columns; without it the ``columns`` and ``labels`` mappings apply.
    split : str or None
        Split to read (default: the registry's test split; ``"train"`` for the training set).
    columns : dict
        ``{"premise": ..., "hypothesis": ..., "label": ...}``: the file's column for each role.
    labels : dict or None
        ``{raw label (as text): "Yes" | "No" | "drop"}``. For a file, the default accepts 1/0, true/false,
        yes/no, entailment/not_entailment (and contradiction/neutral as No); with ``source`` it replaces the
        registry's mapping.
    neutral : str or None
        For a registered three-way set: ``"drop"`` (the registry's default) or ``"No"`` (neutral counts as not
        entailed). Refused for two-way sets and together with ``labels``.
    max_examples : int or None
        Cap on the examples used (a fixed random subset; overrides ``evaluation.max_examples``).
    """

    name: str
    source: str | None = None
    path: str | None = None
    split: str | None = None
    columns: Mapping[str, str] = field(
        default_factory=lambda: {"premise": "premise", "hypothesis": "hypothesis", "label": "label"}
    )
    labels: Mapping[str, str] | None = None
    max_examples: int | None = None
    neutral: str | None = None


@dataclass(frozen=True)
class LmEvalConfig:
    """What ``gengen score`` asks lm-evaluation-harness for when ``evaluation.backend = "lm-eval"``.

    Attributes
    ----------
    tasks : tuple of str
        lm-eval task, group or tag names (``hellaswag``, ``arc_easy``, ``gengen_nli``...).
    num_fewshot : int or None
        In-context examples (None: each task's default).
    limit : int, float or None
        Examples per task: a count, or a fraction (< 1) of each task; None: all.
    include_paths : tuple of str
        Folders of further task YAML files (relative paths are read against the study file's folder).
    """

    tasks: tuple[str, ...]
    num_fewshot: int | None = None
    limit: int | float | None = None
    include_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvaluationConfig:
    """When checkpoints are scored, and how.

    Step 0 (before training) and the last step are always scored; ``steps`` adds explicit steps, ``every``
    every N optimiser steps and ``log_points`` that many log-spaced steps between 1 and the last step.
    ``max_tokens`` caps the padded tokens of a scoring batch (``batch_size`` caps its rows). ``device_map``
    spreads a model too large for one GPU over all visible GPUs when ``gengen score`` loads it (accelerate).
    ``backend = "lm-eval"`` makes ``gengen score`` score the tasks of ``[evaluation.lm_eval]`` with
    lm-evaluation-harness instead of the study's test sets (which may then be left out; training, if any,
    still evaluates its ``[[testsets]]`` with gengen's scorer). ``max_examples`` keeps a random subset of a
    larger test set drawn by ``subsample_seed`` (the same for every run). ``ties``: the answer predicted when
    the two answer logits are equal (``"No"``, the default; ``"Yes"`` is what an argmax over [Yes, No] does).
    """

    steps: tuple[int, ...] = ()
    every: int | None = None
    log_points: int | None = None
    max_examples: int | None = None
    batch_size: int = 32
    metrics: tuple[str, ...] = METRICS
    max_tokens: int | None = None
    device_map: bool = False
    backend: str = "gengen"
    lm_eval: LmEvalConfig | None = None
    subsample_seed: int = 0
    ties: str = "No"


@dataclass(frozen=True)
class ResourcesConfig:
    """What one run asks of the executor: a Ray task's ``num_cpus``/``num_gpus``/``memory``, a Slurm job's
    ``cpus_per_task``/``gpus_per_node``/``mem_gb``.

    Attributes
    ----------
    cpus : int
        CPU cores per run (also the torch threads of a run unless ``executor.threads`` says otherwise).
    gpus : float
        GPUs per run; a fraction packs several small runs on one GPU under Ray (Slurm needs a whole number).
    memory_gb : float or None
        Memory per run in GiB (None: the executor's default).
    """

    cpus: int = 1
    gpus: float = 0.0
    memory_gb: float | None = None


@dataclass(frozen=True)
class ExecutorConfig:
    """Where and how the runs of a study are executed (``gengen run``; see ``docs/executors.md``).

    Attributes
    ----------
    kind : str
        ``"local"`` (one machine), ``"ray"`` (a Ray task per run) or ``"slurm"`` (a submitit job per run).
    jobs : int or None
        Runs in flight at once: local processes (default 1, in the calling process); for Ray and Slurm a cap
        on submitted runs (default: no cap, the cluster queues them).
    threads : int or None
        torch CPU threads of each run (default: ``resources.cpus``).
    retries : int
        Times a failed run is submitted again before it is reported as failed.
    address : str or None
        Ray: the cluster to join (``"auto"``, ``"ray://host:10001"``...); None starts a local Ray instance
        (or joins the one already initialised in the process).
    cluster : str
        Slurm: submitit's backend, ``"slurm"``, or ``"local"`` / ``"debug"`` to try a study without Slurm.
    partition, account, qos, constraint : str or None
        Slurm job options.
    time_minutes : int
        Slurm time limit of each job.
    setup : tuple of str
        Slurm: shell lines run before the job (``module load ...``, ``source .venv/bin/activate``).
    folder : str or None
        Slurm: folder of submitit's job files and logs (default: ``<output>/slurm``).
    additional : dict
        Slurm: other ``#SBATCH`` options (``{"mail-type": "FAIL"}``).
    """

    kind: str = "local"
    jobs: int | None = None
    threads: int | None = None
    retries: int = 0
    address: str | None = None
    cluster: str = "slurm"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    time_minutes: int = 1440
    setup: tuple[str, ...] = ()
    folder: str | None = None
    additional: Mapping[str, str | int] = field(default_factory=dict)


def resolve_path(path: str, base: Path, *, local: bool = False) -> str:
    """A path resolved against the config's folder.

    Data paths (``local``) always are; a model path only when it exists there or starts with ``./`` or
    ``../`` (otherwise it may be a hub id such as ``facebook/opt-125m`` and is kept as written).
    """
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return str(candidate)
    if local or (base / candidate).exists() or path.startswith(("./", "../")):
        return str((base / candidate).resolve())
    return path


def data_spec(section: Section, name: str, base: Path, *, default_split: str | None) -> DataSpec:
    from gengen.data.registry import REGISTRY

    source = section.string("source", None)
    path = section.string("path", None)
    if source is None and path is None:
        raise section.error(None, "needs 'source' (a registered data set) or 'path' (a local file or folder)")
    if source is not None and source not in REGISTRY:
        close = difflib.get_close_matches(source, sorted(REGISTRY), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(sorted(REGISTRY))}"
        raise section.error("source", f"unknown data set {source!r} ({hint})")
    split = section.string("split", default_split)
    if source is not None and split is not None and split not in REGISTRY[source].splits and path is None:
        if split != "train":
            raise section.error(
                "split", f"{source} has no split {split!r} (known: {', '.join(REGISTRY[source].splits)})"
            )
    columns = {"premise": "premise", "hypothesis": "hypothesis", "label": "label"}
    if section.has("columns") and source is not None:
        # A registered set is read in the hub's schema; a silently ignored mapping would be worse than none.
        raise section.error("columns", f"not used with source = {source!r} (the registry's columns apply); drop it")
    if section.has("columns"):
        cols = section.table("columns")
        for role in columns:
            columns[role] = cols.string(role, columns[role])
        cols.finish()
    labels = None
    if section.has("labels"):
        table = section.table("labels")
        labels = {}
        for raw in list(table.data):
            labels[raw] = table.string(raw, choices=LABEL_TARGETS)
        table.finish()
        if not any(v == "Yes" for v in labels.values()) or not any(v == "No" for v in labels.values()):
            raise section.error("labels", "must map at least one label to 'Yes' and one to 'No'")
    neutral = section.string("neutral", None, choices=NEUTRAL)
    if neutral is not None:
        if source is None:
            raise section.error("neutral", "only for a registered source; map a file's labels with 'labels'")
        if REGISTRY[source].neutral is None:
            raise section.error("neutral", f"{source} is a two-way data set (it has no neutral class)")
        if labels is not None:
            raise section.error("neutral", "give either 'labels' or 'neutral', not both")
    max_examples = section.number("max_examples", None, integer=True, positive=True)
    section.finish()
    if path is not None:
        path = resolve_path(path, base, local=True)
        if not Path(path).exists():
            raise section.error("path", f"no such file or folder: {path}")
    return DataSpec(
        name=name,
        source=source,
        path=path,
        split=split,
        columns=columns,
        labels=labels,
        max_examples=max_examples,
        neutral=neutral,
    )


def parse_evaluation(section: Section, base: Path) -> EvaluationConfig:
    metrics = section.list_of("metrics", section.str_item, METRICS)
    for i, metric in enumerate(metrics):
        if metric not in METRICS:
            raise section.error(f"metrics[{i}]", choice_problem(metric, METRICS))
    if not metrics:
        raise section.error("metrics", "must not be empty")
    config = EvaluationConfig(
        steps=section.list_of("steps", section.int_item, (), max_items=MAX_EVALUATIONS),
        every=section.number("every", None, integer=True, positive=True, maximum=MAX_STEPS),
        log_points=section.number("log_points", None, integer=True, positive=True, maximum=MAX_EVALUATIONS),
        max_examples=section.number("max_examples", None, integer=True, positive=True),
        batch_size=section.number("batch_size", 32, integer=True, positive=True),
        metrics=metrics,
        max_tokens=section.number("max_tokens", None, integer=True, positive=True),
        device_map=section.boolean("device_map", False),
        backend=section.string("backend", "gengen", choices=BACKENDS),
        lm_eval=parse_lm_eval(section.table("lm_eval"), base) if section.has("lm_eval") else None,
        subsample_seed=section.number("subsample_seed", 0, integer=True, minimum=0, maximum=MAX_SEED),
        ties=section.string("ties", "No", choices=TIE_ANSWERS),
    )
    if config.backend == "lm-eval" and config.lm_eval is None:
        raise section.error("lm_eval", "missing: backend 'lm-eval' needs [evaluation.lm_eval] with its tasks")
    if config.backend != "lm-eval" and config.lm_eval is not None:
        raise section.error("backend", "set it to 'lm-eval' to score the tasks of [evaluation.lm_eval]")
    section.finish()
    return config


def parse_lm_eval(section: Section, base: Path) -> LmEvalConfig:
    tasks = section.list_of("tasks", section.str_item)
    if not tasks or len(set(tasks)) != len(tasks):
        raise section.error("tasks", f"expected a non-empty list of distinct task names, got {list(tasks)!r}")
    limit = section.number("limit", None, positive=True)
    if limit is not None and limit >= 1 and not float(limit).is_integer():
        raise section.error("limit", f"expected a count (an integer) or a fraction below 1, got {limit}")
    include_paths = tuple(
        resolve_path(p, base, local=True) for p in section.list_of("include_paths", section.str_item, ())
    )
    for i, path in enumerate(include_paths):
        if not Path(path).is_dir():
            raise section.error(f"include_paths[{i}]", f"no such folder: {path}")
    config = LmEvalConfig(
        tasks=tasks,
        num_fewshot=section.number("num_fewshot", None, integer=True, minimum=0),
        limit=None if limit is None else (int(limit) if limit >= 1 else limit),
        include_paths=include_paths,
    )
    section.finish()
    return config


def parse_resources(section: Section) -> ResourcesConfig:
    config = ResourcesConfig(
        cpus=section.number("cpus", 1, integer=True, positive=True),
        gpus=section.number("gpus", 0.0, minimum=0.0),
        memory_gb=section.number("memory_gb", None, positive=True),
    )
    section.finish()
    return config


def parse_executor(section: Section, base: Path) -> ExecutorConfig:
    kind = section.string("kind", "local")
    if kind not in EXECUTORS:
        close = difflib.get_close_matches(kind, EXECUTORS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"expected one of {', '.join(map(repr, EXECUTORS))}"
        raise section.error("kind", f"unknown executor {kind!r} ({hint})")
    additional: dict[str, str | int] = {}
    if section.has("additional"):
        table = section.table("additional")
        for key in list(table.data):
            value = table.raw(key)
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise table.error(key, f"expected a string or an integer, got {show(value)}")
            additional[key] = value
        table.finish()
    folder = section.string("folder", None)
    config = ExecutorConfig(
        kind=kind,
        jobs=section.number("jobs", None, integer=True, positive=True),
        threads=section.number("threads", None, integer=True, positive=True),
        retries=section.number("retries", 0, integer=True, minimum=0),
        address=section.string("address", None),
        cluster=section.string("cluster", "slurm", choices=SUBMITIT_CLUSTERS),
        partition=section.string("partition", None),
        account=section.string("account", None),
        qos=section.string("qos", None),
        constraint=section.string("constraint", None),
        time_minutes=section.number("time_minutes", 1440, integer=True, positive=True),
        setup=section.list_of("setup", section.str_item, ()),
        folder=None if folder is None else resolve_path(folder, base, local=True),
        additional=additional,
    )
    section.finish()
    return config
