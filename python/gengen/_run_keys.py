"""Run labels and the run keys they carry (``"seed=1,shots=64,data_seed=0"``), without pandas.

A run's ``run`` label is what users see (``"seed=1,shots=64,data_seed=0"`` for a fine-tuning run of a study,
any text for imported runs). Its keys are also stored as integer columns of the score table (:data:`RUN_KEYS`)
so that no reader parses the label back: :func:`run_label` writes the label from the keys and
:func:`parse_run_label` reads the keys of a label once, when a table without those columns is written (an
import of runs named ``seed=3``) or when a store of schema version 1 is upgraded. Re-exported by
:mod:`gengen.store`.
"""

from __future__ import annotations

import re

from gengen.errors import InputError

__all__ = ["RUN_KEYS", "RUN_KEY_RANGES", "parse_run_label", "run_label"]

RUN_KEYS: tuple[str, ...] = ("seed", "shots", "data_seed")
"""The keys of a run stored as their own integer columns, in the order :func:`run_label` writes them."""

RUN_KEY_RANGES: dict[str, tuple[int, int]] = {
    "seed": (-(2**63), 2**63 - 1),
    "shots": (0, 2**63 - 1),
    "data_seed": (-(2**63), 2**63 - 1),
}
"""The values each run key may take, as the store holds them (SQLite integers are signed 64-bit; a shot count
is not negative): the same bounds :mod:`gengen.score_checks` applies to the columns."""

_RUN_KEY_PATTERN = re.compile(r"(?:^|[,;\s])\s*(?P<key>seed|shots|data_seed)\s*=\s*(?P<value>-?\d+)\s*(?=$|[,;\s])")


def parse_run_label(run: str) -> dict[str, int]:
    """The run keys (:data:`RUN_KEYS`) written in a run label such as ``"seed=1,shots=64,data_seed=0"``.

    Parameters
    ----------
    run : str
        A run label; keys are ``name=integer`` separated by commas, semicolons or spaces.

    Returns
    -------
    dict of str to int
        The keys found (none for a label such as ``"main"``).

    Raises
    ------
    InputError
        A key out of :data:`RUN_KEY_RANGES` (``shots=-5``, ``seed=99999999999999999999999``), named with the
        label.

    Examples
    --------
    >>> parse_run_label("seed=1,shots=64,data_seed=0")
    {'seed': 1, 'shots': 64, 'data_seed': 0}
    >>> parse_run_label("main")
    {}
    """
    keys = {m.group("key"): int(m.group("value")) for m in _RUN_KEY_PATTERN.finditer(run)}
    for name, value in keys.items():
        lowest, highest = RUN_KEY_RANGES[name]
        if not lowest <= value <= highest:
            shown = str(value) if len(str(value)) <= 30 else f"{str(value)[:27]}..."
            raise InputError(
                f"run label {run[:80]!r}: {name}={shown} is out of range ({name} is an integer from "
                f"{'0' if lowest == 0 else '-2**63'} to 2**63 - 1)"
            )
    return keys


def run_label(seed: int, shots: int | None = None, data_seed: int | None = None) -> str:
    """The run label users see for a run with these keys (the inverse of :func:`parse_run_label`).

    Parameters
    ----------
    seed : int
        The training seed.
    shots, data_seed : int, optional
        The few-shot regime's shot count and data seed (both or neither).

    Returns
    -------
    str

    Examples
    --------
    >>> run_label(1), run_label(1, 64, 0)
    ('seed=1', 'seed=1,shots=64,data_seed=0')
    """
    label = f"seed={seed}"
    if shots is not None:
        label += f",shots={shots},data_seed={data_seed}"
    return label
