"""The study configuration: one TOML file describes models, task, test sets, training, data regime and evaluation.

:func:`load_config` reads and validates the whole file before any work starts; every problem is raised as
:class:`gengen.errors.ConfigError` with one line naming the file, the key and what is wrong, e.g.
``study.toml: training.learning_rate: expected a positive number, got -1``.

A minimal study::

    [study]
    name = "nli"
    output = "runs/nli"              # relative paths are relative to the TOML file's folder
    id_testset = "mnli"

    [[models]]
    name = "opt-125m"
    path = "facebook/opt-125m"       # a Hugging Face id or a local folder
    family = "opt"
    size = "125m"

    [task]
    prompt = "{premise} Question: {hypothesis} Yes or No?"
    answers = [" Yes", " No"]
    train = { source = "mnli", split = "train" }

    [[testsets]]
    name = "mnli"
    source = "mnli"                  # a registered data set (see gengen.data.REGISTRY) ...

    [[testsets]]
    name = "mine"
    path = "data/mine.jsonl"         # ... or a file with a column mapping
    columns = { premise = "context", hypothesis = "claim", label = "gold" }
    labels = { entailed = "Yes", refuted = "No", unknown = "drop" }

    [training]
    learning_rate = 1e-5
    epochs = 1
    batch_size = 16
    seeds = [1, 2, 3]

    [training.families.opt]          # optional: what one family changes (LoRA table, checkpointing, quantization)
    gradient_checkpointing = true

    [evaluation]
    every = 200
    max_examples = 2000

    [executor]                       # optional: where the runs go (see docs/executors.md)
    kind = "ray"                     # local (default) | ray | slurm
    retries = 1

    [resources]                      # optional: what one run asks for
    cpus = 4
    gpus = 1
    memory_gb = 32

Nothing here imports torch.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import re
import string
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gengen.analyse.options import OPTIONS, STUDY_OPTIONS, study_options
from gengen.errors import ConfigError, GengenError
from gengen.stats.limits import MAX_SEED
from gengen.study.section import Section
from gengen.study.tables import (
    METRICS,
    DataSpec,
    EvaluationConfig,
    ExecutorConfig,
    ResourcesConfig,
    data_spec,
    parse_evaluation,
    parse_executor,
    parse_resources,
    resolve_path,
)
from gengen.study.training_config import (
    MAX_RUNS,
    MAX_SEEDS,
    MAX_SHOTS,
    TrainingConfig,
    check_lora_targets,
    lora_targets,
    parse_training,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "AnalysisConfig",
    "DataRegime",
    "ModelSpec",
    "RunIdentity",
    "RunSpec",
    "StudyConfig",
    "TaskConfig",
    "load_config",
    "parse_config",
    "with_output",
]

DEFAULT_PROMPT = "{premise} Question: {hypothesis} Yes or No?"
LOSSES = ("full_vocab", "answers")


@dataclass(frozen=True)
class ModelSpec:
    """A model to fine-tune or score.

    Attributes
    ----------
    name : str
        The label stored in the score table's ``model`` column (unique within the study).
    path : str
        A Hugging Face hub id or a local folder.
    family, size : str
        Labels stored with every score (e.g. ``"opt"``, ``"125m"``).
    revision : str or None
        A hub revision (branch, tag or commit) of ``path``.
    tokenizer : str or None
        Where to load the tokenizer from, when not from ``path``.
    """

    name: str
    path: str
    family: str
    size: str
    revision: str | None = None
    tokenizer: str | None = None


@dataclass(frozen=True)
class TaskConfig:
    """The pattern-based task: prompt, answer words, loss and training data."""

    train: DataSpec
    prompt: str = DEFAULT_PROMPT
    answers: tuple[str, str] = (" Yes", " No")
    loss: str = "full_vocab"


@dataclass(frozen=True)
class DataRegime:
    """Full data (``shots`` empty) or few-shot: one run per shot count and data seed.

    ``balanced``: a few-shot sample has half Yes and half No (the default; the odd example goes to Yes), or,
    when false, is ``shots`` examples drawn uniformly without replacement (llmft's draw, classes unbalanced).
    """

    shots: tuple[int, ...] = ()
    data_seeds: tuple[int, ...] = (0,)
    balanced: bool = True


@dataclass(frozen=True)
class AnalysisConfig:
    """How ``gengen run`` analyses the study once every run is done (options of :func:`gengen.analyse`).

    Attributes
    ----------
    fit : {"auto", "linear", "gam"}
        How the ID score is regressed out: per condition the control :func:`gengen.stats.choose_pooled_control`
        picks from all its seeds (the default), a line, or a capped GAM (smooth) fit.
    metric : {"acc", "logprob"}
        The score analysed.
    gam_k, gam_method, gam_basis, max_edf
        The GAM control (keys ``gam_k``, ``gam_method`` = "gcv" | "reml", ``gam_basis`` = "cr" | "tp",
        ``max_edf`` = "auto" | "none" | a number), as :func:`gengen.analyse` takes them.

    One field per entry of the analysis' option table that a study file takes
    (:data:`gengen.analyse.options.STUDY_OPTIONS`), with the table's default and check.
    """

    fit: str = OPTIONS["fit"].default
    metric: str = OPTIONS["metric"].default
    gam_k: int = OPTIONS["gam_k"].default
    gam_method: str = OPTIONS["gam_method"].default
    gam_basis: str = OPTIONS["gam_basis"].default
    max_edf: float | str | None = OPTIONS["max_edf"].default
    related_groups: tuple[tuple[str, tuple[str, ...]], ...] | None = OPTIONS["related_groups"].default
    keep_related: bool = OPTIONS["keep_related"].default

    def options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`gengen.pipeline.run_study_analysis`."""
        return {option.name: getattr(self, option.name) for option in STUDY_OPTIONS}


@dataclass(frozen=True)
class RunSpec:
    """One fine-tuning run: a model, a training seed and (for few-shot) a shot count and data seed."""

    model: ModelSpec
    seed: int
    shots: int | None = None
    data_seed: int | None = None

    @property
    def key(self) -> str:
        """The store's ``run`` key, e.g. ``"seed=1"`` or ``"seed=1,shots=64,data_seed=0"``."""
        key = f"seed={self.seed}"
        if self.shots is not None:
            key += f",shots={self.shots},data_seed={self.data_seed}"
        return key


@dataclass(frozen=True)
class RunIdentity:
    """Which run a report is about: the first fields of ``RunResult`` (executors) and ``RunOutcome`` (train).

    Attributes
    ----------
    model, run : str
        The run's identity in the store: the model's name and :attr:`RunSpec.key`.
    """

    model: str
    run: str


@dataclass(frozen=True)
class StudyConfig:
    """A whole study, as read from its TOML file (see the module docstring)."""

    name: str
    output: Path
    id_testset: str
    models: tuple[ModelSpec, ...]
    task: TaskConfig
    testsets: tuple[DataSpec, ...]
    training: TrainingConfig = field(default_factory=TrainingConfig)
    data: DataRegime = field(default_factory=DataRegime)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    source: Path | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def runs(self) -> list[RunSpec]:
        """Every run of the study: model × seed (× shots × data seed), in a fixed order."""
        out: list[RunSpec] = []
        for model in self.models:
            for seed in self.training.seeds:
                if not self.data.shots:
                    out.append(RunSpec(model, seed))
                    continue
                for shots in self.data.shots:
                    for data_seed in self.data.data_seeds:
                        out.append(RunSpec(model, seed, shots, data_seed))
        return out

    def select_runs(self, models: Sequence[str] | None = None) -> list[RunSpec]:
        """The runs of the models named in ``models`` (all runs when None or empty).

        Raises
        ------
        ConfigError
            A name is not a model of the study (the message lists the models that exist).
        """
        if not models:
            return self.runs()
        known = [m.name for m in self.models]
        unknown = [name for name in models if name not in known]
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"--model {unknown[0]!r}: not a model of the study ({hint}models: {', '.join(known)})")
        return [r for r in self.runs() if r.model.name in models]

    def run_dir(self, run: RunSpec) -> Path:
        """The folder of a run's checkpoints and records: ``output/runs/<model folder>/<run key>``.

        The model's folder is :func:`safe_folder_name` of its name, so no name can lead outside ``output``.
        gengen calls this once per run, when it plans the run (:meth:`gengen.study.paths.RunPaths.for_run`), and
        passes the :class:`~gengen.study.paths.RunPaths` on.
        """
        from gengen._files import inside

        runs = self.output / "runs"
        folder = runs / safe_folder_name(run.model.name) / safe_folder_name(run.key.replace(",", "_").replace("=", "-"))
        # Inside the study output as resolved: a runs/ (or run folder) linking elsewhere is refused, naming it.
        return inside(self.output, folder.relative_to(self.output))

    def training_for(self, model: ModelSpec) -> TrainingConfig:
        """The training settings of ``model``: the study's, with its family's ``[training.families]`` changes."""
        return self.training.for_family(model.family)

    def lora_targets(self, model: ModelSpec) -> tuple[str, ...]:
        """The LoRA target modules of ``model``: its ``[training.families]`` table's, else
        ``training.lora.target_modules``, else its family's registry default (:mod:`gengen.study.families`;
        ``q_proj``, ``v_proj`` for OPT and the Llama-style families)."""
        return lora_targets(self.training, model.family)


def safe_folder_name(name: str) -> str:
    """A folder name for ``name`` that stays one level below its parent, whatever ``name`` holds.

    Letters, digits, ``.``, ``_``, ``-`` and ``+`` are kept; anything else (``/``, ``\\``, spaces, control
    characters) becomes ``_``, leading dots are replaced (no ``..`` or hidden folders), and when anything
    changed a short hash of the real name is appended so that two names never share a folder.
    """
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", name)
    safe = re.sub(r"^\.+", lambda m: "_" * len(m.group(0)), safe)[:100]
    if safe == name:
        return name
    return f"{safe}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def check_name(value: str, where: str) -> str:
    """``value`` if it is printable text (no control, format or NUL characters), else a ConfigError."""
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        raise ConfigError(f"{where}: {value!r} holds the control character {bad!r}; use printable text")
    if value != value.strip():
        raise ConfigError(f"{where}: {value!r} starts or ends with white space")
    return value


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def check_model_sources(config: StudyConfig, models: Sequence[ModelSpec] | None = None) -> None:
    """Check, without loading anything, that every model (and tokenizer) path can be what it claims to be.

    A local path (absolute after resolution against the study file's folder) must be a folder holding a
    ``config.json`` (or a peft ``adapter_config.json``); anything else must look like a hub id
    (``owner/name``); whether the hub has it is only known when it is downloaded.

    Raises
    ------
    ConfigError
        Naming the model and the path.
    """
    for model in models if models is not None else config.models:
        for role, path in (("path", model.path), ("tokenizer", model.tokenizer)):
            if path is None:
                continue
            where = f"model {model.name!r}: {role} {path!r}"
            if Path(path).is_absolute():
                folder = Path(path)
                if not folder.exists():
                    raise ConfigError(f"{where}: no such folder")
                if not folder.is_dir():
                    raise ConfigError(f"{where}: not a folder (a model is a folder with a config.json)")
                wanted = ("tokenizer_config.json", "tokenizer.json", "config.json") if role == "tokenizer" else ()
                if not any((folder / name).is_file() for name in (*wanted, "config.json", "adapter_config.json")):
                    raise ConfigError(f"{where}: the folder has no config.json; is it a saved model?")
            elif not _HUB_ID.match(path):
                raise ConfigError(
                    f"{where}: neither an existing local folder nor a hub id like 'owner/name' "
                    "(relative paths are read against the study file's folder)"
                )


# ---------------------------------------------------------------------------------------------- validation

_Section = Section  # the name the parsers below (and the [analysis] section) use


def _analysis(section: _Section) -> AnalysisConfig:
    """``[analysis]``: the keys of the analysis' option table that a study takes, checked by that table
    (:func:`gengen.analyse.options.study_options`); an error names the key (``analysis.gam_k``)."""
    try:
        values = study_options(section.raw, METRICS)
    except GengenError as error:
        if error.option is None:
            raise
        raise section.error(error.option, error.problem or str(error)) from None
    section.finish()
    return AnalysisConfig(**values)


def _models(top: _Section, origin: str, base: Path) -> list[ModelSpec]:
    """The ``[[models]]`` tables, with unique names."""
    models = []
    for section in top.tables("models"):
        spec = ModelSpec(
            name=check_name(section.string("name"), f"{origin}: {section.key('name')}"),
            path=resolve_path(section.string("path"), base),
            family=section.string("family"),
            size=section.string("size"),
            revision=section.string("revision", None),
            tokenizer=(lambda t: None if t is None else resolve_path(t, base))(section.string("tokenizer", None)),
        )
        section.finish()
        models.append(spec)
    names = [m.name for m in models]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise top.error("models", f"model name {duplicated[0]!r} appears more than once")
    return models


def _task(task_section: _Section, base: Path) -> TaskConfig:
    """The ``[task]`` table: a safe prompt template, two answers, the loss and the training set."""
    prompt = task_section.string("prompt", DEFAULT_PROMPT)
    for placeholder in ("{premise}", "{hypothesis}"):
        if placeholder not in prompt:
            raise task_section.error("prompt", f"must contain {placeholder}")
    try:
        fields = [f for _, f, spec, conv in string.Formatter().parse(prompt) if f is not None]
        prompt.format(premise="", hypothesis="")
    except (KeyError, IndexError, ValueError) as error:
        raise task_section.error(
            "prompt", f"invalid template ({error!r}); only {{premise}} and {{hypothesis}}"
        ) from None
    # Attribute or index access ({premise.__class__}, {premise[0]}) would read Python internals into prompts.
    bad_field = next((f for f in fields if f not in ("premise", "hypothesis")), None)
    if bad_field is not None:
        raise task_section.error("prompt", f"field {{{bad_field}}} not allowed; only {{premise}} and {{hypothesis}}")
    answers = task_section.list_of("answers", task_section.str_item, (" Yes", " No"))
    if len(answers) != 2 or answers[0] == answers[1]:
        raise task_section.error("answers", f"expected two different strings [yes, no], got {list(answers)!r}")
    loss = task_section.string("loss", "full_vocab", choices=LOSSES)
    train = data_spec(task_section.table("train"), "train", base, default_split="train")
    task_section.finish()
    return TaskConfig(train=train, prompt=prompt, answers=(answers[0], answers[1]), loss=loss)


def _testsets(top: _Section, origin: str, base: Path, lm_eval_tasks: Sequence[str]) -> list[DataSpec]:
    """The ``[[testsets]]`` tables (none needed when lm-eval scores the study), with unique names."""
    testsets = []
    # Scored by lm-eval, a study may have no test sets of its own.
    for section in top.tables("testsets") if not lm_eval_tasks or top.has("testsets") else []:
        testset_name = check_name(section.string("name"), f"{origin}: {section.key('name')}")
        testsets.append(data_spec(section, testset_name, base, default_split=None))
    testset_names = [t.name for t in testsets]
    duplicated = sorted({n for n in testset_names if testset_names.count(n) > 1})
    if duplicated:
        raise top.error("testsets", f"test set name {duplicated[0]!r} appears more than once")
    return testsets


def _regime(top: _Section, models: Sequence[ModelSpec], training: TrainingConfig) -> DataRegime:
    """The ``[data]`` table (few-shot regimes), and the study's count of runs within gengen's limit."""
    regime = top.table("data", required=False)
    shots = regime.list_of(
        "shots", lambda label, v: regime.int_item(label, v, minimum=2, maximum=MAX_SHOTS), (), max_items=MAX_SEEDS
    )
    data_seeds = regime.list_of(
        "data_seeds", functools.partial(regime.int_item, maximum=MAX_SEED), (0,), max_items=MAX_SEEDS
    )
    if not data_seeds:
        raise regime.error("data_seeds", "must not be empty")
    # A repeated shot count or data seed names the same run twice: both would write into one run folder.
    for name, values in (("shots", shots), ("data_seeds", data_seeds)):
        if repeated := sorted({value for value in values if values.count(value) > 1}):
            raise regime.error(name, f"{repeated[0]} appears more than once; each names one run folder")
    balanced = regime.boolean("balanced", True)
    regime.finish()
    n_runs = len(models) * len(training.seeds) * (len(shots) * len(data_seeds) if shots else 1)
    if n_runs > MAX_RUNS:
        raise top.error(
            "training.seeds",
            f"{len(models)} models x {len(training.seeds)} seeds"
            + (f" x {len(shots)} shots x {len(data_seeds)} data seeds" if shots else "")
            + f" are {n_runs:,} runs, above gengen's limit of {MAX_RUNS:,}; split the study",
        )
    return DataRegime(shots=tuple(shots), data_seeds=tuple(data_seeds), balanced=balanced)


def parse_config(data: Mapping[str, Any], *, origin: str = "config", base: Path | None = None) -> StudyConfig:
    """Validate a parsed TOML document into a :class:`StudyConfig`.

    Parameters
    ----------
    data : mapping
        The document (as :func:`tomllib.loads` returns it).
    origin : str
        The name used in error messages (usually the file name).
    base : Path, optional
        Folder against which relative paths are resolved (default: the current folder).

    Raises
    ------
    ConfigError
        The first problem found, naming the key.
    """
    base = Path.cwd() if base is None else Path(base)
    top = _Section(data, "", origin)

    study = top.table("study")
    name = check_name(study.string("name"), f"{origin}: study.name")
    output = Path(study.string("output", f"gengen-{safe_folder_name(name)}")).expanduser()
    output = output if output.is_absolute() else (base / output).resolve()
    id_testset = study.string("id_testset")
    study.finish()

    models = _models(top, origin, base)

    task = _task(top.table("task"), base)

    evaluation = parse_evaluation(top.table("evaluation", required=False), base)
    lm_eval_tasks = evaluation.lm_eval.tasks if evaluation.lm_eval is not None else ()
    testsets = _testsets(top, origin, base, lm_eval_tasks)
    testset_names = [t.name for t in testsets]
    if id_testset not in (*testset_names, *lm_eval_tasks):
        known = ", ".join((*testset_names, *lm_eval_tasks))
        raise study.error("id_testset", f"{id_testset!r} is not one of the test sets ({known})")

    training_section = top.table("training", required=False)
    training = parse_training(training_section, models)
    if training.method == "lora":
        check_lora_targets(training, models, training_section)
    regime = _regime(top, models, training)

    resources = parse_resources(top.table("resources", required=False))
    executor = parse_executor(top.table("executor", required=False), base)
    analysis = _analysis(top.table("analysis", required=False))
    top.finish()
    return StudyConfig(
        name=name,
        output=output,
        id_testset=id_testset,
        models=tuple(models),
        task=task,
        testsets=tuple(testsets),
        training=training,
        data=regime,
        evaluation=evaluation,
        executor=executor,
        resources=resources,
        analysis=analysis,
        raw=dict(data),
    )


MAX_STUDY_BYTES = 4 * 1024**2
"""The largest study file :func:`load_config` reads (real ones are a few KiB)."""


def load_config(path: str | Path, *, output: str | Path | None = None) -> StudyConfig:
    """Read and validate a study TOML file.

    Parameters
    ----------
    path : str or Path
        The file. Relative paths inside it are resolved against its folder.
    output : str or Path, optional
        The study's output folder (runs, store, analysis) instead of its ``[study] output`` (``gengen run
        --out``): it wins over the file's setting. A relative path is relative to the current folder, not the
        file's. Every process of a study must be given the same one (the workers of a multi-GPU run get it on
        their command line).

    Returns
    -------
    StudyConfig

    Raises
    ------
    ConfigError
        The file cannot be read or parsed, or a key is missing, unknown or invalid.
    """
    path = Path(path)
    if not path.is_file():
        if path.is_dir():
            raise ConfigError(f"{path}: a folder, expected a study TOML file")
        if path.exists():  # a FIFO, a device such as /dev/zero: reading it would block or never end
            raise ConfigError(f"{path}: not a regular file (a FIFO, device or socket), expected a study TOML file")
        raise ConfigError(f"{path}: no such file")
    size = path.stat().st_size
    if size > MAX_STUDY_BYTES:
        raise ConfigError(
            f"{path}: {size:,} bytes, above gengen's limit of {MAX_STUDY_BYTES:,} for a study file; "
            "is it the study's TOML?"
        )
    raw = path.read_bytes()
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw:
        raise ConfigError(f"{path}: not UTF-8 text (UTF-16 or binary?); save the study file as UTF-8")
    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))  # a byte-order mark is not TOML
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start}); save the study file as UTF-8") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a study file") from None
    config = parse_config(data, origin=path.name, base=path.resolve().parent)
    config = replace(config, source=path.resolve())
    return config if output is None else with_output(config, output)


def with_output(config: StudyConfig, output: str | Path) -> StudyConfig:
    """The study with its output folder moved to ``output`` (made absolute against the current folder).

    Parameters
    ----------
    config : StudyConfig
        The study.
    output : str or Path
        The new output folder; it replaces ``[study] output``.

    Returns
    -------
    StudyConfig
        The same study writing its runs, store and analysis under ``output``.
    """
    return replace(config, output=Path(output).expanduser().resolve())
