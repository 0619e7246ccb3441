"""Reading gengen's own output files (an analysis folder, a comparison) with one clear error per bad file.

A truncated ``summary.json``, a damaged ``pairs.parquet`` or an empty CSV raise
:class:`gengen.errors.InputError` naming the file and the problem, instead of the parser's own exception
(which names neither the file nor what to do).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from gengen.errors import InputError

__all__ = ["read_csv", "read_json", "read_parquet"]


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON document in ``path``; InputError naming the file when it cannot be read or parsed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start}); the file is damaged") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        problem = "empty" if not text.strip() else f"line {error.lineno} column {error.colno}: {error.msg}"
        raise InputError(f"{path}: not valid JSON ({problem}); the file is truncated or damaged") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to read") from None


def read_csv(path: str | os.PathLike[str], **options: Any) -> pd.DataFrame:
    """``pandas.read_csv(path)``; InputError naming the file when it is empty, not UTF-8 or malformed."""
    path = Path(path)
    try:
        return pd.read_csv(path, **options)
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file, expected a CSV table with a header row") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start}); save the CSV as UTF-8") from None
    except pd.errors.ParserError as error:
        raise InputError(f"{path}: malformed CSV ({_first_line(error)})") from None


def read_parquet(path: str | os.PathLike[str], **options: Any) -> pd.DataFrame:
    """``pandas.read_parquet(path)``; InputError naming the file when it is not a readable Parquet file."""
    path = Path(path)
    try:
        return pd.read_parquet(path, **options)
    except (OSError, ValueError) as error:
        # pyarrow raises ArrowInvalid (a ValueError) or ArrowIOError/OSError for truncated or foreign bytes.
        if isinstance(error, OSError) and getattr(error, "filename", None) is not None:
            raise
        raise InputError(f"{path}: not a readable Parquet file ({_first_line(error)}); it is damaged") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
