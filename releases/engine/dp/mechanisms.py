"""The OpenDP measurement of each kind of query, and the free preview of its accuracy.

Every mechanism and the accounting come from OpenDP; nothing here draws noise. The one step
trusted beyond OpenDP's proofs is :func:`_rowwise`, declared to OpenDP as a user
transformation (its ``honest-but-curious`` feature), whose stability is stated there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import opendp.prelude as dp
import pandas as pd

from ..types import EngineError
from .queries import (
    DATA,
    OTHER_LABEL,
    OUTSIDE,
    SEPARATOR,
    Count,
    Grouping,
    Histogram,
    Mean,
    ObjectArray,
    Quantiles,
    Query,
    Sum,
    _Bounded,
    alpha_label,
    fmt,
    validate_queries,
)

dp.enable_features("contrib", "honest-but-curious")

#: The input space of every measurement: a DataFrame of given columns, one row per person.
Space = tuple[dp.Domain, dp.Metric]

#: The confidence of every reported error.
CONFIDENCE = 0.95
ALPHA = 0.05  # 1 - CONFIDENCE, written out (1 - 0.95 is 0.050000000000000044)

#: The privacy unit: one row, added or removed.
METRIC, D_IN = dp.unit_of(contributions=1)

#: OpenDP's float sum needs a public bound on the number of values it adds; a random subset of
#: this many values is summed beyond it (never reached: uploads are far smaller).
SUM_SIZE_LIMIT = 2**27
#: Each measurement is calibrated to a hair under its ε, so that OpenDP's accountant (which
#: rounds up) never reports more than the ε that was requested and spent.
_SLACK = 1e-9


# --- Building the OpenDP measurements ------------------------------------------------------


@dataclass(frozen=True)
class QueryPlan:
    """What a query will cost and how precise it will be, known before any data is read.

    ``privacy_loss``: OpenDP's privacy map of the query's measurement at one row (a hair under
    ``epsilon``). ``error``: half-width at 95 % (``error_kind`` "absolute", in the statistic's
    unit; "rank", in rows of the sorted column for quantiles); a mean's error depends on the
    number of rows and is None in a preview without ``rows``.
    """

    index: int
    kind: str
    description: str
    mechanism: str
    epsilon: float
    delta: float
    privacy_loss: float
    sensitivity: float
    scale: float
    error: float | None
    error_kind: str
    error_note: str
    query: dict[str, Any]
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class _Built:
    plan: QueryPlan
    measurement: dp.Measurement
    #: raw OpenDP output -> (value, error, detail)
    finish: Callable[[Any], tuple[Any, float | None, dict[str, Any]]]


def _frame_space(columns: Sequence[str]) -> Space:
    names = [str(c) for c in columns]

    def member(frame: Any) -> bool:
        return isinstance(frame, pd.DataFrame) and [str(c) for c in frame.columns] == names

    # The identifier names the columns: two frames with other columns are other domains.
    return dp.user_domain(f"AnonymizerFrame{json.dumps(names)}", member=member), METRIC


def _rowwise(
    space: Space, output_domain: dp.Domain, function: Callable[[pd.DataFrame], list[Any]]
) -> dp.Transformation:
    """A transformation mapping each row of the frame to at most one value, on its own.

    Stability: adding or removing one row adds or removes at most one value, so a distance of
    d rows in gives at most d values out (``d_in -> d_in`` under the symmetric distance).
    """
    return dp.t.make_user_transformation(
        space[0], space[1], output_domain, METRIC, function, lambda d_in: d_in
    )


def text_of(frame: pd.DataFrame, column: str) -> pd.Series:
    cells = frame[column]
    if pd.api.types.infer_dtype(cells, skipna=False) == "string":
        return cells
    return cells.where(cells.notna(), "").astype(str)


def numbers_of(frame: pd.DataFrame, column: str) -> list[float]:
    """The column's finite numbers; empty, non-numeric and infinite cells are left out."""
    numbers = pd.to_numeric(text_of(frame, column).str.strip(), errors="coerce").to_numpy(
        dtype=float
    )
    return numbers[np.isfinite(numbers)].tolist()


def _calibrate(
    make: Callable[[float], dp.Measurement], epsilon: float
) -> tuple[dp.Measurement, float, float]:
    """The measurement with the smallest noise scale whose privacy loss fits ``epsilon``.

    Every mechanism here has a privacy loss of sensitivity / scale, so OpenDP's map at scale 1
    gives the scale directly; OpenDP's map of the result is then checked (and the scale nudged
    up while it rounds above the target), so the loss reported is always OpenDP's own.
    """
    target = epsilon * (1 - _SLACK)
    scale = float(make(1.0).map(D_IN)) / target
    measurement = make(scale)
    while measurement.map(D_IN) > target:
        scale = math.nextafter(scale, math.inf) * (1 + 1e-12)
        measurement = make(scale)
    return measurement, scale, float(measurement.map(D_IN))


def _laplace_accuracy(scale: float, alpha: float = ALPHA) -> float:
    return float(dp.laplacian_scale_to_accuracy(scale, alpha))


def _discrete_accuracy(scale: float, alpha: float = ALPHA) -> float:
    return float(dp.discrete_laplacian_scale_to_accuracy(scale, alpha))


def _plan(query: Query, index: int, **values: Any) -> QueryPlan:
    return QueryPlan(
        index=index,
        kind=query.kind,
        description=query.describe(),
        epsilon=query.epsilon,
        delta=query.delta,
        query=query.to_dict(),
        **values,
    )


def _build_count(query: Count, space: Space, index: int, rows: int | None) -> _Built:
    rows_t = _rowwise(space, dp.vector_domain(dp.atom_domain(T=bool)), lambda f: [True] * len(f))
    count = rows_t >> dp.t.then_count(TO="i64")

    def make(scale: float) -> dp.Measurement:
        return count >> dp.m.then_laplace(scale=scale)

    measurement, scale, loss = _calibrate(make, query.epsilon)
    error = _discrete_accuracy(scale)
    plan = _plan(
        query,
        index,
        mechanism="discrete Laplace",
        privacy_loss=loss,
        sensitivity=float(count.map(D_IN)),
        scale=scale,
        error=error,
        error_kind="absolute",
        error_note="rows, at 95 %",
    )
    return _Built(plan, measurement, lambda raw: (int(raw), error, {}))


def joint_keys(groupings: Sequence[Grouping], frame: pd.DataFrame) -> ObjectArray:
    """Each row's cell key (its groupings' labels joined), or :data:`OUTSIDE` when a grouping
    has no cell for it."""
    labels = [g.label_cells(text_of(frame, g.column)) for g in groupings]
    keyed = labels[0].astype(object)
    outside = labels[0] == OUTSIDE
    for more in labels[1:]:
        keyed = keyed + SEPARATOR + more
        outside |= more == OUTSIDE
    return np.where(outside, OUTSIDE, keyed)


def _threshold_for(make: Callable[[int], dp.Measurement], delta: float) -> int:
    """The smallest threshold whose δ (OpenDP's privacy map) fits ``delta``."""
    target = delta * (1 - _SLACK)

    def fits(threshold: int) -> bool:
        return float(make(threshold).map(D_IN)[1]) <= target

    low, high = 1, 2
    while not fits(high):
        low, high = high, high * 2
        if high > 2**40:  # pragma: no cover - δ is bounded below by validation
            raise EngineError("No threshold keeps δ this small.")
    while low < high:  # smallest passing threshold in (low, high]
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return high


def _build_private_keys(query: Histogram, space: Space, index: int, rows: int | None) -> _Built:
    """A histogram whose labels are found in the data: OpenDP's private key release.

    Every row maps to its cell (a stability-1 row map), the cells present are counted
    (``make_count_by``: one row changes one count by one), and ``make_laplace_threshold``
    adds discrete Laplace noise to each count and publishes only the cells whose noisy count
    reaches the threshold. The noise's scale gives ε; the threshold is the smallest that keeps
    δ, the chance that a cell held by one row is published, within the query's δ."""
    groupings = query.by

    def cell_keys(frame: pd.DataFrame) -> list[str]:
        keys = joint_keys(groupings, frame)
        return keys[keys != OUTSIDE].tolist()

    labelled = _rowwise(space, dp.vector_domain(dp.atom_domain(T=str)), cell_keys)
    counts = labelled >> dp.t.then_count_by(TV="i64")

    def make(scale: float, threshold: int = 2**40) -> dp.Measurement:
        return counts >> dp.m.then_laplace_threshold(scale=scale, threshold=threshold)

    def epsilon_of(measurement: dp.Measurement) -> float:
        return float(measurement.map(D_IN)[0])

    target = query.epsilon * (1 - _SLACK)
    scale = epsilon_of(make(1.0)) / target
    while epsilon_of(make(scale)) > target:
        scale = math.nextafter(scale, math.inf) * (1 + 1e-12)
    threshold = _threshold_for(lambda t: make(scale, t), query.delta)
    measurement = make(scale, threshold)
    loss_epsilon, loss_delta = (float(x) for x in measurement.map(D_IN))
    error = _discrete_accuracy(scale)
    plan = _plan(
        query,
        index,
        mechanism="discrete Laplace with a threshold (private key release)",
        privacy_loss=loss_epsilon,
        sensitivity=1.0,
        scale=scale,
        error=error,
        error_kind="absolute",
        error_note=(
            f"rows in each published cell, at 95 %; a cell is published only when its noisy "
            f"count reaches {threshold}"
        ),
        detail={"threshold": threshold, "privacy_loss_delta": loss_delta, "label_source": DATA},
    )

    def finish(raw: Mapping[str, int]) -> tuple[Any, float, dict[str, Any]]:
        value = [{"cell": key.split(SEPARATOR), "count": int(n)} for key, n in sorted(raw.items())]
        return value, error, {"published_cells": len(value)}

    return _Built(plan, measurement, finish)


def _build_histogram(query: Histogram, space: Space, index: int, rows: int | None) -> _Built:
    if query.from_data:
        return _build_private_keys(query, space, index, rows)
    cells = query.cells()
    keys = [SEPARATOR.join(cell) for cell in cells]
    groupings = query.by

    def cell_keys(frame: pd.DataFrame) -> list[str]:
        # A row outside any grouping's declared values goes to the "other" cell.
        return joint_keys(groupings, frame).tolist()

    labelled = _rowwise(space, dp.vector_domain(dp.atom_domain(T=str)), cell_keys)
    counts = labelled >> dp.t.then_count_by_categories(
        categories=keys, null_category=True, TOA="i64"
    )

    def make(scale: float) -> dp.Measurement:
        return counts >> dp.m.then_laplace(scale=scale)

    measurement, scale, loss = _calibrate(make, query.epsilon)
    error = _discrete_accuracy(scale)
    plan = _plan(
        query,
        index,
        mechanism="discrete Laplace",
        privacy_loss=loss,
        sensitivity=float(counts.map(D_IN)),
        scale=scale,
        error=error,
        error_kind="absolute",
        error_note="rows in each cell, at 95 %",
        detail={"cells": len(cells) + 1},
    )

    def finish(raw: list[int]) -> tuple[Any, float, dict[str, Any]]:
        value = [{"cell": list(cell), "count": int(n)} for cell, n in zip(cells, raw, strict=False)]
        value.append({"cell": [OTHER_LABEL], "count": int(raw[-1]), "other": True})
        return value, error, {}

    return _Built(plan, measurement, finish)


def _numeric(space: Space, query: _Bounded) -> dp.Transformation:
    column = query.column
    values = _rowwise(
        space, dp.vector_domain(dp.atom_domain(T=float, nan=False)), lambda f: numbers_of(f, column)
    )
    return values >> dp.t.then_clamp(bounds=(query.lower, query.upper))


def _sum_chain(space: Space, query: _Bounded) -> dp.Transformation:
    return _numeric(space, query) >> dp.t.make_bounded_float_checked_sum(
        size_limit=SUM_SIZE_LIMIT, bounds=(query.lower, query.upper)
    )


def _build_sum(query: Sum, space: Space, index: int, rows: int | None) -> _Built:
    total = _sum_chain(space, query)

    def make(scale: float) -> dp.Measurement:
        return total >> dp.m.then_laplace(scale=scale)

    measurement, scale, loss = _calibrate(make, query.epsilon)
    error = _laplace_accuracy(scale)
    plan = _plan(
        query,
        index,
        mechanism="Laplace",
        privacy_loss=loss,
        sensitivity=float(total.map(D_IN)),
        scale=scale,
        error=error,
        error_kind="absolute",
        error_note=f"in units of {query.column}, at 95 %",
        detail={"lower": query.lower, "upper": query.upper},
    )
    return _Built(plan, measurement, lambda raw: (float(raw), error, {}))


def _mean_error(sum_scale: float, count_scale: float, bound: float, count: float) -> float:
    """Half-width at 95 % of ``noisy sum / noisy count`` around the clamped values' mean m.

    With S~ = S + e_s and n~ = n + e_c: S~/n~ - m = (e_s - m e_c) / n~, and |m| <= bound. Each of
    |e_s| <= a_s and |e_c| <= a_c fails with probability 2.5 %, so both hold with 95 %.
    """
    a_sum = _laplace_accuracy(sum_scale, ALPHA / 2)
    a_count = _discrete_accuracy(count_scale, ALPHA / 2)
    return (a_sum + bound * a_count) / max(count, 1.0)


def _build_mean(query: Mean, space: Space, index: int, rows: int | None) -> _Built:
    half = query.epsilon / 2
    total = _sum_chain(space, query)
    count = _numeric(space, query) >> dp.t.then_count(TO="i64")
    m_sum, sum_scale, sum_loss = _calibrate(lambda s: total >> dp.m.then_laplace(scale=s), half)
    m_count, count_scale, count_loss = _calibrate(
        lambda s: count >> dp.m.then_laplace(scale=s), half
    )
    measurement = dp.c.make_composition([m_sum, m_count])
    bound = max(abs(query.lower), abs(query.upper))
    plan = _plan(
        query,
        index,
        mechanism="Laplace sum / discrete Laplace count",
        privacy_loss=float(measurement.map(D_IN)),
        sensitivity=float(total.map(D_IN)),
        scale=sum_scale,
        error=_mean_error(sum_scale, count_scale, bound, rows) if rows else None,
        error_kind="absolute",
        error_note=f"in units of {query.column}, at 95 %, at the noisy count",
        detail={
            "lower": query.lower,
            "upper": query.upper,
            "sum_scale": sum_scale,
            "count_scale": count_scale,
            "sum_error": _laplace_accuracy(sum_scale),
            "count_error": _discrete_accuracy(count_scale),
            "sum_privacy_loss": sum_loss,
            "count_privacy_loss": count_loss,
        },
    )

    def finish(raw: list[Any]) -> tuple[Any, float | None, dict[str, Any]]:
        noisy_sum, noisy_count = float(raw[0]), int(raw[1])
        detail = {"noisy_sum": noisy_sum, "noisy_count": noisy_count}
        if noisy_count < 1:
            # Too few values for a mean; nothing more is learnt from saying so.
            return None, None, detail
        value = min(max(noisy_sum / noisy_count, query.lower), query.upper)
        return value, _mean_error(sum_scale, count_scale, bound, noisy_count), detail

    return _Built(plan, measurement, finish)


def _build_quantiles(query: Quantiles, space: Space, index: int, rows: int | None) -> _Built:
    share = query.epsilon / len(query.alphas)
    candidates = query.candidates()
    values = _numeric(space, query)
    parts = []
    measurements = []
    for alpha in query.alphas:

        def make(scale: float, alpha: float = alpha) -> dp.Measurement:
            return values >> dp.m.then_private_quantile(
                dp.max_divergence(), candidates=candidates, alpha=alpha, scale=scale
            )

        measurement, scale, loss = _calibrate(make, share)
        measurements.append(measurement)
        # Report noisy max with Gumbel(scale) noise on scores counted in rows: a candidate
        # whose score is t worse than the best wins with probability at most exp(-t/scale),
        # so with 95 % the winner is within scale * ln(|C| / 0.05) rows of the best.
        rank_error = scale * math.log(len(candidates) / ALPHA)
        parts.append(
            {
                "alpha": alpha,
                "scale": scale,
                "privacy_loss": loss,
                "error": rank_error,
                "sensitivity": loss * scale,
            }
        )
    measurement = dp.c.make_composition(measurements)
    error = max(p["error"] for p in parts)
    plan = _plan(
        query,
        index,
        mechanism="exponential mechanism (report noisy max, Gumbel)",
        privacy_loss=float(measurement.map(D_IN)),
        sensitivity=max(p["sensitivity"] for p in parts),
        scale=max(p["scale"] for p in parts),
        error=error,
        error_kind="rank",
        error_note="rows of the sorted column, at 95 % "
        f"(candidates every {fmt((query.upper - query.lower) / query.steps)})",
        detail={"quantiles": parts, "step": (query.upper - query.lower) / query.steps},
    )

    def finish(raw: list[Any]) -> tuple[Any, float, dict[str, Any]]:
        value = [
            {
                "alpha": p["alpha"],
                "label": alpha_label(p["alpha"]),
                "value": float(v),
                "error": p["error"],
            }
            for p, v in zip(parts, raw, strict=False)
        ]
        return value, error, {}

    return _Built(plan, measurement, finish)


BUILDERS: dict[str, Callable[..., _Built]] = {
    "count": _build_count,
    "histogram": _build_histogram,
    "sum": _build_sum,
    "mean": _build_mean,
    "quantiles": _build_quantiles,
}


def build_all(
    queries: Sequence[Query], columns: Sequence[str], rows: int | None = None
) -> list[_Built]:
    space = _frame_space(columns)
    try:
        return [BUILDERS[q.kind](q, space, i, rows) for i, q in enumerate(queries)]
    except dp.OpenDPException as exc:  # pragma: no cover - validation should catch it first
        raise EngineError(f"OpenDP refused a query: {exc}") from None


def preview(queries: Sequence[Query], rows: int | None = None) -> list[QueryPlan]:
    """Each query's mechanism, ε and expected error at 95 %, without touching any data.

    ``rows``: the number of rows, known to the steward, used only for a mean's error (which
    depends on it); never for noise. Spends nothing.
    """
    validate_queries(queries)
    columns = sorted({c for q in queries for c in q.columns})
    return [b.plan for b in build_all(queries, columns, rows)]
