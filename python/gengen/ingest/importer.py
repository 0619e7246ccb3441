"""The import itself: find the files, detect their formats, read and check them, write them in one transaction.

:mod:`gengen.ingest` hands these names on; its docstring lists the formats and what makes an import atomic.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gengen.errors import InputError, UnknownFormatError
from gengen.ingest import tables
from gengen.ingest._common import IngestOptions, Parsed, count, read_json, short_list
from gengen.store import formats
from gengen.store.checks import check_scores
from gengen.store.database import DB_NAME, OnConflict, Store, normalise_scores, shown
from gengen.store.formats import FORMAT_GROUPS, INGEST_FORMATS, IngestFormatEntry, ingest_entry, load_function

__all__ = [
    "FORMATS",
    "IngestOptions",
    "IngestReport",
    "detect_format",
    "find_files",
    "ingest",
    "read",
    "read_file",
]

FORMATS = INGEST_FORMATS
"""The formats :func:`ingest` reads (:data:`gengen.store.formats.INGEST_FORMATS`)."""

_SUFFIXES = (".json", *tables.TABLE_SUFFIXES)


@dataclass
class IngestReport:
    """What an import did.

    Attributes
    ----------
    files : list of Path
        The files read.
    formats : dict
        Format -> number of files read in it.
    rows : int
        Scores read (after dropping exact repeats).
    written : int
        Scores inserted or changed in the store (``rows - written`` were already there, equal).
    models : list of str
        The models read.
    skipped : list of Path
        Files of a directory that were not recognised and were left out.
    notes : list of str
        Other things worth knowing (e.g. wide-table columns that did not match the pattern).
    store : Path or None
        The database written to.
    taken : list of tuple
        ``(file, test sets, metrics)`` for every file read: what the file was taken to hold (see :meth:`took`).
    copies : dict
        ``{file: (study, scores)}`` for the files left out because the store already holds every one of their
        scores, with the same values, under another study (the same files arriving under another study name;
        ``allow_copies=True`` stores them anyway).
    """

    files: list[Path] = field(default_factory=list)
    formats: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    written: int = 0
    models: list[str] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    store: Path | None = None
    taken: list[tuple[Path, tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    copies: dict[Path, tuple[str, int]] = field(default_factory=dict)

    def summary(self) -> str:
        """One line describing the import."""
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.formats.items()))
        line = (
            f"{self.written} new scores ({self.rows - self.written} already stored) "
            f"from {len(self.files)} files ({kinds or 'none'}); models: {', '.join(self.models) or 'none'}"
        )
        if self.store is not None:
            line += f"; store: {self.store}"
        if self.skipped:
            line += f"; skipped {len(self.skipped)} unrecognised files"
        if self.copies:
            studies = ", ".join(sorted({shown(study) for study, _ in self.copies.values()}))
            line += f"; left out {count(len(self.copies), 'file')} already stored as study {studies}"
        return line

    def took(self) -> list[str]:
        """What each file was taken to hold, one line per file: ``"a.csv: 12 test sets × 3 metrics (...)"``.

        Consecutive files of one folder taken to hold the same test sets and metrics, in any order (a folder of
        one model's checkpoints), share one line naming the first and last of them.

        Returns
        -------
        list of str
        """
        groups: list[list[tuple[Path, tuple[str, ...], tuple[str, ...]]]] = []
        for entry in self.taken:
            # One folder's files with the same test sets and metrics, in any order (JSON files list tasks as they
            # ran), share a line; another folder (another model's checkpoints) starts its own.
            if (
                groups
                and Path(groups[-1][0][0]).parent == Path(entry[0]).parent
                and [set(part) for part in groups[-1][0][1:]] == [set(part) for part in entry[1:]]
            ):
                groups[-1].append(entry)
            else:
                groups.append([entry])
        lines = []
        for group in groups:
            first, testsets, metrics = group[0]
            where = str(first) if len(group) == 1 else f"{first} … {group[-1][0]} ({len(group)} files)"
            lines.append(
                f"{where}: {count(len(testsets), 'test set')} × {count(len(metrics), 'metric')} "
                f"({_names(testsets)}; {_names(metrics)})"
            )
        return lines


def _names(names: Sequence[str], limit: int = 4) -> str:
    """The first ``limit`` names, each cut to 40 characters, and ``…`` when there are more."""
    cut = [name if len(name) <= 40 else name[:39] + "…" for name in names[:limit]]
    return ", ".join(cut) + (", …" if len(names) > limit else "") if names else "none"


def _check_format(format: str | None) -> None:
    names = formats.ingest_format_names()  # read now: the table is the one place a format is declared
    if format is not None and format not in names:
        raise UnknownFormatError(option="format", problem=f"must be one of {', '.join(names)}, got {shown(format)}")


def find_files(paths: Sequence[str | os.PathLike[str]], format: str | None = None) -> list[tuple[Path, bool]]:
    """The files to read: ``(path, named)`` with ``named`` False for files found by walking a directory."""
    _check_format(format)
    suffixes: tuple[str, ...]
    if format is None:
        suffixes = _SUFFIXES
    elif _reads(format) == "json":
        suffixes = (".json",)
    else:
        suffixes = tables.TABLE_SUFFIXES
    found: list[tuple[Path, bool]] = []
    for item in paths:
        path = Path(item).expanduser()
        if path.is_dir():
            walked: list[Path] = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                walked.extend(
                    Path(root) / n
                    for n in names
                    if not n.startswith(".") and Path(n).suffix.lower() in suffixes and n != DB_NAME
                )
            found.extend((p, False) for p in sorted(walked))
        elif path.is_file():
            found.append((path, True))
        else:
            raise InputError(f"{path}: no such file or directory")
    for path, _ in found:
        _check_utf8_name(path)
    return found


def _check_utf8_name(path: Path) -> None:
    """Refuse a file whose name is not UTF-8 text: the store records every source by its name, as text."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        escaped = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise InputError(f"{escaped}: the file name is not valid UTF-8; rename it to ingest it") from None


def detect_format(path: str | os.PathLike[str], options: IngestOptions | None = None) -> str | None:
    """The format of a file, told from its content (``None`` when it is none of :data:`FORMATS`).

    Parameters
    ----------
    path : str or Path
        The file.
    options : IngestOptions, optional
        The column mapping, which decides whether a table has the long columns.
    """
    path = Path(path)
    if path.suffix.lower() == ".json":
        return _detect_json(read_json(path))
    if path.suffix.lower() in tables.TABLE_SUFFIXES:
        return tables.detect(tables.read_table(path, options or IngestOptions())[0])
    return None


def _entries(reads: str) -> list[IngestFormatEntry]:
    return [entry for entry in formats.INGEST_FORMAT_TABLE if entry.reads == reads]


def _reads(format: str) -> str:
    """``"json"`` or ``"table"``: what the format (or every format of a group) reads."""
    return ingest_entry(FORMAT_GROUPS.get(format, (format,))[0]).reads


def _detect_json(data: Any) -> str | None:
    return next((entry.name for entry in _entries("json") if load_function(entry.detect)(data)), None)


def _choose_json(format: str | None, detected: str | None) -> str | None:
    """The JSON format to read a file as, or None when the file is not of the format asked for: a group
    (``lm-eval``) reads as the member detected, a member of a group as itself when any member is detected."""
    if format is None or detected is None:
        return detected
    if format in FORMAT_GROUPS:
        return detected if detected in FORMAT_GROUPS[format] else None
    group = next((members for members in FORMAT_GROUPS.values() if format in members), (format,))
    return format if detected in group else None


def _not_this_format(format: str | None) -> str:
    """Why a JSON file is not of ``format`` (of any JSON format when None)."""
    if format is None:
        kinds = dict.fromkeys(f"a {entry.needs} ({entry.what})" for entry in _entries("json"))
        return "JSON with neither " + " nor ".join(kinds)
    entry = ingest_entry(FORMAT_GROUPS.get(format, (format,))[0])
    return f"not {entry.what}: no {entry.needs}"


def _no_table_format(path: Path, frame: pd.DataFrame) -> UnknownFormatError:
    """The error for a table that matches no table format."""
    kinds = [f"{entry.what} ({entry.needs})" for entry in _entries("table")]
    listed = ", ".join(kinds[:-1]) + f" nor {kinds[-1]}" if len(kinds) > 1 else kinds[0]
    return UnknownFormatError(
        f"{path}: neither {listed}; columns are {short_list(list(frame.columns))}",
        hint="map columns with {columns} or {run_column}, or pass {format}",
    )


def read_file(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    options: IngestOptions | None = None,
    strict: bool = True,
) -> Parsed | None:
    """Read one file.

    Parameters
    ----------
    path : str or Path
        A ``.json``, ``.csv``, ``.tsv`` or ``.parquet`` file.
    format : str, optional
        One of :data:`FORMATS`; detected when not given.
    options : IngestOptions, optional
        Overrides, column mapping and patterns.
    strict : bool
        When False (files found by walking a directory), a JSON file that is not of the format asked for (or
        of no known format) gives ``None`` instead of an error.

    Returns
    -------
    Parsed or None
    """
    path = Path(path)
    options = options or IngestOptions()
    _check_format(format)
    suffix = path.suffix.lower()
    if suffix == ".json":
        if format is not None and _reads(format) != "json":
            raise UnknownFormatError(
                option="format", problem=f"{format} reads CSV/TSV/Parquet tables, not JSON: {path}"
            )
        data = read_json(path)
        chosen = _choose_json(format, _detect_json(data))
        if chosen is None:
            if not strict:
                return None
            raise UnknownFormatError(f"{path}: {_not_this_format(format)}")
        return load_function(ingest_entry(chosen).parse)(path, data, options)
    if suffix in tables.TABLE_SUFFIXES:
        if format is not None and _reads(format) != "table":
            raise UnknownFormatError(option="format", problem=f"{format} reads JSON files, not tables: {path}")
        frame, labels, notes, unmapped = tables.read_table(path, options)
        chosen = format or tables.detect(frame)
        if chosen is None:
            raise _no_table_format(path, frame)
        parsed = load_function(ingest_entry(chosen).parse)(path, frame, labels, options, notes)
        return replace(parsed, unmapped=unmapped)
    raise UnknownFormatError(
        f"{path}: unknown file type {suffix or '(no suffix)'!r}; expected .json, .csv, .tsv or .parquet"
    )


def read(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    format: str | None = None,
    options: IngestOptions | None = None,
    default_study: str = "",
    progress: bool = False,
    report: IngestReport | None = None,
) -> tuple[pd.DataFrame, pd.Series, dict[tuple[str, str], dict[str, Any]]]:
    """Read and check every file, without writing anything.

    Parameters
    ----------
    paths : path or list of paths
        Files and directories (searched recursively).
    format : str, optional
        One of :data:`FORMATS`; detected per file when not given.
    options : IngestOptions, optional
        Overrides, column mapping and patterns.
    default_study : str
        The study of scores that do not name one (``options.study`` wins).
    progress : bool
        Show a progress bar on stderr.
    report : IngestReport, optional
        Filled in with the files read and skipped.

    Returns
    -------
    frame : DataFrame
        The normalised score table (see :func:`gengen.store.database.normalise_scores`).
    sources : Series
        Where each row came from (file and key or line), indexed like ``frame``.
    manifests : dict
        ``{(model, run): manifest}`` for the runs read, with the list of files each came from.
    """
    frame, sources, manifests, _ = _read(paths, format, options or IngestOptions(), default_study, progress, report)
    return frame, sources, manifests


def _read(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    format: str | None,
    options: IngestOptions,
    default_study: str,
    progress: bool,
    report: IngestReport | None,
) -> tuple[pd.DataFrame, pd.Series, dict[tuple[str, str], dict[str, Any]], np.ndarray]:
    """:func:`read`, and the number (in ``report.files``) of the file each row of the frame came from."""
    with warnings.catch_warnings():
        # pandas' PerformanceWarning, DtypeWarning... are about pandas, not about the user's files
        warnings.simplefilter("ignore")
        report = report if report is not None else IngestReport()
        items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        frames: list[pd.DataFrame] = []
        owners: list[np.ndarray] = []
        sources: list[str] = []
        manifests: dict[tuple[str, str], dict[str, Any]] = {}
        files = find_files(items, format)
        tables_read = [path for path, _ in files if path.suffix.lower() in tables.TABLE_SUFFIXES]
        if len(tables_read) > 1 and options.columns:
            options = replace(options, lenient_columns=True)
        lacking: dict[str, list[Path]] = {}
        for path, named in _progress(files, progress, "reading"):
            result = read_file(path, format=format, options=options, strict=named)
            if result is None:
                report.skipped.append(path)
                continue
            report.files.append(path)
            for name in result.unmapped:
                lacking.setdefault(f"{name}={options.columns[name]}", []).append(path)
            report.notes.extend(_one_note_per_file(path, result.notes))
            kind = next((str(m["format"]) for m in result.manifests.values() if "format" in m), format or "table")
            for key, manifest in result.manifests.items():
                entry = manifests.setdefault(key, {**manifest, "files": []})
                entry["files"].append(str(path))
            report.formats[kind] = report.formats.get(kind, 0) + 1
            if options.size is not None and len(result.frame):
                result.frame["size"] = options.size
            report.taken.append((path, *_taken(result.frame)))
            if len(result.frame):
                frames.append(result.frame)
                owners.append(np.full(len(result.frame), len(report.files) - 1))
                sources.extend(result.sources)
        if not report.files:
            raise InputError(f"{', '.join(map(str, items))}: no ingestible files found")
        if options.lenient_columns:
            _check_mapping_used(lacking, len(tables_read))
        if not frames:
            raise InputError(f"{', '.join(map(str, items))}: the files hold no scores")
        labels = pd.Series(sources)
        scores = pd.concat(frames, ignore_index=True)
        check_scores(scores, labels)
        frame = normalise_scores(scores, study=options.study or default_study, sources=labels)
        report.rows = len(frame)
        report.models = sorted(frame["model"].unique().tolist())
        return frame, labels, manifests, np.concatenate(owners)[frame.index.to_numpy()]


def _taken(frame: pd.DataFrame) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The test sets and the metrics of one file's scores, in order of appearance."""
    if not len(frame):
        return (), ()
    return tuple(map(str, pd.unique(frame["testset"]))), tuple(map(str, pd.unique(frame["metric"])))


def _leave_out_copies(target: Store, frame: pd.DataFrame, owners: np.ndarray, report: IngestReport) -> pd.DataFrame:
    """``frame`` less the files whose every score the store already holds, equal, under another study (and
    not under their own): the same files arriving under another study name. Recorded in ``report.copies``."""
    if not set(target.studies()) - set(frame["study"].unique()):
        return frame  # no other study in the store: nothing to compare with
    held = target.held_by_study(frame)
    if not held:
        return frame
    keep = np.ones(len(frame), dtype=bool)
    studies = frame["study"].to_numpy()
    for number, path in enumerate(report.files):
        rows = owners == number
        if not rows.any():
            continue
        own = set(studies[rows])
        if all(study in held and held[study][rows].all() for study in own):
            continue  # a plain re-import: equal scores already in their own study are no-ops
        elsewhere = [study for study, mask in held.items() if study not in own and mask[rows].all()]
        if elsewhere:
            keep &= ~rows
            report.copies[path] = (elsewhere[0], int(rows.sum()))
    if keep.all():
        return frame
    report.rows = int(keep.sum())
    report.models = sorted(frame.loc[keep, "model"].unique().tolist())
    return frame[keep]


def _one_note_per_file(path: Path, notes: list[str]) -> list[str]:
    """The notes about ``path`` joined into one line (``"file: step from '_step'; skipped ..."``)."""
    prefix = f"{path}: "
    own = [note[len(prefix) :] for note in notes if note.startswith(prefix)]
    others = [note for note in notes if not note.startswith(prefix)]
    return ([prefix + "; ".join(own)] if own else []) + others


def _check_mapping_used(lacking: dict[str, list[Path]], n_tables: int) -> None:
    """Refuse a ``--column`` mapping that no table had (a typo, not a file that lacks the column)."""
    for mapping, paths in lacking.items():
        if len(paths) == n_tables:
            raise InputError(
                option="columns",
                problem=f"{mapping}: none of the {n_tables} tables has that column (first: {paths[0]})",
            )


def _progress(items: Sequence[tuple[Path, bool]], show: bool, label: str) -> Iterable[tuple[Path, bool]]:
    """Iterate ``items``, with a rich progress bar on stderr when ``show``."""
    if not show:
        yield from items
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[file]}"),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=len(items), file="")
        for item in items:
            bar.update(task, file=item[0].name)
            yield item
            bar.advance(task)


def ingest(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store: Store | str | os.PathLike[str],
    *,
    format: str | None = None,
    model: str | None = None,
    run: str | None = None,
    study: str | None = None,
    step: int | None = None,
    step_pattern: str | None = None,
    columns: dict[str, str] | None = None,
    pattern: str | None = None,
    metric: str | None = None,
    run_column: str | None = None,
    size: str | None = None,
    on_conflict: OnConflict = "error",
    allow_copies: bool = False,
    progress: bool = False,
) -> IngestReport:
    """Import score files into a store, atomically.

    Parameters
    ----------
    paths : path or list of paths
        Files and directories (searched recursively).
    store : Store or path
        The store (a study folder or a database file).
    format : str, optional
        One of :data:`FORMATS`; detected per file when not given.
    model, run, study : str, optional
        Override the model / run / study of every score read (see each format for the defaults).
    step : int, optional
        The step of every per-checkpoint file read (for one file), of a long table without a step column, or
        of the final scores in a per-run table (default 0 there).
    step_pattern : str, optional
        Regular expression whose group ``step`` (or first group) finds the step in each file's path.
    columns : dict, optional
        Score-table column -> file column, for CSV/Parquet tables.
    pattern : str, optional
        Regular expression with groups ``testset`` and ``metric`` for wide-table column names (or
        ``trainer_state.json`` keys); replaces :func:`gengen.ingest.tables.split_name`.
    metric : str, optional
        The metric of tables whose column names carry none: each score column is a test set.
    run_column : str, optional
        The column of a per-run table naming the run (same as ``columns={"run": run_column}``).
    size : str, optional
        The model size of every score read (``"7B"``), for model names whose size
        :func:`gengen.store.database.split_model_name` does not read.
    on_conflict : {"error", "replace", "keep"}
        For a score stored with a different value (see :mod:`gengen.store.database`).
    allow_copies : bool
        Store a file's scores even when the store already holds every one of them, with the same values,
        under another study. By default such a file (the same files arriving under another study name, e.g.
        into a copied store) is left out and listed in ``IngestReport.copies``.
    progress : bool
        Show a progress bar on stderr.

    Returns
    -------
    IngestReport
        Files read, scores read and written, models, skipped files.

    Raises
    ------
    InputError
        A file cannot be read as a score file (the message names the file, the key or line, and the problem).
    StoreConflictError
        A score conflicts with another read or stored; nothing is written.

    Examples
    --------
    A folder of lm-eval outputs goes in the same way (``ingest("pythia-lm-eval-v0.3/", "study/")``); here, a
    small table:

    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> import pandas as pd
    >>> table = {"model": "opt-125m", "run": "main", "step": [100, 200], "testset": "mnli", "metric": "acc"}
    >>> pd.DataFrame({**table, "value": [0.61, 0.66]}).to_csv(folder / "scores.csv", index=False)
    >>> report = ingest(folder / "scores.csv", folder / "store")
    >>> report.summary()  # doctest: +ELLIPSIS
    '2 new scores (0 already stored) from 1 files (1 long); models: opt-125m; store: ...'
    >>> import shutil
    >>> shutil.rmtree(folder)
    """
    mapping = dict(columns or {})
    if run_column is not None:
        if mapping.get("run", run_column) != run_column:
            raise InputError(
                option="run_column",
                problem=f"{shown(run_column)} disagrees with the run column of columns ({shown(mapping['run'])})",
            )
        mapping["run"] = run_column
    options = IngestOptions(
        model=model,
        run=run,
        study=study,
        step=step,
        step_pattern=step_pattern,
        columns=mapping,
        pattern=pattern,
        metric=metric,
        size=size,
    )
    if not isinstance(store, Store):  # a path or name that cannot be read is refused before a store is created
        find_files([paths] if isinstance(paths, (str, os.PathLike)) else list(paths), format)
    created = _created_by(store)
    target = store if isinstance(store, Store) else Store(store)
    try:
        report = IngestReport(store=target.path)
        frame, sources, manifests, owners = _read(paths, format, options, target.study, progress, report)
        if not allow_copies:
            frame = _leave_out_copies(target, frame, owners, report)
        with _status(progress, f"writing {len(frame)} scores to {target.path}"):
            report.written = target.write_batch(frame, on_conflict=on_conflict, manifests=manifests, sources=sources)
    except BaseException:
        _remove_created(created, target.path)  # a failed first ingest leaves no empty store behind
        raise
    return report


def _created_by(store: Store | str | os.PathLike[str]) -> list[Path]:
    """What opening ``store`` would create (its database file, then the folders above it that do not exist yet),
    so that a failed ingest can remove exactly that; empty for an existing store."""
    if isinstance(store, Store):
        return []
    path = Path(store).expanduser()
    database = (
        path if path.suffix.lower() in (".sqlite", ".db", ".sqlite3") or path.is_file() else path / "gengen.sqlite"
    )
    if database.exists() or database.is_symlink():
        return []
    folders = [folder for folder in database.parents if not folder.exists()]
    return [database, *folders]


def _remove_created(created: list[Path], database: Path) -> None:
    """Remove the store a failed ingest created (it holds nothing: the write is one transaction) and the folders
    made for it, deepest first; a folder that holds anything else is kept."""
    if not created or created[0] != database:
        return
    for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm"), Path(f"{database}-journal")):
        path.unlink(missing_ok=True)
    for folder in created[1:]:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _status(show: bool, message: str) -> contextlib.AbstractContextManager[object]:
    """A rich spinner with ``message`` on stderr while the block runs, when ``show``."""
    if not show:
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(message)
