"""Running a release: compose the queries' measurements, draw the noise once, and the results.

Also the exact counts behind each published cell (:func:`true_counts`), for the officers'
review only: plain pandas, never released.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from decimal import Decimal
from importlib.metadata import version
from typing import Any

import opendp.prelude as dp
import pandas as pd

from ..types import EngineError
from .mechanisms import CONFIDENCE, D_IN, QueryPlan, build_all, joint_keys, numbers_of
from .queries import (
    OTHER_LABEL,
    OUTSIDE,
    SEPARATOR,
    Histogram,
    Mean,
    Query,
    Sum,
    _Bounded,
    requested_delta,
    requested_epsilon,
    validate_queries,
)

# --- Running a release ----------------------------------------------------------------------


@dataclass(frozen=True)
class QueryResult:
    """A query's plan and its noisy ``value`` (drawn once), with the error at 95 %."""

    plan: QueryPlan
    value: Any
    error: float | None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "value": self.value,
            "error": self.error,
            "result_detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryResult:
        plan_fields = {f.name for f in fields(QueryPlan)}
        plan = QueryPlan(**{k: v for k, v in data.items() if k in plan_fields})
        return cls(plan, data["value"], data["error"], dict(data.get("result_detail") or {}))

    def table_rows(self) -> list[dict[str, Any]]:
        """One row per published number: statistic, group, value, error (for CSV)."""
        p = self.plan
        base = {
            "query": p.index + 1,
            "statistic": p.description,
            "epsilon": p.epsilon,
            "mechanism": p.mechanism,
            "error_kind": p.error_kind,
        }
        if p.kind == "histogram":
            return [
                {**base, "group": " × ".join(c["cell"]), "value": c["count"], "error": self.error}
                for c in self.value
            ]
        if p.kind == "quantiles":
            return [
                {**base, "group": q["label"], "value": q["value"], "error": q["error"]}
                for q in self.value
            ]
        return [{**base, "group": "", "value": self.value, "error": self.error}]


@dataclass(frozen=True)
class ReleaseResult:
    """The noisy results of a release and its total privacy loss.

    ``epsilon``/``delta``: what the release spends (sum of the queries' requested ε and δ).
    ``privacy_loss``: OpenDP's accountant for the composed measurement that ran (<= epsilon);
    ``privacy_loss_delta`` its δ (0 unless a query released labels from the data).
    """

    results: tuple[QueryResult, ...]
    epsilon: float
    delta: float
    privacy_loss: float
    privacy_loss_delta: float = 0.0
    confidence: float = CONFIDENCE
    privacy_unit: str = "one row, added or removed (unbounded DP)"
    composition: str = "basic sequential composition (OpenDP make_composition)"
    opendp_version: str = field(default_factory=lambda: version("opendp"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "results": [r.to_dict() for r in self.results],
            "epsilon": self.epsilon,
            "delta": self.delta,
            "privacy_loss": self.privacy_loss,
            # Only when a query spent δ: pure ε-DP results keep the form (and SHA-256) they had.
            **({"privacy_loss_delta": self.privacy_loss_delta} if self.privacy_loss_delta else {}),
            "confidence": self.confidence,
            "privacy_unit": self.privacy_unit,
            "composition": self.composition,
            "opendp_version": self.opendp_version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReleaseResult:
        return cls(
            results=tuple(QueryResult.from_dict(r) for r in data["results"]),
            **{k: v for k, v in data.items() if k != "results"},
        )

    def canonical_json(self) -> bytes:
        return canonical_json(self.to_dict())

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json()).hexdigest()

    def table_rows(self) -> list[dict[str, Any]]:
        return [row for r in self.results for row in r.table_rows()]


def canonical_json(data: Any) -> bytes:
    """One byte form per value: sorted keys, no spaces, UTF-8, shortest float repr, no NaN."""
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


@dataclass(frozen=True)
class CompiledRelease:
    """A release's OpenDP measurement, built once: invoking it draws fresh noise each time.

    ``measurement`` is the basic composition of the queries' measurements; its privacy map at
    one row, ``privacy_loss``, is checked to equal the sum of theirs and to fit ``epsilon``.
    """

    queries: tuple[Query, ...]
    columns: tuple[str, ...]
    plans: tuple[QueryPlan, ...]
    measurement: dp.Measurement
    privacy_loss: float
    privacy_loss_delta: float
    epsilon: Decimal
    delta: Decimal
    _finishers: tuple[Callable[[Any], tuple[Any, float | None, dict[str, Any]]], ...]

    def run(self, frame: pd.DataFrame) -> ReleaseResult:
        if [str(c) for c in frame.columns] != list(self.columns):
            raise EngineError("The data's columns are not those the release was built for.")
        raw = self.measurement(frame)
        results = []
        for plan, finish, output in zip(self.plans, self._finishers, raw, strict=True):
            value, error, detail = finish(output)
            results.append(QueryResult(plan, value, error, detail))
        return ReleaseResult(
            results=tuple(results),
            epsilon=float(self.epsilon),
            delta=float(self.delta),
            privacy_loss=self.privacy_loss,
            privacy_loss_delta=self.privacy_loss_delta,
        )


def _is_approximate(measurement: dp.Measurement) -> bool:
    return measurement.output_measure != dp.max_divergence()


def compile_release(queries: Sequence[Query], columns: Sequence[str]) -> CompiledRelease:
    """Validate the queries against the dataset's columns and compose their measurements.

    When a query is (ε, δ)-DP (a private key release), every pure one is made approximate
    (``make_approximate``, δ = 0) so that OpenDP composes them all: ε's and δ's add up."""
    columns = [str(c) for c in columns]
    validate_queries(queries, columns)
    built = build_all(queries, columns)
    measurements = [b.measurement for b in built]
    approximate = any(_is_approximate(m) for m in measurements)
    if approximate:
        measurements = [m if _is_approximate(m) else dp.c.make_approximate(m) for m in measurements]
    measurement = dp.c.make_composition(measurements)
    loss = measurement.map(D_IN)
    total, total_delta = (float(loss[0]), float(loss[1])) if approximate else (float(loss), 0.0)
    parts = sum(b.plan.privacy_loss for b in built)
    epsilon = requested_epsilon(queries)
    delta = requested_delta(queries)
    # The accountant's total is the sum recorded per query, and never more than is spent.
    if (
        not math.isclose(total, parts, rel_tol=1e-9)
        or total > float(epsilon)
        or total_delta > float(delta)
    ):
        raise EngineError(  # pragma: no cover - a broken invariant, not bad input
            f"OpenDP's privacy loss {total!r} (δ {total_delta!r}) does not match the queries' "
            f"ε {epsilon} (δ {delta})."
        )
    return CompiledRelease(
        queries=tuple(queries),
        columns=tuple(columns),
        plans=tuple(b.plan for b in built),
        measurement=measurement,
        privacy_loss=total,
        privacy_loss_delta=total_delta,
        epsilon=epsilon,
        delta=delta,
        _finishers=tuple(b.finish for b in built),
    )


#: A released cell holding fewer rows than this is counted as small on the officers' page.
SMALL_CELL = 10


def true_counts(
    frame: pd.DataFrame, queries: Sequence[Query], result: ReleaseResult
) -> list[dict[str, Any]]:
    """Per query, the rows behind what it released, counted exactly (plain pandas, no noise).

    For the officers' review only, never released: the smallest non-empty true count behind a
    published cell (and which cell), how many published cells hold fewer than
    :data:`SMALL_CELL` rows, the most one row can change the statistic, and whether the
    error at 95 % is at least that much (the noise hides one row)."""
    out = []
    for number, (query, released) in enumerate(zip(queries, result.results, strict=True), 1):
        cells: dict[str, int] = {}
        effect = 1.0
        if isinstance(query, Histogram):
            keys = pd.Series(joint_keys(query.by, frame)).value_counts()
            if query.from_data:
                published = [SEPARATOR.join(c["cell"]) for c in released.value]
            else:
                published = [SEPARATOR.join(c) for c in query.cells()] + [OUTSIDE]
            for key in published:
                label = OTHER_LABEL if key == OUTSIDE else " × ".join(key.split(SEPARATOR))
                cells[label] = int(keys.get(key, 0))
        elif isinstance(query, _Bounded):
            values = len(numbers_of(frame, query.column))
            cells[""] = values
            if isinstance(query, Sum):
                effect = max(abs(query.lower), abs(query.upper))
            elif isinstance(query, Mean):
                effect = (query.upper - query.lower) / max(values, 1)
        else:
            cells[""] = len(frame)
        occupied = {label: n for label, n in cells.items() if n > 0}
        smallest_label = min(occupied, key=lambda label: occupied[label]) if occupied else ""
        error = released.error
        out.append(
            {
                "query": number,
                "smallest": occupied.get(smallest_label),
                "cell": smallest_label,
                "small_cells": sum(1 for n in occupied.values() if n < SMALL_CELL),
                "one_row_effect": effect,
                "error": error,
                "hides_one_row": error is not None and error >= effect,
            }
        )
    return out


def run_release(frame: pd.DataFrame, queries: Sequence[Query]) -> ReleaseResult:
    """Draw every query's noise once on ``frame`` (cells as strings) and return the results."""
    return compile_release(queries, list(frame.columns)).run(frame)
