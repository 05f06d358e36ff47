"""Generalization hierarchies: for each original value, its generalizations level by level.

Level 0 is the value itself and the last level is the fully generalized value (``*`` for the
builders here; ARX files usually end with ``*`` too). Hierarchies are imported from ARX's
CSV format or built from the data (numeric intervals, dates, masking, categorical).

The empty string is a value of its own (a missing value) and is never dropped.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from .arrays import IntArray
from .constants import SUPPRESSED_VALUE
from .errors import HierarchyError

__all__ = ["Hierarchy"]


def _shown(widths: Sequence[float]) -> str:
    """Widths as typed, shortened: a list of 5,000 ones is not a message."""
    text = ", ".join(f"{w:g}" for w in widths[:8])
    return text + (f", ... ({len(widths)} widths)" if len(widths) > 8 else "")


def _decode(raw: bytes) -> str:
    # ARX writes UTF-8; older exports from spreadsheets are often Latin-1.
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _read_source(source: str | Path | bytes) -> str:
    if isinstance(source, bytes | bytearray):
        return _decode(bytes(source))
    if isinstance(source, Path):
        return _decode(source.read_bytes())
    if isinstance(source, str):
        # A one-line string naming an existing file is a path; anything else is the text.
        if "\n" not in source and "\r" not in source and os.path.isfile(source):
            return _decode(Path(source).read_bytes())
        return source[1:] if source.startswith("\ufeff") else source
    raise HierarchyError(f"Cannot read a hierarchy from a {type(source).__name__}.")


def _number_label(x: float) -> str:
    if float(x).is_integer():
        return str(int(x))
    return format(x, "g")


def _nice_width(span: float, intervals: int = 16) -> float:
    """The smallest 1, 2 or 5 times a power of ten giving at most ``intervals`` intervals."""
    if span <= 0:
        return 1.0
    raw = span / intervals
    exponent = math.floor(math.log10(raw))
    for mantissa in (1, 2, 5, 10):
        width = mantissa * 10.0**exponent
        if width >= raw:
            return width
    return 10.0 ** (exponent + 1)  # pragma: no cover - the loop always returns


def _parse_number(value: str) -> float | None:
    try:
        x = float(value.strip())
    except ValueError:
        return None
    return x if math.isfinite(x) and value.strip() != "" else None


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A generalization hierarchy of one attribute.

    ``rows[i]`` holds a value (level 0) followed by its generalizations up to the top level,
    one row per value. ``height`` is the number of levels including level 0.

    A row repeated identically (ARX's own benchmark files have some) adds nothing: it is kept
    out of ``rows`` and reported in ``warnings``. Two rows giving one value different
    generalizations are refused. ``source_rows`` keeps the rows as given, repeats included:
    ARX counts every row of the file as a leaf of the domain (``DomainShareMaterialized``), so
    domain shares (:meth:`domain_shares`, :attr:`domain_size`) do too.
    """

    rows: tuple[tuple[str, ...], ...]
    attribute: str | None = None
    #: How the hierarchy was made ("arx", "intervals", "dates", "masking", "categorical").
    kind: str = field(default="arx", compare=False)
    #: Sentences about what was accepted but looked odd (repeated rows).
    warnings: tuple[str, ...] = field(default=(), init=False, compare=False)
    source_rows: tuple[tuple[str, ...], ...] = field(default=(), init=False, compare=False)

    def __post_init__(self) -> None:
        rows = tuple(tuple(str(v) for v in row) for row in self.rows)
        object.__setattr__(self, "source_rows", rows)
        self._check_lengths(rows)
        unique, warnings = self._without_repeats(rows)
        object.__setattr__(self, "rows", unique)
        object.__setattr__(self, "warnings", tuple(warnings))
        self._check()

    # ----------------------------------------------------------------------------- checks
    def _check_lengths(self, rows: tuple[tuple[str, ...], ...]) -> None:
        if not rows:
            raise HierarchyError(self._named("The hierarchy is empty."))
        lengths = [len(r) for r in rows]
        if len(set(lengths)) > 1:
            # Name the first row whose length differs from the most common one.
            common = max(set(lengths), key=lengths.count)
            i = next(i for i, n in enumerate(lengths) if n != common)
            raise HierarchyError(
                self._named(
                    f"row {i + 1} ({rows[i][0]!r}) has {lengths[i]} levels, the others {common}."
                )
            )

    def _without_repeats(
        self, rows: tuple[tuple[str, ...], ...]
    ) -> tuple[tuple[tuple[str, ...], ...], list[str]]:
        """The rows with identical repeats dropped, and a warning per repeat; a value given
        two different generalizations is an error naming both rows."""
        seen: dict[str, int] = {}
        unique: list[tuple[str, ...]] = []
        warnings: list[str] = []
        for i, row in enumerate(rows):
            first = seen.get(row[0])
            if first is None:
                seen[row[0]] = i
                unique.append(row)
            elif rows[first] == row:
                warnings.append(
                    self._named(
                        f"value {row[0]!r} is listed twice with the same generalizations "
                        f"(rows {first + 1} and {i + 1}); the repeated row is ignored."
                    )
                )
            else:
                raise HierarchyError(
                    self._named(
                        f"value {row[0]!r} appears twice with different generalizations "
                        f"(rows {first + 1} and {i + 1}); a value must have a single row."
                    )
                )
        return tuple(unique), warnings

    def _check(self) -> None:
        height = len(self.rows[0])
        # Functional: values that agree at level i agree at every level above i.
        for level in range(1, height - 1):
            parent: dict[str, tuple[str, int]] = {}
            for i, row in enumerate(self.rows):
                label, up = row[level], row[level + 1]
                if label in parent and parent[label][0] != up:
                    first = self.rows[parent[label][1]][0]
                    raise HierarchyError(
                        self._named(
                            f"values {first!r} and {row[0]!r} share {label!r} at level {level} "
                            f"but differ at level {level + 1} ({parent[label][0]!r} and {up!r}); "
                            "a generalization must have a single parent."
                        )
                    )
                parent.setdefault(label, (up, i))

    def _named(self, message: str) -> str:
        prefix = f"Hierarchy of {self.attribute!r}: " if self.attribute else "Hierarchy: "
        return prefix + message

    # ----------------------------------------------------------------------------- basics
    @property
    def height(self) -> int:
        """Number of levels including level 0."""
        return len(self.rows[0])

    @cached_property
    def values(self) -> list[str]:
        """The original values (level 0) in file order."""
        return [r[0] for r in self.rows]

    @cached_property
    def index(self) -> dict[str, int]:
        """Original value -> row number."""
        return {r[0]: i for i, r in enumerate(self.rows)}

    def level(self, level: int) -> list[str]:
        """The generalization of every row at ``level``, in row order."""
        return [r[level] for r in self.rows]

    def mapping(self, level: int) -> dict[str, str]:
        """Original value -> its generalization at ``level``."""
        return {r[0]: r[level] for r in self.rows}

    def generalize(self, value: str, level: int) -> str:
        try:
            return self.rows[self.index[value]][level]
        except KeyError:
            raise HierarchyError(self._named(f"value {value!r} is not in the hierarchy.")) from None

    def domain_shares(self, level: int) -> dict[str, float]:
        """Share of the hierarchy's leaves under each generalized value at ``level``.

        share(v, level) = |{leaves x of the hierarchy : x generalizes to v at level}| / |leaves|,
        as ARX's ``DomainShareMaterialized`` computes it (leaves of the hierarchy, not of data).
        """
        counts: dict[str, int] = {}
        for r in self.source_rows:
            counts[r[level]] = counts.get(r[level], 0) + 1
        size = len(self.source_rows)
        return {k: v / size for k, v in counts.items()}

    @cached_property
    def label_levels(self) -> dict[str, int]:
        """Each label -> the first level (column) holding it: how ARX reads a released label's
        level back (its "inverse generalization function"); ``*`` is the top when absent."""
        out: dict[str, int] = {}
        for level in range(self.height):
            for r in self.source_rows:
                out.setdefault(r[level], level)
        out.setdefault(SUPPRESSED_VALUE, self.height - 1)
        return out

    @property
    def domain_size(self) -> int:
        """Leaves of the domain as ARX counts them: the rows of the file, repeats included."""
        return len(self.source_rows)

    def with_attribute(self, attribute: str) -> Hierarchy:
        return Hierarchy(self.source_rows, attribute=attribute, kind=self.kind)

    def validate_against(self, values: Iterable[str]) -> None:
        """Raise :class:`HierarchyError` naming the first value the hierarchy does not cover."""
        index = self.index
        for v in values:
            if v not in index:
                raise HierarchyError(
                    self._named(f"the data value {v!r} is not covered by the hierarchy.")
                )

    def preview(self, limit: int = 20) -> list[list[str]]:
        """The levels of the first ``limit`` values, one list per value."""
        return [list(r) for r in self.rows[:limit]]

    def to_arx_csv(self, delimiter: str = ";") -> str:
        """ARX's format: no header, one row per value (as given), levels separated by
        ``delimiter``."""
        out = io.StringIO()
        writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
        writer.writerows(self.source_rows)  # as given: repeats keep ARX's domain size
        return out.getvalue()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hierarchy) and self.rows == other.rows

    def __hash__(self) -> int:
        return hash(self.rows)

    def __repr__(self) -> str:
        return f"Hierarchy({self.attribute!r}, {len(self.rows)} values, height {self.height})"

    # ----------------------------------------------------------------------------- import
    @classmethod
    def from_arx_csv(
        cls,
        source: str | Path | bytes,
        delimiter: str | None = None,
        attribute: str | None = None,
    ) -> Hierarchy:
        """Read an ARX hierarchy file (path, bytes or text).

        No header; each row is a value followed by its generalizations; ``;`` or ``,``
        separated (detected from the first line when ``delimiter`` is None); UTF-8 with optional
        BOM, else Latin-1; LF or CRLF; blank lines ignored.
        """
        text = _read_source(source)
        lines = [ln for ln in text.splitlines() if ln.strip() != ""]
        where = f"Hierarchy of {attribute!r}: " if attribute else "Hierarchy: "
        if not lines:
            raise HierarchyError(where + "the file is empty.")
        if delimiter is None:
            first = lines[0]
            delimiter = ";" if first.count(";") >= first.count(",") and ";" in first else ","
            if ";" not in first and "," not in first:
                delimiter = ";"
        rows = [tuple(r) for r in csv.reader(lines, delimiter=delimiter)]
        return cls(tuple(rows), attribute=attribute, kind="arx")

    # ----------------------------------------------------------------------------- builders
    @staticmethod
    def _distinct(values: Iterable[str]) -> list[str]:
        return list(dict.fromkeys(str(v) for v in values))

    @classmethod
    def categorical(cls, values: Iterable[str], attribute: str | None = None) -> Hierarchy:
        """Each value -> ``*``."""
        distinct = cls._distinct(values) or [""]
        return cls(tuple((v, SUPPRESSED_VALUE) for v in distinct), attribute, "categorical")

    @classmethod
    def intervals(
        cls,
        values: Iterable[str],
        widths: Sequence[float] | None = None,
        attribute: str | None = None,
    ) -> Hierarchy:
        """Numeric intervals of growing width, then ``*``.

        With ``widths`` (each a multiple of the one before, e.g. [5, 10, 20]) one level per
        width; otherwise widths double from a round base (1, 2 or 5 times a power of ten, about
        16 intervals over the range) until at most two intervals remain. Intervals are aligned
        on multiples of their width. Labels: ``"35-39"`` when all numbers are whole, else
        ``"[0.5, 1[``. Non-numeric or missing values map to themselves, then ``*``.
        """
        distinct = cls._distinct(values) or [""]
        numbers = {v: _parse_number(v) for v in distinct}
        present = [x for x in numbers.values() if x is not None]
        integral = all(float(x).is_integer() for x in present)
        if widths is None:
            if present:
                lo, hi = min(present), max(present)
                base = _nice_width(hi - lo)
                if integral:
                    base = max(1.0, math.ceil(base))
                widths = []
                w = base
                while True:
                    widths.append(w)
                    if math.floor(hi / w) - math.floor(lo / w) + 1 <= 2:
                        break
                    w *= 2
            else:
                widths = []
        widths = [float(w) for w in widths]
        for a, b in zip(widths, widths[1:], strict=False):
            ratio = b / a if a > 0 else 0
            # A repeated width adds a level that changes nothing (and "1,1,1,..." thousands).
            if a <= 0 or b <= 0 or abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 2:
                raise HierarchyError(
                    "Interval widths must be positive and each a multiple of the one before, "
                    f"and larger (for example 5, 10, 20), not {_shown(widths)}."
                )
        if widths and widths[0] <= 0:
            raise HierarchyError(f"Interval widths must be positive, not {_shown(widths)}.")

        def label(x: float, w: float) -> str:
            start = math.floor(x / w) * w
            if integral and w.is_integer():
                return f"{_number_label(start)}-{_number_label(start + w - 1)}"
            return f"[{_number_label(start)}, {_number_label(start + w)}["

        rows = []
        for v in distinct:
            x = numbers[v]
            if x is None:
                rows.append((v, *([v] * len(widths)), SUPPRESSED_VALUE))
            else:
                rows.append((v, *(label(x, w) for w in widths), SUPPRESSED_VALUE))
        return cls(tuple(rows), attribute, "intervals")

    @classmethod
    def dates(
        cls,
        values: Iterable[str],
        dayfirst: bool = False,
        attribute: str | None = None,
    ) -> Hierarchy:
        """Day -> month (``YYYY-MM``) -> year -> decade (``1990-1999``) -> ``*``.

        Parses ISO dates and common formats (``dayfirst`` for 31/12/2020). Values that are not
        dates (and missing values) map to themselves, then ``*``.
        """
        distinct = cls._distinct(values) or [""]
        rows = []
        for v, ts in zip(distinct, _parse_dates(distinct, dayfirst), strict=True):
            if v.strip() == "" or ts is None or not _nanosecond_range(ts):
                rows.append((v, v, v, v, SUPPRESSED_VALUE))
            else:
                decade = ts.year // 10 * 10
                rows.append(
                    (
                        v,
                        f"{ts.year:04d}-{ts.month:02d}",
                        f"{ts.year:04d}",
                        f"{decade:04d}-{decade + 9:04d}",
                        SUPPRESSED_VALUE,
                    )
                )
        return cls(tuple(rows), attribute, "dates")

    @classmethod
    def masking(cls, values: Iterable[str], attribute: str | None = None) -> Hierarchy:
        """One more character masked from the right per level, then ``*``.

        02139 -> 0213* -> 021** -> 02*** -> 0**** -> ``*``. Masking keeps the length, so values
        of different lengths never merge before the top level.
        """
        distinct = cls._distinct(values) or [""]
        longest = max(len(v) for v in distinct)
        rows = []
        for v in distinct:
            levels = [v]
            for i in range(1, longest):
                keep = max(len(v) - i, 0)
                levels.append(v[:keep] + "*" * (len(v) - keep))
            levels.append(SUPPRESSED_VALUE)
            rows.append(tuple(levels))
        return cls(tuple(rows), attribute, "masking")

    @classmethod
    def automatic(cls, values: Iterable[str], attribute: str | None = None) -> Hierarchy:
        """Intervals when all non-missing values are numbers (more than one distinct), else
        categorical."""
        distinct = cls._distinct(values)
        present = [v for v in distinct if v.strip() != ""]
        numeric = [_parse_number(v) for v in present]
        if len(set(numeric)) > 1 and all(x is not None for x in numeric):
            return cls.intervals(distinct, attribute=attribute)
        return cls.categorical(distinct, attribute=attribute)

    # ----------------------------------------------------------------------------- encoding
    def encode(self, data_values: Sequence[str]) -> tuple[list[IntArray], list[list[str]]]:
        """Integer codes of ``data_values`` (distinct data values) at every level.

        Returns ``(codes, labels)``: ``codes[level][j]`` is the code of the generalization of
        ``data_values[j]`` at ``level`` and ``labels[level][code]`` its label. Codes at each level
        are numbered over the data's generalized values only, in order of first appearance.
        """
        index = self.index
        try:
            rows = [self.rows[index[v]] for v in data_values]
        except KeyError as exc:
            raise HierarchyError(
                self._named(f"the data value {exc.args[0]!r} is not covered by the hierarchy.")
            ) from None
        codes: list[IntArray] = []
        labels: list[list[str]] = []
        for level in range(self.height):
            lookup: dict[str, int] = {}
            out = np.empty(len(rows), dtype=np.int64)
            for j, r in enumerate(rows):
                out[j] = lookup.setdefault(r[level], len(lookup))
            codes.append(out)
            labels.append(list(lookup))
        return codes, labels


def _parse_dates(values: list[str], dayfirst: bool) -> list[pd.Timestamp | None]:
    """Each value as a Timestamp (None when it is no date), as pandas 2 parsed them.

    ISO 8601 values are read year-month-day whatever ``dayfirst`` says (pandas 3's mixed
    parsing would read 2020-01-05 as 1 May), the others in the format each one has."""
    series = pd.Series(values, dtype=object)
    try:
        iso = pd.to_datetime(series, errors="coerce", format="ISO8601")
        rest = iso.isna().to_numpy()
        other = pd.to_datetime(series[rest], errors="coerce", dayfirst=dayfirst, format="mixed")
    except ValueError:
        # Different UTC offsets: pandas 3 refuses them in one array (pandas 2 kept each value
        # in its own offset). One by one, each keeps its own.
        return [_parse_date(v, dayfirst) for v in values]
    parsed: list[pd.Timestamp | None] = [None if pd.isna(ts) else ts for ts in iso]
    for i, ts in zip(rest.nonzero()[0].tolist(), other, strict=True):
        parsed[i] = None if pd.isna(ts) else ts
    return parsed


def _parse_date(value: str, dayfirst: bool) -> pd.Timestamp | None:
    iso = pd.to_datetime(value, errors="coerce", format="ISO8601")
    if not pd.isna(iso):
        return iso
    other = pd.to_datetime(value, errors="coerce", dayfirst=dayfirst, format="mixed")
    return None if pd.isna(other) else other


def _nanosecond_range(ts: pd.Timestamp) -> bool:
    """Whether a parsed date lies in ``datetime64[ns]``'s range (1677-09-21 to 2262-04-11).

    pandas 3 parses dates of any year from 1 to 9999; pandas 2 parsed only this range, and a
    date outside it has always been kept as a value of its own (as text that is not a date)."""
    instant = ts.tz_convert(None) if ts.tzinfo is not None else ts
    return bool(pd.Timestamp.min <= instant <= pd.Timestamp.max)
