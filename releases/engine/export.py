"""Safe export of a released table.

Spreadsheet programs run a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula
(CSV / formula injection, OWASP). :func:`neutralise_formulas` prefixes such cells with a single
quote so they are shown as text. Tab and carriage return are treated the same way (OWASP lists
them too). Plain numbers such as ``-5`` or ``+3.2`` are left alone: they cannot run anything and
must stay numbers for whoever analyses the extract.
"""

from __future__ import annotations

import re

import pandas as pd

#: First characters that make a spreadsheet evaluate a cell.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_DANGEROUS = r"^[=+\-@\t\r]"
_PLAIN_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"


def neutralise_cell(value: str) -> str:
    """One cell: ``'=1+1`` for ``=1+1``; numbers and harmless text unchanged."""
    s = str(value)
    if s.startswith(FORMULA_PREFIXES) and not re.fullmatch(_PLAIN_NUMBER, s):
        return "'" + s
    return s


def neutralise_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells (and column names) cannot run as spreadsheet formulas.

    A cell is prefixed with ``'`` when it starts with one of ``= + - @ TAB CR`` and is not a plain
    number. Non-text columns (numbers) are returned unchanged.
    """
    out = df.copy()
    for col in out.columns:
        series = out[col]
        if not (pd.api.types.is_object_dtype(series) or pd.api.types.is_string_dtype(series)):
            continue
        text = series.astype(str)
        risky = text.str.contains(_DANGEROUS, regex=True) & ~text.str.fullmatch(_PLAIN_NUMBER)
        if risky.any():
            out[col] = series.where(~risky, "'" + text)
    out.columns = [neutralise_cell(c) if isinstance(c, str) else c for c in out.columns]
    return out


__all__ = ["FORMULA_PREFIXES", "neutralise_cell", "neutralise_formulas"]
