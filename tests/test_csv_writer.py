"""``gengen.store.csv_writer.write_csv`` writes the bytes ``DataFrame.to_csv(path, index=False)`` writes (issue 27).

The reference is pandas itself, on frames with every awkward value: NaN, ±inf, -0.0, subnormal, huge and tiny
floats, random float64 bit patterns, strings with commas, quotes, line breaks and carriage returns, empty and
missing strings, booleans, integers at their limits, nullable integers and booleans, object columns of mixed
values, one-column tables (where csv writes an empty field as ``""``), and kinds the writer leaves to pandas.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gengen.store.csv_writer import _arrow_agrees_on_probes, _arrow_or_repr, _float_text, _quoted, csv_lines, write_csv


def assert_same_bytes(frame: pd.DataFrame, tmp_path: Path, chunk_rows: int | None = None) -> None:
    """The writer's bytes equal pandas' (and the writer formatted the table itself: it did not hand it back)."""
    ours, theirs = tmp_path / "ours.csv", tmp_path / "pandas.csv"
    assert csv_lines(frame) is not None
    if chunk_rows is None:
        write_csv(frame, ours)
    else:
        lines = csv_lines(frame, chunk_rows=chunk_rows)
        assert lines is not None
        ours.write_bytes("".join(lines).encode("utf-8"))
    frame.to_csv(theirs, index=False)
    assert ours.read_bytes() == theirs.read_bytes()


def awkward_floats(rng: np.random.Generator, size: int) -> np.ndarray:
    bits = rng.integers(0, 2**64, size, dtype=np.uint64, endpoint=False).view(np.float64)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]
    special += [1e16, 9999999999999998.0, 1e-4, 9.999999999999999e-05, 1e-5, 0.1, 1 / 3, 123456789012345678.0]
    values = np.concatenate([bits, rng.random(size), np.round(rng.normal(0, 1e3, size), 3), special])
    return rng.permutation(values)


def test_float64_text_is_numpys_astype_str_on_random_bit_patterns() -> None:
    rng = np.random.default_rng(0)
    values = awkward_floats(rng, 200_000)
    values = values[~np.isnan(values)]
    assert _float_text(values) == values.astype(str).tolist()


def test_arrows_text_without_its_sample_check_is_numpys_on_bit_patterns_and_ties() -> None:
    rng = np.random.default_rng(4)
    ties = (rng.integers(1, 2**45, 100_000) | 1) / 2.0 ** rng.integers(1, 70, 100_000)  # halves between decimals
    values = np.concatenate([awkward_floats(rng, 200_000), ties, -ties, rng.normal(0, 1, 100_000)])
    assert _arrow_or_repr(values, sample=0) == values.astype(str).tolist()
    assert _arrow_agrees_on_probes()


def test_quoting_follows_the_csv_module_for_every_character() -> None:
    for code in [*range(0, 0x3000), 0xFEFF, 0x1F600, 0x10FFFF]:
        field = f"a{chr(code)}b"
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow([field, "x"])
        assert _quoted(field) == buffer.getvalue()[: -len(",x\n")], hex(code)


def strings(rng: np.random.Generator, size: int) -> list[object]:
    pieces = ["a", "b,c", 'say "hi"', "line\nbreak", "cr\rhere", "", " lead", "trail ", "é ü 中", "'", '"', ",", "\t"]
    return ["".join(rng.choice(pieces, rng.integers(1, 4))) for _ in range(size)]


def test_a_table_of_every_supported_kind_is_written_as_pandas_writes_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    size = 3_000
    text = strings(rng, size)
    frame = pd.DataFrame(
        {
            "float": awkward_floats(rng, size)[:size],
            "few floats": rng.choice([0.25, np.nan, 1e-300, 0.95], size),
            "few with -0.0": rng.choice([0.0, -0.0, np.nan, 2.5], size),
            "all nan": np.full(size, np.nan),
            "float32": rng.normal(0, 1, size).astype(np.float32),
            "int": rng.integers(-(2**63), 2**63 - 1, size, endpoint=True),
            "few ints": rng.integers(0, 3, size),
            "uint": rng.integers(0, 2**64 - 1, size, dtype=np.uint64, endpoint=True),
            "int32": rng.integers(-100, 100, size).astype(np.int32),
            "bool": rng.random(size) < 0.5,
            "str": pd.Series(text, dtype="str").where(rng.random(size) < 0.9),
            "string[python]": pd.Series(text, dtype="string").where(rng.random(size) < 0.9),
            "object strings": pd.Series(text, dtype=object).where(rng.random(size) < 0.9, None),
            "Int64": pd.Series(rng.integers(-5, 5, size), dtype="Int64").where(rng.random(size) < 0.8),
            "boolean": pd.Series(rng.random(size) < 0.5, dtype="boolean").where(rng.random(size) < 0.8),
            "mixed": pd.Series([[1, "x", 0.1, np.float64(2.5), None, np.nan, True, 1e-7][i % 8] for i in range(size)]),
            'head,"quoted"\nname': rng.integers(0, 9, size),
        }
    )
    assert_same_bytes(frame, tmp_path)
    assert_same_bytes(frame, tmp_path, chunk_rows=7)  # rows joined in chunks: the same text
    assert_same_bytes(frame.iloc[:0], tmp_path)  # a header and no rows
    assert_same_bytes(pd.concat([frame[["int"]], frame[["int"]]], axis=1), tmp_path)  # a repeated column name


@pytest.mark.parametrize(
    "column",
    [
        pd.Series(["", "a", None, ""], dtype="str"),
        pd.Series([np.nan, 1.5, np.nan]),
        pd.Series(["", None, "x"], dtype=object),
        pd.Series([pd.NA, 1], dtype="Int64"),
    ],
)
def test_one_column_tables_write_an_empty_field_as_csv_does(column: pd.Series, tmp_path: Path) -> None:
    assert_same_bytes(pd.DataFrame({"only": column}), tmp_path)
    assert_same_bytes(pd.DataFrame({"": column}), tmp_path)


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame({"when": pd.to_datetime(["2024-01-01", None]), "x": [1, 2]}),
        pd.DataFrame({"cat": pd.Categorical(["a", "b"]), "x": [1, 2]}),
        pd.DataFrame({"nullable float": pd.array([0.1, None], dtype="Float64")}),
        pd.DataFrame({"complex": [1 + 2j, 3j]}),
        pd.DataFrame({1: [1, 2], "x": [3, 4]}),
        pd.DataFrame(index=range(3)),
    ],
    ids=["datetime", "categorical", "Float64", "complex", "non-string name", "no columns"],
)
def test_other_kinds_are_left_to_pandas(frame: pd.DataFrame, tmp_path: Path) -> None:
    assert csv_lines(frame) is None
    write_csv(frame, tmp_path / "ours.csv")
    frame.to_csv(tmp_path / "pandas.csv", index=False)
    assert (tmp_path / "ours.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()
