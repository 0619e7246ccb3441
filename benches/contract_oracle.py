"""The GLS oracle on the contract's own replicates, without rerunning the analyses (issue 34, item 6).

    python benches/contract_oracle.py OUT.csv [CELL ...]

Replays each cell's random streams exactly as :func:`gengen.calibration.contract.run_contract` draws them (seed
2026, 300 null and 200 alternative replicates, batches of 60: the analyses in between draw from their own seeds),
so the oracle's rows describe the very replicates of a contract CSV run with those settings
(docs/calibration_contract_before.csv), and appends its long-table rows (method ``GLS oracle``, rows ``main
pair``) to OUT.csv. Default cells: every single-run item-level cell of the grid.
"""

from __future__ import annotations

import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from gengen.calibration.contract import (
    _BATCH,
    CONTRACT_COLUMNS,
    CONTRACT_GRID,
    _draw_table,
    _has_gls_oracle,
    _tally_gls_oracle,
    _truth,
)
from gengen.calibration.realistic import _add


def main(out: str, labels: list[str], seed: int = 2026, replicates: int = 300, alternatives: int = 200) -> None:
    cells = [cell for cell in CONTRACT_GRID if _has_gls_oracle(cell) and (not labels or cell.label in labels)]
    for cell in cells:
        rows = []
        for index, rho in enumerate(cell.design.rhos):
            started = time.process_time()
            rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(cell.label.encode()), index]))
            count = replicates if rho == 0 else alternatives
            tally: dict[str, float] = {}
            for first in range(0, count, _BATCH):
                _, draws = _draw_table(cell, rho, rng, min(_BATCH, count - first), first)
                _add(tally, _tally_gls_oracle(cell, draws))
            truth, truth_se = _truth(cell, rho)
            rows.append(
                {
                    "cell": cell.label,
                    "kind": cell.kind,
                    "well_specified": cell.well_specified,
                    "hypothesis": "H0" if rho == 0 else f"rho={rho:g}",
                    "rho": rho,
                    "true_r": truth,
                    "true_r_se": truth_se,
                    "method": "GLS oracle",
                    "rows": "main pair",
                    **tally,
                    "n_boot": 0,
                    "cpu_s": round(time.process_time() - started, 2),
                    "default_settings": "",
                }
            )
            print(f"{cell.label} {rows[-1]['hypothesis']}: {tally['reject']}/{tally['testable']}", flush=True)
        frame = pd.DataFrame(rows, columns=list(CONTRACT_COLUMNS))
        path = Path(out)
        frame.to_csv(path, mode="a", header=not path.exists() or not path.stat().st_size, index=False)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
