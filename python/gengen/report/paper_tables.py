"""Paper-ready tables of an analysis folder: the verdict per pair or the pairs table, as LaTeX or Markdown.

LaTeX uses booktabs rules (``\\toprule``, ``\\midrule``, ``\\bottomrule``; ``\\usepackage{booktabs}``) and escapes
every name from user data; Markdown is a pipe table with ``|`` and ``\\`` escaped. A correlation is shown with its
interval, a p-value with the adjustment it went through named in the header, and the caption names the methods.
Rows are the strongest first (``top`` of them; 0 for all). p-values below 0.001 are written ``< 0.001``, never 0.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from gengen.errors import InputError

__all__ = ["TABLES", "TABLE_FORMATS", "paper_table"]

#: Tables :func:`paper_table` writes, and the file of the analysis folder each reads.
TABLES = {"verdict": "verdict_pairs.csv", "pairs": "pairs.csv"}
#: Formats :func:`paper_table` writes, with the file suffix each is taken from.
TABLE_FORMATS = {"latex": ".tex", "markdown": ".md"}
#: Order of the verdict's classes in its table: the answers first, the undetermined last.
CLASS_ORDER = ("model-dependent", "consistent positive", "consistent negative", "undetermined")
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (``a_b & c`` → ``a\\_b \\& c``)."""
    return "".join(_LATEX_SPECIAL.get(char, char) for char in str(text))


def markdown_escape(text: str) -> str:
    """``text`` safe in a Markdown pipe-table cell (backslash, pipe, asterisk, underscore, backtick escaped)."""
    out = str(text).replace("\\", "\\\\")
    for char in "|*_`":
        out = out.replace(char, "\\" + char)
    return out.replace("\n", " ")


def _r(value: Any) -> str:
    number = float(value)
    return "n/a" if not math.isfinite(number) else f"{number:.2f}".replace("-", "−")


def _p(value: Any) -> str:
    number = float(value)
    if not math.isfinite(number):
        return "n/a"
    return "< 0.001" if number < 0.001 else f"{number:.3f}"


def _tally(series: pd.Series) -> str:
    values = [str(v) for v in series.dropna().unique() if str(v)]
    return "; ".join(values) if values else "not recorded"


#: The columns each table must have, and those that hold numbers (as gengen writes them).
TABLE_COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "pairs": (
        ("model", "run", "testset_a", "testset_b", "n", "r_partial", "ci_low", "ci_high", "p_deciding", "p_adjusted"),
        ("n", "r_partial", "ci_low", "ci_high", "ci_level", "p_deciding", "p_adjusted"),
    ),
    "verdict": (
        ("testset_a", "testset_b", "verdict", "n_groups", "r_min", "r_max", "r_common", "p_common_adjusted",
         "q_heterogeneity", "p_heterogeneity_adjusted"),
        ("n_groups", "r_min", "r_max", "r_common", "p_common_adjusted", "q_heterogeneity", "p_heterogeneity_adjusted"),
    ),
}  # fmt: skip


def _read(folder: Path, table: str) -> pd.DataFrame:
    from gengen._files import read_csv
    from gengen.analyse import stored

    path = folder / TABLES[table]
    hint = "gengen analyse or gengen compare writes it" if table == "verdict" else "gengen analyse writes it"
    stored.check_file(path, f"{hint}; --table {table} reads it")
    frame = read_csv(path, low_memory=False)  # one pass: no DtypeWarning on a 64,512-row pairs.csv
    stored.check_whole_csv(path, len(frame.columns))
    required, numeric = TABLE_COLUMNS[table]
    what = "verdict table of gengen compare" if table == "verdict" else "pairs table of gengen analyse"
    stored.check_columns(frame, str(path), what, required=required, numeric=numeric)
    if table == "pairs" and pd.to_numeric(frame["n"], errors="coerce").isna().any():
        row = int(pd.to_numeric(frame["n"], errors="coerce").isna().to_numpy().nonzero()[0][0])
        raise InputError(f"{path}: column 'n' is empty (row {row + 1}), expected a number of checkpoints")
    if table == "verdict":
        unknown = ~frame["verdict"].isin(CLASS_ORDER)
        if unknown.any():
            row = int(unknown.to_numpy().nonzero()[0][0])
            raise InputError(
                f"{path}: column 'verdict' holds {str(frame['verdict'].iloc[row])[:40]!r} (row {row + 1}), expected "
                f"one of {', '.join(CLASS_ORDER)}"
            )
    return frame


def _verdict_adjust(folder: Path) -> str:
    """The adjustment the verdict's p-values went through (``verdict.json``'s settings; "adjusted" when the
    folder has no ``verdict.json``)."""
    from gengen._files import read_json
    from gengen.analyse import stored

    path = folder / "verdict.json"
    if not path.exists():
        return "adjusted"
    stored.check_file(path, "gengen compare writes it with verdict_pairs.csv")
    record = read_json(path)
    settings = record.get("settings", {}) if isinstance(record, dict) else None
    if not isinstance(settings, dict):
        raise InputError(f"{path}: no 'settings' object; not as gengen compare writes it")
    return str(settings.get("adjust") or "adjusted")


def _pairs_rows(frame: pd.DataFrame, top: int) -> tuple[list[str], list[list[str]], str]:
    level = "run" if "level" in frame and (frame["level"] == "run").any() else None
    rows = frame[frame["level"] == level] if level else frame
    rows = rows.reindex(pd.to_numeric(rows["r_partial"], errors="coerce").abs().sort_values(ascending=False).index)
    rows = rows.head(top) if top else rows
    adjust = _tally(rows["adjust"]) if "adjust" in rows else "adjusted"
    level_ci = f"{float(rows['ci_level'].iloc[0]):.0%}" if "ci_level" in rows and len(rows) else "95%"
    header = ["model / run", "test set A", "test set B", "n", f"partial r [{level_ci} CI]", "p", f"p ({adjust})"]
    body = [
        [
            f"{row.model} / {row.run}",
            str(row.testset_a),
            str(row.testset_b),
            str(int(row.n)),
            f"{_r(row.r_partial)} [{_r(row.ci_low)}, {_r(row.ci_high)}]",
            _p(row.p_deciding),
            _p(row.p_adjusted),
        ]
        for row in rows.itertuples(index=False)
    ]
    method = _tally(rows["p_deciding_method"]) if "p_deciding_method" in rows else "not recorded"
    interval = _tally(rows["ci_method"]) if "ci_method" in rows else "not recorded"
    caption = (
        f"Partial correlation of two OOD test sets across checkpoints given the ID score, the {len(body)} strongest "
        f"of {len(frame)} pairs. p: {method}; adjusted with {adjust} over each group's pairs. Interval: {interval}."
    )
    return header, body, caption


def _verdict_rows(frame: pd.DataFrame, top: int, adjust: str) -> tuple[list[str], list[list[str]], str]:
    rank = {name: index for index, name in enumerate(CLASS_ORDER)}
    strength = pd.to_numeric(frame["r_common"], errors="coerce").abs().fillna(-1)
    order = sorted(range(len(frame)), key=lambda i: (rank.get(str(frame["verdict"].iloc[i]), 9), -strength.iloc[i]))
    rows = frame.iloc[order]
    rows = rows.head(top) if top else rows
    header = [
        "test set A",
        "test set B",
        "verdict",
        "common r",
        "r over models",
        f"p ({adjust})",
        "Q",
        f"p_Q ({adjust})",
    ]
    body = [
        [
            str(row.testset_a),
            str(row.testset_b),
            str(row.verdict),
            _r(row.r_common),
            f"{_r(row.r_min)} to {_r(row.r_max)}",
            _p(row.p_common_adjusted),
            "n/a"
            if not math.isfinite(float(row.q_heterogeneity))
            else f"{float(row.q_heterogeneity):.2f} ({int(row.n_groups) - 1} df)",
            _p(row.p_heterogeneity_adjusted),
        ]
        for row in rows.itertuples(index=False)
    ]
    counts = frame["verdict"].value_counts()
    tally = ", ".join(f"{int(counts.get(name, 0))} {name}" for name in CLASS_ORDER)
    caption = (
        f"Verdict per pair of OOD test sets across models ({tally}; the {len(body)} first shown). Common r: the "
        "models' inverse-variance mean on Fisher's z scale; r over models: the smallest and largest model's r; "
        f"Q: Cochran's heterogeneity statistic on models - 1 df. p-values adjusted with {adjust} over the pairs."
    )
    return header, body, caption


def _latex(header: list[str], body: list[list[str]], caption: str, numeric: int) -> str:
    columns = "l" * (len(header) - numeric) + "r" * numeric
    lines = [
        "\\begin{table}[t]",
        "\\centering",
        "\\small",
        f"\\caption{{{latex_escape(caption)}}}",
        f"\\begin{{tabular}}{{{columns}}}",
        "\\toprule",
        " & ".join(latex_escape(cell) for cell in header) + " \\\\",
        "\\midrule",
        *(" & ".join(latex_escape(cell).replace("−", "$-$") for cell in row) + " \\\\" for row in body),
        "\\bottomrule",
        "\\end{tabular}",
        "\\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _markdown(header: list[str], body: list[list[str]], caption: str, numeric: int) -> str:
    align = ["---"] * (len(header) - numeric) + ["---:"] * numeric
    lines = [
        "| " + " | ".join(markdown_escape(cell) for cell in header) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(markdown_escape(cell) for cell in row) + " |" for row in body),
        "",
        markdown_escape(caption),
    ]
    return "\n".join(lines) + "\n"


def paper_table(
    folder: str | Path,
    table: Literal["verdict", "pairs"],
    fmt: Literal["latex", "markdown"],
    *,
    top: int = 20,
) -> str:
    """A paper-ready table of an analysis folder.

    Parameters
    ----------
    folder : str or Path
        An analysis folder (``gengen analyse --out``): ``verdict_pairs.csv`` for ``"verdict"``, ``pairs.csv``
        for ``"pairs"``.
    table : {"verdict", "pairs"}
        The verdict per pair (class, common r, range over models, Cochran's Q) or the per-run pairs (partial r
        with its interval, the deciding p and the adjusted p).
    fmt : {"latex", "markdown"}
        booktabs LaTeX (a ``table`` float) or a Markdown pipe table, each with its caption.
    top : int
        Rows shown, strongest first (the verdict's classes in the order of :data:`CLASS_ORDER`); 0 for all.

    Returns
    -------
    str
        The table's source.

    Raises
    ------
    InputError
        An unknown table or format, a negative ``top``, or the folder lacks the table's file.
    """
    if table not in TABLES:
        raise InputError(f"--table: expected {' or '.join(TABLES)}, got {table!r}")
    if fmt not in TABLE_FORMATS:
        raise InputError(f"--format: expected {' or '.join(TABLE_FORMATS)} with --table, got {fmt!r}")
    if top < 0:
        raise InputError(f"--top: expected 0 (all rows) or more, got {top}")
    frame = _read(Path(folder), table)
    if table == "pairs":
        header, body, caption = _pairs_rows(frame, top)
    else:
        header, body, caption = _verdict_rows(frame, top, _verdict_adjust(Path(folder)))
    numeric = 4 if table == "pairs" else 5
    return (_latex if fmt == "latex" else _markdown)(header, body, caption, numeric)
