"""Figures drawn once and reused: a figure whose inputs have not changed since the last report is not redrawn.

Each figure is keyed by a digest of what it is drawn from (the tables, the options, the order of test sets) and
of the drawing code itself (this package's figure module, matplotlib's version, the PNG resolution). The
digests live in ``<figure folder>/.gengen-figures.json``; a figure whose digest matches and whose PNG and SVG
are still there is read back instead of drawn (drawing is nearly all of a report's time). Anything unreadable
in that file only means the figures are drawn again.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gengen.report import figures as fig

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CACHE_FILE = ".gengen-figures.json"


@functools.cache
def _code_fingerprint() -> bytes:
    """What the figures look like besides their data: the drawing code, matplotlib and the PNG resolution."""
    digest = hashlib.sha256(Path(fig.__file__).read_bytes())
    try:
        digest.update(metadata.version("matplotlib").encode())
    except metadata.PackageNotFoundError:
        pass
    digest.update(str(fig.PNG_DPI).encode())
    return digest.digest()


def digest(*parts: Any) -> str:
    """A digest of figure inputs: DataFrames and Series by content (values, index, column names), arrays by
    their bytes, anything else by ``repr``."""
    hasher = hashlib.sha256(_code_fingerprint())
    for part in parts:
        if isinstance(part, (pd.DataFrame, pd.Series)):
            hasher.update(repr(list(part.columns) if isinstance(part, pd.DataFrame) else part.name).encode())
            hasher.update(pd.util.hash_pandas_object(part, index=True).to_numpy().tobytes())
        elif isinstance(part, np.ndarray):
            hasher.update(repr((part.dtype.str, part.shape)).encode())
            hasher.update(np.ascontiguousarray(part).tobytes())
        else:
            hasher.update(repr(part).encode())
        hasher.update(b"\x00")
    return hasher.hexdigest()


class FigureCache:
    """The figures of one figure folder, drawn when their inputs changed and read back otherwise.

    Parameters
    ----------
    folder : Path
        Where the PNG and SVG files go.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.entries: dict[str, dict[str, Any]] = {}
        self.drawn = 0
        self.reused = 0
        try:
            loaded = json.loads((folder / CACHE_FILE).read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                self.entries = {k: v for k, v in loaded.items() if isinstance(v, dict)}
        except (OSError, ValueError):
            self.entries = {}

    def figure(self, name: str, key: str, draw: Callable[[], Figure]) -> tuple[str, int]:
        """The base64 PNG of figure ``name`` and its width in CSS pixels, drawn only when ``key`` changed."""
        png, svg = self.folder / f"{name}.png", self.folder / f"{name}.svg"
        entry = self.entries.get(name, {})
        if entry.get("key") == key and png.is_file() and svg.is_file() and isinstance(entry.get("width"), int):
            try:
                self.reused += 1
                return base64.b64encode(png.read_bytes()).decode("ascii"), entry["width"]
            except OSError:
                self.reused -= 1
        from gengen._files import inside

        inside(self.folder, png), inside(self.folder, svg)  # a figure file linking elsewhere is not written
        figure = draw()
        width = fig.css_width(figure)
        _, _, data = fig.save_figure(figure, self.folder, name)
        self.entries[name] = {"key": key, "width": width}
        self.drawn += 1
        return data, width

    def save(self) -> None:
        """Write the digests of the figures now in the folder."""
        from gengen._files import inside

        self.folder.mkdir(parents=True, exist_ok=True)
        inside(self.folder, CACHE_FILE).write_text(json.dumps(self.entries, indent=1, sort_keys=True), encoding="utf-8")
