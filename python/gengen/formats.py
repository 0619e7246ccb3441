"""The file formats gengen reads and writes, as ``Literal`` types and the choice lists derived from them.

Kept apart from :mod:`gengen.ingest` and :mod:`gengen.export` (which import pandas) so that the CLI can list
the choices in its help without loading them.
"""

from __future__ import annotations

from typing import Literal, get_args

IngestFormat = Literal["lm-eval", "lm-eval-v0.3", "lm-eval-v0.4", "trainer-state", "long", "wide", "runs"]
INGEST_FORMATS: tuple[IngestFormat, ...] = get_args(IngestFormat)
"""The formats :func:`gengen.ingest.ingest` reads."""

ExportFormat = Literal["csv", "parquet"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)
"""The file formats :func:`gengen.export.export` writes."""
