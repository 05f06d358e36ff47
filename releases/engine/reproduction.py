"""What reproduces a release from its input: the record a report keeps so that the release can
be re-applied later, to judge a new release of the same rows together with it.

The record (:class:`Reproduction`, stored as the report's ``"reproduction"``) holds the
SHA-256 of the input file and its row count, the quasi-identifiers with their hierarchy files
(path and SHA-256; an automatic hierarchy is rebuilt from the input and its SHA-256 is that of
its ARX text), the sensitive attributes and identifiers, the privacy model with its
suppression limit, the algorithm, the levels applied, the seed of the rows' order and its
scheme, the released columns and, for a release that protected earlier ones, their records
too (their classes decided which of its rows were suppressed). A release of a research subset
records the subset's file with its SHA-256 (:class:`SubsetSource`); such a release is not
re-applied (the command line does not judge research subsets together with earlier releases).

:meth:`Reproduction.membership` re-applies the release to its input: each input row's class
in it, or :data:`.cross_release.NOT_IN`. A different input, or a hierarchy file that changed,
is refused with a sentence naming it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .arrays import IntArray
from .criteria import EarlierReleases, PrivacyModel
from .cross_release import NOT_IN, ReleasedColumns, release_membership
from .errors import EngineError
from .hierarchy import Hierarchy
from .shuffle import KEYED, PERMUTATION
from .types import AnonymizationConfig

__all__ = [
    "REPORT_KEY",
    "HierarchySource",
    "Reproduction",
    "SubsetSource",
    "file_sha256",
    "hierarchy_sha256",
    "record",
]

#: Where a report keeps its reproduction record.
REPORT_KEY = "reproduction"
_CHUNK = 1024 * 1024


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, read a megabyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def hierarchy_sha256(hierarchy: Hierarchy) -> str:
    """The SHA-256 of a hierarchy's ARX text (for hierarchies built from the data)."""
    return hashlib.sha256(hierarchy.to_arx_csv().encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class HierarchySource:
    """Where a column's hierarchy comes from: a file (``path``, the SHA-256 of its bytes) or,
    with ``path`` None, built automatically from the input (the SHA-256 of its ARX text)."""

    column: str
    path: str | None
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {"column": self.column, "hierarchy": self.path, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> HierarchySource:
        column, sha = raw.get("column"), raw.get("sha256")
        path = raw.get("hierarchy")
        if not isinstance(column, str) or not isinstance(sha, str):
            raise EngineError("A hierarchy of the reproduction record lacks its column or SHA-256.")
        if path is not None and not isinstance(path, str):
            raise EngineError(f"The hierarchy path of {column!r} is not a file name.")
        return cls(column, path, sha)

    def load(self, values: pd.Series, where: str) -> Hierarchy:
        """The hierarchy, checked against its SHA-256."""
        if self.path is None:
            hierarchy = Hierarchy.automatic(values.tolist(), attribute=self.column)
            if hierarchy_sha256(hierarchy) != self.sha256:
                raise EngineError(
                    f"{where}: the automatic hierarchy of {self.column!r} built from this input "
                    "differs from the one recorded."
                )
            return hierarchy
        path = Path(self.path)
        if not path.is_file():
            raise EngineError(f"{where}: the hierarchy file of {self.column!r} ({path}) is gone.")
        if file_sha256(path) != self.sha256:
            raise EngineError(
                f"{where}: the hierarchy file of {self.column!r} ({path}) has changed since the "
                "release (its SHA-256 differs)."
            )
        return Hierarchy.from_arx_csv(path, attribute=self.column)


@dataclass(frozen=True)
class SubsetSource:
    """The file a research subset was read from (absolute path) and the SHA-256 of its bytes."""

    path: str
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.path, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, raw: Any) -> SubsetSource:
        if not isinstance(raw, Mapping):
            raise EngineError("The reproduction record's research subset is not an object.")
        path, sha = raw.get("file"), raw.get("sha256")
        if not isinstance(path, str) or not isinstance(sha, str):
            raise EngineError(
                "The research subset of the reproduction record lacks its file or SHA-256."
            )
        return cls(path, sha)


def _strings(raw: Any, what: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise EngineError(f"The reproduction record's {what} is not a list of column names.")
    return list(raw)


@dataclass(frozen=True)
class Reproduction:
    """Everything that reproduces a release from its input (see the module docstring)."""

    input_sha256: str
    input_rows: int
    quasi_identifiers: list[HierarchySource]
    privacy_model: dict[str, Any]
    algorithm: str
    levels: dict[str, int] | None
    seed: int
    columns: list[str]
    rows_out: int
    sensitive: list[str] = field(default_factory=list)
    sensitive_hierarchies: list[HierarchySource] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)
    earlier: list[Reproduction] = field(default_factory=list)
    research_subset: SubsetSource | None = None
    #: The scheme of the rows' order (:mod:`.shuffle`); a record without one predates the
    #: keyed hash: its rows were written in numpy's permutation.
    row_order: str = PERMUTATION

    @property
    def suppression_limit(self) -> float:
        return float(self.privacy_model.get("suppression_limit") or 0.0)

    def model(self) -> PrivacyModel:
        return PrivacyModel.from_spec(self.privacy_model)

    def as_dict(self) -> dict[str, Any]:
        return {
            "input_sha256": self.input_sha256,
            "input_rows": self.input_rows,
            "quasi_identifiers": [h.as_dict() for h in self.quasi_identifiers],
            "sensitive": list(self.sensitive),
            "sensitive_hierarchies": [h.as_dict() for h in self.sensitive_hierarchies],
            "identifiers": list(self.identifiers),
            "privacy_model": self.privacy_model,
            "suppression_limit": self.suppression_limit,
            "algorithm": self.algorithm,
            "levels": None if self.levels is None else dict(self.levels),
            "seed": self.seed,
            "row_order": self.row_order,
            "columns": list(self.columns),
            "rows_out": self.rows_out,
            "earlier": [e.as_dict() for e in self.earlier],
            "research_subset": None
            if self.research_subset is None
            else self.research_subset.as_dict(),
        }

    @classmethod
    def from_dict(cls, raw: Any) -> Reproduction:
        """Read a record back; a malformed one is an :class:`EngineError` saying what lacks."""
        if not isinstance(raw, Mapping):
            raise EngineError("The reproduction record is not an object.")
        try:
            levels = raw.get("levels")
            subset = raw.get("research_subset")
            return cls(
                input_sha256=str(raw["input_sha256"]),
                input_rows=int(raw["input_rows"]),
                quasi_identifiers=[HierarchySource.from_dict(h) for h in raw["quasi_identifiers"]],
                privacy_model=dict(raw["privacy_model"]),
                algorithm=str(raw["algorithm"]),
                levels=None if levels is None else {str(q): int(v) for q, v in levels.items()},
                seed=int(raw["seed"]),
                columns=_strings(raw["columns"], "columns"),
                rows_out=int(raw["rows_out"]),
                sensitive=_strings(raw.get("sensitive", []), "sensitive attributes"),
                sensitive_hierarchies=[
                    HierarchySource.from_dict(h) for h in raw.get("sensitive_hierarchies", [])
                ],
                identifiers=_strings(raw.get("identifiers", []), "identifiers"),
                earlier=[cls.from_dict(e) for e in raw.get("earlier", [])],
                research_subset=None if subset is None else SubsetSource.from_dict(subset),
                row_order=str(raw.get("row_order", PERMUTATION)),
            )
        except KeyError as exc:
            raise EngineError(f"The reproduction record lacks {exc.args[0]!r}.") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise EngineError(f"The reproduction record is malformed ({exc}).") from None

    @classmethod
    def from_report(cls, report: Any) -> Reproduction:
        if not isinstance(report, Mapping) or REPORT_KEY not in report:
            raise EngineError(
                "The report has no reproduction record (it was written before reports kept one)."
            )
        return cls.from_dict(report[REPORT_KEY])

    def released_columns(self) -> ReleasedColumns:
        local = self.algorithm == "mondrian" or self.levels is None
        qis: dict[str, int | None] = {
            h.column: None if local else (self.levels or {}).get(h.column)
            for h in self.quasi_identifiers
        }
        return ReleasedColumns(tuple(self.columns), qis, tuple(self.sensitive))

    def check_input(self, input_sha256: str, rows: int, where: str) -> None:
        """Refuse an input other than the release's."""
        if input_sha256 != self.input_sha256:
            raise EngineError(
                f"{where} was made from another input (SHA-256 {self.input_sha256[:12]}…, this "
                f"input {input_sha256[:12]}…); releases are judged together only on the same "
                "rows."
            )
        if rows != self.input_rows:
            raise EngineError(
                f"{where} was made from {self.input_rows:,} rows; this input has {rows:,}."
            )

    def config(self, data: pd.DataFrame, where: str) -> AnonymizationConfig:
        """The configuration that makes the release of ``data`` again (its earlier releases'
        classes re-applied when it protected them). A release of a research subset is refused:
        re-applied without its subset it would release other rows."""
        if self.research_subset is not None:
            raise EngineError(
                f"{where} released a research subset ({self.research_subset.path}); releases "
                "of research subsets are not judged together with others."
            )
        for column in [h.column for h in self.quasi_identifiers] + self.sensitive:
            if column not in data.columns:
                raise EngineError(f"{where}: column {column!r} is not in the input.")
        model = self.model()
        earlier: dict[str, IntArray] = {}
        if any(isinstance(c, EarlierReleases) for c in model.criteria):
            for i, record in enumerate(self.earlier):
                inner = f"{where} (its earlier release {i + 1})"
                earlier[f"earlier release {i + 1}"] = record.membership(data, inner)
        return AnonymizationConfig(
            quasi_identifiers={
                h.column: h.load(data[h.column], where) for h in self.quasi_identifiers
            },
            model=model,
            sensitive=list(self.sensitive),
            identifiers=[c for c in self.identifiers if c in data.columns],
            sensitive_hierarchies={
                h.column: h.load(data[h.column], where) for h in self.sensitive_hierarchies
            },
            algorithm="mondrian" if self.algorithm == "mondrian" else "optimal",
            levels=None if self.levels is None else dict(self.levels),
            earlier_releases=earlier,
        )

    def membership(self, data: pd.DataFrame, where: str = "the earlier release") -> IntArray:
        """Each input row's class in the release, re-applied to ``data`` (its input); the
        release is checked to hold as many rows as it did."""
        membership = release_membership(data, self.config(data, where))
        rows_out = int(np.count_nonzero(membership != NOT_IN))
        if rows_out != self.rows_out:
            raise EngineError(
                f"{where} does not reproduce: re-applied, it releases {rows_out:,} rows, not "
                f"{self.rows_out:,}."
            )
        return membership


def record(
    config: AnonymizationConfig,
    hierarchy_files: Mapping[str, str | None],
    input_sha256: str,
    input_rows: int,
    levels: Mapping[str, int] | None,
    algorithm: str,
    seed: int,
    columns: Sequence[str],
    rows_out: int,
    earlier: Sequence[Reproduction] = (),
    research_subset_file: str | None = None,
    row_order: str = KEYED,
) -> Reproduction:
    """The record of a release made with ``config``; ``hierarchy_files``: per column with a
    hierarchy, the file it was read from (None: built from the data); ``research_subset_file``:
    the file of ``config.research_subset`` (required with one: the record names what was
    released)."""
    subset = None
    if config.research_subset is not None:
        if research_subset_file is None:
            raise EngineError("The record of a research subset's release needs the subset's file.")
        subset = SubsetSource(
            str(Path(research_subset_file).resolve()), file_sha256(research_subset_file)
        )

    def source(column: str, hierarchy: Hierarchy) -> HierarchySource:
        path = hierarchy_files.get(column)
        if path is None:
            return HierarchySource(column, None, hierarchy_sha256(hierarchy))
        return HierarchySource(column, str(Path(path).resolve()), file_sha256(path))

    return Reproduction(
        input_sha256=input_sha256,
        input_rows=int(input_rows),
        quasi_identifiers=[source(q, h) for q, h in config.quasi_identifiers.items()],
        privacy_model=config.model.to_spec(),
        algorithm=algorithm,
        levels=None if levels is None else {q: int(v) for q, v in levels.items()},
        seed=int(seed),
        columns=list(columns),
        rows_out=int(rows_out),
        sensitive=list(config.sensitive),
        sensitive_hierarchies=[source(s, h) for s, h in config.sensitive_hierarchies.items()],
        identifiers=list(config.identifiers),
        earlier=list(earlier),
        research_subset=subset,
        row_order=row_order,
    )
