"""The lazy command group of ``gengen``: the table of commands, their loading and ``main``.

Each command lives in its own module exposing ``register(app)``; this module only assembles them. The modules
are imported lazily: ``gengen --help`` lists every command from the static table below, and a command's module
(with pandas, matplotlib or torch behind it) is imported only when that command runs or shows its own help, so
start-up stays at the cost of typer itself.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:
    # typer vendors click (typer._click); its types are only needed for the annotations.
    from typer._click import Command, Context


class CommandEntry(NamedTuple):
    """Where a command is defined and the one-line help ``gengen --help`` shows for it."""

    module: str
    help: str


# Every command, in the order of `gengen --help`. The help line must equal the first paragraph of the
# command's docstring (tests/test_cli_startup.py checks it against the real commands).
COMMANDS: dict[str, CommandEntry] = {
    "partial-corr": CommandEntry(
        "stats", "Partial correlation of two columns given others, with ppcor's test (as R's pcor.test/spcor.test)."
    ),
    "ingest": CommandEntry("ingest", "Import score files into a store, all or nothing."),
    "export": CommandEntry(
        "export",
        "Export a store's score table to CSV or Parquet (long: one score per row; --wide: one row per step), or "
        "with --table a paper table of an analysis folder as booktabs LaTeX or Markdown.",
    ),
    "analyse": CommandEntry(
        "analyse", "Correlate every pair of OOD test sets across checkpoints after regressing out the ID score."
    ),
    "compare": CommandEntry(
        "compare",
        "Sign agreement, Mantel correlation, conflicting pairs, and whether each pair differs between models.",
    ),
    "report": CommandEntry(
        "report", "Write report.html: heatmaps, agreement across models, residuals, trajectories, tables, settings."
    ),
    "demo": CommandEntry(
        "demo", "Fine-tune tiny OPT and OLMo2 models on a templated NLI task and score six OOD shifts, offline."
    ),
    "train": CommandEntry("train", "Fine-tune and score every run of a study; re-running resumes where it stopped."),
    "plan": CommandEntry(
        "plan", "Plan a study on GPUs: strategy, memory per GPU, checkpoint disk and GPU-hours per model and regime."
    ),
    "score": CommandEntry(
        "score", "Score checkpoints on the study's test sets; the step of each is the last number in its name."
    ),
    "run": CommandEntry(
        "run",
        "Fine-tune and score every run of a study through an executor, then analyse, compare and report.",
    ),
    "status": CommandEntry(
        "run", "Show each run of a study: pending, running, done or failed (with its error), and its progress."
    ),
    "simulate": CommandEntry(
        "simulate",
        "Type-I error, power and interval coverage of every inference method on autocorrelated trajectories.",
    ),
}

# The modules, in the order their commands appear (kept for callers that iterate over them).
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(entry.module for entry in COMMANDS.values()))


def load_commands(module_name: str) -> dict[str, Command]:
    """Import ``gengen.cli.<module_name>`` and return the click commands its ``register(app)`` adds."""
    module_app = typer.Typer()
    importlib.import_module(f"gengen.cli.{module_name}").register(module_app)
    # A no-op callback keeps typer building a group even for a module with a single command.
    module_app.callback()(lambda: None)
    commands = dict(typer.main.get_group(module_app).commands)
    for command in commands.values():
        for param in command.params:
            _coerce_plain_values_directly(param)
    return commands


def _coerce_plain_values_directly(param: Any) -> None:
    """Let a parameter take the values that need no conversion without building a pydantic ``TypeAdapter``.

    typer coerces every parameter's value, defaults included, through an adapter built on first use; importing
    pydantic and building the ~35 adapters of ``gengen analyse`` is ~0.2 s of a run that gives no value needing
    pydantic. A string for a ``str``, an ``int`` or ``float`` of its own type within the option's bounds, and a
    path for a ``Path`` (checked by typer's own path coercion) are taken as they are, which is what the adapter
    returns for them; anything else (``--n-boot 500`` arrives as a string) goes to typer's adapter as before.
    Where typer's internals are not as expected, its own coercion stays.
    """
    descriptor: Any = getattr(param, "type_descriptor", None)
    plain_values = _plain_values_class()
    if descriptor is None or getattr(param, "_runtime_param", False) is not None or plain_values is None:
        return
    info = descriptor.parameter_info
    plain = info.parser is None and descriptor.file_annotation is None and not descriptor.is_choice
    param._runtime_param = plain_values(info, descriptor.annotation, descriptor, plain)


@functools.cache
def _plain_values_class() -> Any:
    """typer's ``RuntimeParam`` for :func:`_coerce_plain_values_directly` (None for a typer without one)."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer._param_types import coerce_cli_path
    except ImportError:  # pragma: no cover - another typer
        return None

    @dataclasses.dataclass(frozen=True)
    class PlainValues(RuntimeParam):
        descriptor: Any = None
        plain: bool = False

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            annotation, info = self.annotation, self.parameter_info
            if self.plain and not (param.multiple or param.nargs != 1):
                if annotation is str and type(value) is str:
                    return value
                if annotation in (int, float) and type(value) is annotation and _within(value, info.min, info.max):
                    return value
                if annotation is Path and info.path_type is None and type(value) in (str, Path):
                    return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
            return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)

    return PlainValues


def _within(value: float, low: float | None, high: float | None) -> bool:
    """Whether ``value`` is a finite number within the bounds (None: unbounded)."""
    return (
        value == value
        and abs(value) != float("inf")
        and (low is None or value >= low)
        and (high is None or value <= high)
    )


class _CommandStub(TyperCommand):
    """Stands in for a command in the listing of ``gengen --help`` until the command is invoked."""


class LazyCommandGroup(TyperGroup):
    """The top-level group: stubs for listing, real commands imported when one is resolved for running."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, entry in COMMANDS.items():
            self.commands.setdefault(name, _CommandStub(name=name, help=entry.help))

    def list_commands(self, ctx: Context) -> list[str]:
        """Commands in the table's order."""
        return list(self.commands)

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        """The group's ``--help`` flag, coerced as the plain bool it is.

        typer coerces an absent flag's ``None`` through a pydantic ``TypeAdapter``; for the group's ``--help``
        that happens on every sub-command's start-up (``gengen analyse --help`` included), and importing pydantic
        is ~0.1 s of it (:func:`_coerce_plain_values_directly`).
        """
        option = super().get_help_option(ctx)
        _coerce_plain_values_directly(option)
        return option

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        """Resolve as click does, then swap a stub for the real command (importing its module once)."""
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and isinstance(command, _CommandStub):
            for loaded_name, loaded in load_commands(COMMANDS[name].module).items():
                self.commands[loaded_name] = loaded
            command = self.commands[name]
            _coerce_plain_values_directly(command.get_help_option(ctx))  # created once, cached by the command
        return name, command, rest


app = typer.Typer(
    name="gengen",
    cls=LazyCommandGroup,
    help="Do your out-of-distribution results generalise? Fine-tune, score, analyse and report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _gengen() -> None:
    """Top-level options only; every command is resolved by :class:`LazyCommandGroup`."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``gengen`` console script: user errors, parse errors included, are one ``error:`` line."""
    from gengen.cli._common import run_app

    arguments = sys.argv[1:] if argv is None else argv
    if not arguments or "--help" in arguments:
        _import_help_renderer()
    raise SystemExit(run_app(app, argv))


class _Deferred(type):
    """A stand-in for a class of a module not imported yet: calling it, or any attribute, imports the module."""

    _module: str

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(cls._module), cls.__name__)(*args, **kwargs)

    def __getattr__(cls, name: str) -> Any:
        return getattr(getattr(importlib.import_module(cls._module), cls.__name__), name)


def _import_help_renderer() -> None:
    """Import typer's help renderer (``typer.rich_utils``) without ``rich.markdown`` and ``rich.traceback``.

    The renderer imports both at its top (markdown-it, pygments, attrs: ~0.05 s of ``gengen analyse --help``)
    but uses ``Markdown`` only for help in markdown mode (gengen's is rich markup) and ``Traceback`` only for
    typer's pretty exceptions (off); stand-ins (:class:`_Deferred`) take their places while it loads, so the
    help text is the same and either module is imported for real if ever used.
    """
    if "typer.rich_utils" in sys.modules:
        return
    stand_ins = {}
    for module, name in (("rich.markdown", "Markdown"), ("rich.traceback", "Traceback")):
        if module not in sys.modules:
            stand_in = types.ModuleType(module)
            setattr(stand_in, name, _Deferred(name, (), {"_module": module}))
            stand_ins[module] = stand_in
    sys.modules.update(stand_ins)
    try:
        importlib.import_module("typer.rich_utils")
    except ImportError:  # pragma: no cover - typer without rich: it renders plain help
        pass
    finally:
        for module, stand_in in stand_ins.items():
            if sys.modules.get(module) is stand_in:
                del sys.modules[module]
