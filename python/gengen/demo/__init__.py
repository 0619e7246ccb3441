"""``gengen demo``: a whole study, offline, in a few minutes on a laptop CPU.

:func:`run_demo` writes into one folder

* ``data/``: the templated NLI task (:mod:`gengen.demo.tasks`): a training set, the ID test set and six OOD
  test sets, each a documented shift;
* ``models/``: tiny randomly initialised OPT and OLMo2 models, two sizes each, with a byte-level BPE tokenizer
  trained on the task's words (:mod:`gengen.demo.tiny`);
* ``study.toml``: a copy of the bundled study (two seeds per model);

then fine-tunes and scores every run into ``gengen.sqlite`` (resumable like any study) and ends with
:func:`finish`: a summary of the score table, then the analysis and report (:mod:`gengen.pipeline`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pandas as pd

__all__ = ["MODEL_SHAPES", "finish", "prepare_demo", "run_demo", "summarise"]

MODEL_SHAPES: dict[str, dict[str, int]] = {
    "s": {"hidden": 32, "layers": 2, "heads": 2},
    "m": {"hidden": 64, "layers": 2, "heads": 4},
}
"""Width, depth and heads of the demo's two model sizes (the same for both families)."""

N_TRAIN = 4000
N_TEST = 200
Log = Callable[[str], None]


def study_template() -> str:
    """The bundled study TOML."""
    return resources.files("gengen.demo").joinpath("study.toml").read_text(encoding="utf-8")


def prepare_demo(out: Path, *, log: Log = print) -> Path:
    """Write the demo's study file, data, tokenizer and models into ``out`` (kept when already there).

    Returns
    -------
    Path
        The study file, ``out / "study.toml"``.
    """
    from gengen._files import inside
    from gengen.demo.tasks import OOD_SHIFTS, tokenizer_corpus, write_demo_data
    from gengen.demo.tiny import build_tiny_model, count_parameters, train_tokenizer
    from gengen.scoring.models import answer_token_ids
    from gengen.study.config import load_config

    out.mkdir(parents=True, exist_ok=True)
    for name in ("study.toml", "data", "models", "report"):  # none may lead out of the demo's folder
        inside(out, name)
    study = out / "study.toml"
    if not study.is_file():
        study.write_text(study_template(), encoding="utf-8")
    data = out / "data"
    if not all((data / f"{name}.jsonl").is_file() for name in ("train", "id", *OOD_SHIFTS)):
        write_demo_data(data, n_train=N_TRAIN, n_test=N_TEST)
    config = load_config(study)
    tokenizer_dir = out / "models" / "tokenizer"
    tokenizer = None
    for index, model in enumerate(config.models):
        folder = Path(model.path)
        if (folder / "config.json").is_file():
            continue
        if tokenizer is None:
            tokenizer = train_tokenizer(tokenizer_corpus(config.task.prompt, config.task.answers), tokenizer_dir)
            answer_token_ids(tokenizer, config.task.answers)
        shape = MODEL_SHAPES[model.size]
        network = build_tiny_model(
            model.family,
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            seed=index,
            **shape,
        )
        network.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        log(f"built {model.name}: {model.family}, {count_parameters(network):,} parameters")
    return study


def summarise(scores: pd.DataFrame, id_testset: str) -> str:
    """A text summary: final accuracy of each model (mean over its runs) on every test set, ID first."""
    acc = scores[scores["metric"] == "acc"]
    if acc.empty:
        return "no accuracy scores"
    last = acc[acc["step"] == acc.groupby(["model", "run"])["step"].transform("max")]
    first = acc[acc["step"] == 0]
    table = last.pivot_table(index="model", columns="testset", values="value", aggfunc="mean")
    start = first.pivot_table(index="model", columns="testset", values="value", aggfunc="mean")
    order = [id_testset, *sorted(c for c in table.columns if c != id_testset)]
    table = table[order]
    lines = [f"final accuracy (mean over runs; step 0 in brackets), {acc['run'].nunique()} seeds per model:"]
    width = max(len(c) for c in order)
    header = " " * width + "  " + "  ".join(f"{m:>14}" for m in table.index)
    lines.append(header)
    for testset in order:
        cells = "  ".join(f"{table.loc[m, testset]:>6.3f} ({start.loc[m, testset]:.3f})" for m in table.index)
        lines.append(f"{testset:<{width}}  {cells}")
    steps = acc.groupby(["model", "run"])["step"].nunique()
    lines.append(
        f"{len(scores)} scores: {acc['model'].nunique()} models x {len(steps) // acc['model'].nunique()} "
        f"runs x {int(steps.iloc[0])} checkpoints x {len(order)} test sets x "
        f"{scores['metric'].nunique()} metrics"
    )
    return "\n".join(lines)


def finish(store_path: Path, out_dir: Path, id_testset: str, *, log: Log = print) -> Path:
    """The demo's last step: a summary of the score table, then the analysis, comparison and report.

    Prints :func:`summarise` of the store, then runs :func:`gengen.pipeline.run_study_analysis`.

    Returns
    -------
    Path
        The report's path.
    """
    from gengen.pipeline import run_study_analysis
    from gengen.store.database import Store

    scores = Store(store_path).load()
    log(summarise(scores, id_testset))
    report = run_study_analysis(store_path, out_dir, id_testset, log=log)
    log(f"report: {report}")
    return report


def run_demo(
    out: Path | str = "gengen-demo",
    *,
    fresh: bool = False,
    jobs: int = 2,
    threads: int = 1,
    log: Log = print,
    progress: bool = True,
) -> Path:
    """Run the demo study end to end in ``out`` and return that folder.

    Parameters
    ----------
    out : path
        Folder for the data, models, store and report. An existing demo there is resumed.
    fresh : bool
        Delete ``out`` first: only a folder whose every file the demo wrote, unchanged (the list it keeps in
        ``gengen-demo-files.json``, with sizes and SHA-256), or an empty one; never a symbolic link, the working
        folder or a folder that holds it.
    jobs : int
        Runs trained at once, each in its own process (the models are tiny: one process per core is fastest).
    threads : int
        torch CPU threads per process.
    log : callable
        Progress lines.
    progress : bool
        Progress bars on a terminal (with ``jobs = 1``).

    Raises
    ------
    InputError
        ``fresh`` on a folder holding anything the demo did not write (named), on a symbolic link, or on the
        working folder or one that holds it; nothing is deleted then.
    """
    from gengen.demo.manifest import foreign_entries, record_demo_files, remove_demo_folder

    start = time.perf_counter()
    out = Path(out)
    if fresh and (out.exists() or out.is_symlink()):
        remove_demo_folder(out)
    # Files already there that the demo cannot prove it wrote stay out of its list, whatever happens next.
    foreign = set(foreign_entries(out)) if out.is_dir() else set()
    try:
        _run_demo_steps(out, jobs=jobs, threads=threads, log=log, progress=progress, start=start)
    finally:
        if out.is_dir() and not out.is_symlink():
            record_demo_files(out, foreign)
    return out


def _run_demo_steps(out: Path, *, jobs: int, threads: int, log: Log, progress: bool, start: float) -> None:
    import torch

    from gengen.executors.direct import train_study
    from gengen.study.config import load_config

    study = prepare_demo(out, log=log)
    config = load_config(study)
    torch.set_num_threads(threads)
    train_study(config, log=log, progress=progress, jobs=jobs, threads=threads)
    log(f"trained and scored {len(config.runs())} runs in {time.perf_counter() - start:.0f} s")
    finish(config.output, out / "report", config.id_testset, log=log)
