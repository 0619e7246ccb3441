"""Score tables whose columns cannot be read as one table, and stores holding several studies.

``gengen analyse`` on a table file with a MultiIndex header, a column name twice (CSV, whose reader would rename
the second ``value`` to ``value.1`` and analyse the first silently, or Parquet), or a step column with missing
values (a nullable ``Int64`` column with ``<NA>``, a float column with NaN) gets one ``error:`` line naming the
file and the column; a store of two studies analysed without ``--study`` gets one line listing them, and an
unknown ``--study`` one line naming it and the studies there are. The same frames through the Python API are in
tests/test_analyse_options.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .case import Case

ANALYSE = ["--id", "id", "--inference", "t-test", "--out", "{tmp}/out"]


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(26)
    trend = np.linspace(0.3, 0.8, 24)
    rows = [
        ("m", "main", 10 * i, testset, "acc", float(np.clip(level + rng.normal(0, 0.03), 0, 1)))
        for i, level in enumerate(trend)
        for testset in ("id", "ood_a", "ood_b", "ood_c")
    ]
    return pd.DataFrame(rows, columns=["model", "run", "step", "testset", "metric", "value"])


def _multiindex(folder: Path) -> None:
    frame = _frame()
    frame.columns = pd.MultiIndex.from_tuples([(name, "score") for name in frame.columns])
    frame.to_parquet(folder / "table.parquet")


def _duplicate_parquet(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(_frame(), preserve_index=False)
    columns = [*table.columns, table.column("value")]
    pq.write_table(pa.Table.from_arrays(columns, names=[*table.column_names, "value"]), folder / "table.parquet")


def _duplicate_csv(folder: Path) -> None:
    frame = _frame()
    text = frame.to_csv(index=False)
    lines = text.splitlines()
    doubled = [f"{lines[0]},value"] + [f"{line},{line.rsplit(',', 1)[1]}" for line in lines[1:]]
    (folder / "table.csv").write_text("\n".join(doubled) + "\n")


def _nullable_step(folder: Path) -> None:
    frame = _frame()
    frame["step"] = pd.array(frame["step"], dtype="Int64")
    frame.loc[7, "step"] = pd.NA
    frame.to_parquet(folder / "table.parquet")


def _float_step(folder: Path) -> None:
    frame = _frame()
    frame["step"] = frame["step"].astype(float)
    frame.loc[7, "step"] = np.nan
    frame.to_parquet(folder / "table.parquet")


def _two_studies(folder: Path) -> None:
    from gengen.store.database import Store

    frame = _frame()
    both = pd.concat([frame.assign(study="first"), frame.assign(study="second")], ignore_index=True)
    Store(folder / "store").write_scores(both)


def cases() -> list[Case]:
    """The frame and study cases."""
    return [
        Case(
            "frames-parquet-multiindex-columns",
            ["analyse", "{tmp}/table.parquet", *ANALYSE],
            "{tmp}/table.parquet: the columns are a MultiIndex",
            setup=_multiindex,
        ),
        Case(
            "frames-parquet-duplicate-column",
            ["analyse", "{tmp}/table.parquet", *ANALYSE],
            "{tmp}/table.parquet",
            setup=_duplicate_parquet,
        ),
        Case(
            "frames-csv-duplicate-column",
            ["analyse", "{tmp}/table.csv", *ANALYSE],
            "{tmp}/table.csv: column 'value' appears 2 times",
            setup=_duplicate_csv,
        ),
        Case(
            "frames-parquet-nullable-int64-step-na",
            ["analyse", "{tmp}/table.parquet", *ANALYSE],
            "{tmp}/table.parquet: row 8: column 'step' is empty",
            setup=_nullable_step,
        ),
        Case(
            "frames-parquet-float-step-nan",
            ["analyse", "{tmp}/table.parquet", *ANALYSE],
            "{tmp}/table.parquet: row 8: column 'step' is empty",
            setup=_float_step,
        ),
        Case(
            "frames-store-two-studies-none-chosen",
            ["analyse", "{tmp}/store", *ANALYSE],
            "--study is needed: {tmp}/store holds 2 studies (first, second)",
            setup=_two_studies,
        ),
        Case(
            "frames-store-unknown-study",
            ["analyse", "{tmp}/store", "--study", "third", *ANALYSE],
            "--study 'third' is not in {tmp}/store; its studies: first, second",
            setup=_two_studies,
        ),
    ]
