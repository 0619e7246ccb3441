"""The contract of issue 34, item 6, on the extended grid: cells side by side, their tables, before against after.

Each cell runs on its own (``gengen simulate --study contract --cell LABEL --out DIR``), so that cells can run in
separate processes, each with ``nice`` and ``RAYON_NUM_THREADS=1``, each into its own DIR. This script joins the
CSVs they wrote and prints docs/calibration.md's tables, or compares two runs (before/after a change)::

    python benches/calibration_contract.py tables OUT.csv DIR1/calibration_contract.csv DIR2/...
    python benches/calibration_contract.py compare BEFORE.csv AFTER.csv

``tables`` writes the joined long table to OUT.csv (docs/calibration_contract_*.csv) and prints the tables.
"""

from __future__ import annotations

import sys

import pandas as pd


def _read(paths: list[str]) -> pd.DataFrame:
    return pd.concat([pd.read_csv(path, keep_default_na=False, na_values=[""]) for path in paths], ignore_index=True)


def main(argv: list[str]) -> None:
    from gengen.calibration.contract import CONTRACT_GRID, contract_comparison, contract_tables

    if argv[:1] == ["tables"] and len(argv) >= 3:
        table = _read(argv[2:])
        order = {cell.label: index for index, cell in enumerate(CONTRACT_GRID)}
        # Cells in the grid's order; within a cell the runner's order (a stable sort).
        table = table.iloc[table["cell"].map(order).fillna(len(order)).argsort(kind="stable")]
        table.to_csv(argv[1], index=False)
        print(contract_tables(table))
    elif argv[:1] == ["compare"] and len(argv) == 3:
        print(contract_comparison(_read([argv[1]]), _read([argv[2]])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
