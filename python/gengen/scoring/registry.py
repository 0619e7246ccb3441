"""The scoring backends by name: the one list that the study file, the CLI and the library choose from.

Each entry names the class that implements :class:`gengen.scoring.ScoringBackend` by its import path, so that
reading the names (:data:`BACKENDS`, e.g. to check a study file's ``evaluation.backend``) imports neither torch
nor lm-eval, and no module of a backend is imported until that backend is used.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BACKENDS", "REGISTRY", "BackendEntry"]


@dataclass(frozen=True)
class BackendEntry:
    """A scoring backend in the registry.

    Attributes
    ----------
    target : str
        ``"module:Class"`` of the class that implements :class:`gengen.scoring.ScoringBackend`.
    during_training : bool
        The trainer scores each checkpoint with it as the checkpoint is made (no scoring pass after training,
        nothing to check before it); False: ``gengen train``/``run`` score the kept checkpoints afterwards.
    extra : str or None
        The optional dependency (``pip install 'gengen[extra]'``) that the backend needs.
    """

    target: str
    during_training: bool = False
    extra: str | None = None


REGISTRY: dict[str, BackendEntry] = {
    "gengen": BackendEntry("gengen.scoring.score:GengenBackend", during_training=True),
    "lm-eval": BackendEntry("gengen.scoring.lm_eval.backend:LmEvalBackend", extra="lm-eval"),
}
"""Name -> backend; adding a scoring backend is one entry here (see ``docs/extending.md``)."""

BACKENDS: tuple[str, ...] = tuple(REGISTRY)
"""The names a study's ``evaluation.backend`` and ``gengen score --backend`` take."""
