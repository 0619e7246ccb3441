"""Run labels and the run keys they carry (``"seed=1,shots=64,data_seed=0"``), without pandas.

A run's ``run`` label is what users see (``"seed=1,shots=64,data_seed=0"`` for a fine-tuning run of a study,
any text for imported runs). Its keys are also stored as integer columns of the score table (:data:`RUN_KEYS`)
so that no reader parses the label back: :func:`run_label` writes the label from the keys and
:func:`parse_run_label` reads the keys of a label once, when a table without those columns is written (an
import of runs named ``seed=3``) or when a store of schema version 1 is upgraded. Re-exported by
:mod:`gengen.store.database`.
"""

from __future__ import annotations

import re

from gengen.errors import InputError

__all__ = ["REPLICATE_KEYS", "RUN_KEYS", "RUN_KEY_RANGES", "parse_run_label", "run_attributes", "run_label"]

RUN_KEYS: tuple[str, ...] = ("seed", "shots", "data_seed")
"""The keys of a run stored as their own integer columns, in the order :func:`run_label` writes them."""

RUN_KEY_RANGES: dict[str, tuple[int, int]] = {
    "seed": (-(2**63), 2**63 - 1),
    "shots": (0, 2**63 - 1),
    "data_seed": (-(2**63), 2**63 - 1),
}
"""The values each run key may take, as the store holds them (SQLite integers are signed 64-bit; a shot count
is not negative): the same bounds :mod:`gengen.store.checks` applies to the columns."""

#: The run attributes that vary between replicates of one condition unless told otherwise (``replicate_key``):
#: the training seed and the few-shot data seed. Every other attribute (shots, prompt format, compute
#: multiplier, learning rate…) names a condition, whose runs are never pooled as replicates.
REPLICATE_KEYS: tuple[str, ...] = ("seed", "data_seed")

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "few": -1,
}  # fmt: skip
_SHOT_WORD = re.compile(
    r"(?<![A-Za-z0-9])(?P<count>\d+|" + "|".join(_NUMBER_WORDS) + r")[-_ ]?shots?(?![A-Za-z0-9])", re.IGNORECASE
)
_COMPUTE = re.compile(r"(?<![A-Za-z0-9.])(?P<multiple>\d+(?:\.\d+)?)x(?P<unit>C)(?![A-Za-z0-9])")
_KEY_VALUE = re.compile(r"(?:^|(?<=[,;\s]))\s*(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(?P<value>[^,;\s=]+)")
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
    if "shots" not in keys:
        shots = _shot_count(run)
        if shots is not None:
            keys["shots"] = shots
    return keys


def _shot_count(run: str) -> int | None:
    """The shot count a label writes as words (``zero-shot``, ``five-shot``, ``5shot``, ``5-shot``), if one."""
    found = _SHOT_WORD.search(run)
    if found is None:
        return None
    count = found.group("count").lower()
    number = int(count) if count.isdigit() else _NUMBER_WORDS[count]
    return None if number < 0 else number


def run_attributes(run: str) -> tuple[dict[str, str], str]:
    """The attributes a run label carries, and the rest of the label that carries none.

    Read: ``key=value`` lists (any key; separated by commas, semicolons or blanks), shot counts written as words
    (``zero-shot``, ``five-shot``, ``5shot``: ``shots``) and compute multipliers (``0.5xC``, ``10xC``:
    ``compute``). Values are kept as written (``lr=1e-4``), shot counts as whole numbers.

    Parameters
    ----------
    run : str
        A run label.

    Returns
    -------
    attributes : dict of str to str
        Attribute -> value.
    rest : str
        The label without the attributes found (``""`` when they are all of it): free text such as ``"main"``.

    Examples
    --------
    >>> run_attributes("seed=1,shots=64,data_seed=0")
    ({'seed': '1', 'shots': '64', 'data_seed': '0'}, '')
    >>> run_attributes("five-shot")
    ({'shots': '5'}, '')
    >>> run_attributes("OLMo-2-1B-0.5xC seed=3")
    ({'seed': '3', 'compute': '0.5xC'}, 'OLMo-2-1B')
    >>> run_attributes("main")
    ({}, 'main')
    """
    attributes: dict[str, str] = {}
    rest = run
    for found in _KEY_VALUE.finditer(run):
        attributes[found.group("key")] = found.group("value")
        rest = rest.replace(found.group(0).strip(), " ", 1)
    shots = _shot_count(rest)
    if shots is not None and "shots" not in attributes:
        attributes["shots"] = str(shots)
        rest = _SHOT_WORD.sub(" ", rest, count=1)
    compute = _COMPUTE.search(rest)
    if compute is not None and "compute" not in attributes:
        attributes["compute"] = compute.group(0)
        rest = rest[: compute.start()] + " " + rest[compute.end() :]
    return attributes, re.sub(r"^[\s,;_-]+|[\s,;_-]+$", "", re.sub(r"[\s,;]+", " ", rest))


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
