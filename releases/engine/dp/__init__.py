"""Differentially private statistics with OpenDP: query specs, a free accuracy preview, the run.

A statistics release is a list of queries on one dataset (counts, histograms by one or two
columns, sums, means and quantiles of a numeric column), each with its own ε. Every mechanism
and the accounting come from OpenDP (https://opendp.org); nothing here draws noise itself.

Privacy unit: one row, added or removed (unbounded DP, ``dp.unit_of(contributions=1)``); the
number of rows is not public and is never used to calibrate noise. Every mechanism is pure
ε-DP (δ = 0) except the private key release of labels from the data, which is (ε, δ)-DP. The
queries of a release compose by OpenDP's basic sequential composition (``make_composition``):
the release's privacy loss is the sum of its queries' ε (and of their δ), and the dataset's
budget is spent by those sums.

Queries:

* :class:`Count`: rows in the dataset. Discrete Laplace noise (sensitivity 1).
* :class:`Histogram`: rows per cell of one or two :class:`Grouping` s (declared categories,
  or numeric bins from declared edges). Only declared cells are released, plus one "other"
  cell counting rows whose value is outside the declared categories or bins, empty, or not a
  number: nothing reveals which other values exist. Discrete Laplace noise on every cell
  (L1 sensitivity 1: one row changes one cell by one). A cell's label is published as it is,
  so every declared label must be public knowledge; each grouping says where its labels come
  from (:data:`LABEL_SOURCES`): typed by the steward, a level of the column's hierarchy, or
  the column's declared values. Labels taken from the data itself are released only through
  OpenDP's private key release (``make_laplace_threshold``): the cells of the values present
  are counted with noise and a cell is published only when its noisy count passes a
  threshold, so a label held by few rows appears with probability at most δ. That query is
  (ε, δ)-DP; the others of its release are made approximate-DP (δ = 0) to compose with it.
* :class:`Sum`: sum of a numeric column, each value clamped by OpenDP to the steward's bounds
  (never taken from the data). Laplace noise.
* :class:`Mean`: OpenDP's approach when the number of rows is unknown: a noisy sum and a noisy
  count, each with half of ε, and their ratio (clamped to the bounds, post-processing).
* :class:`Quantiles`: each chosen quantile by OpenDP's exponential mechanism (report noisy max
  with Gumbel noise) over an even grid of candidates between the bounds, ε shared evenly.

Numeric cells are read as plain decimal numbers (``pd.to_numeric``); a cell that is empty,
not a number, or infinite is left out of sums, means and quantiles (and of a mean's count),
and counts in a histogram's "other" cell. Dropping rows is row-by-row, so it keeps the
privacy unit.

Expected errors, at 95 %, are computed before any data is touched (the free preview), from
OpenDP's accuracy utilities: for a count or a histogram cell the discrete Laplace accuracy,
for a sum the Laplace accuracy. A mean's error combines its sum's and count's (each at
97.5 %, so both hold together with 95 %) at the noisy count. A quantile's error is a rank
error: OpenDP has no accuracy utility for the exponential mechanism, so it is the Gumbel
noisy-max bound ``scale * ln(candidates / 0.05)``, in rows of the sorted column.

OpenDP's feature flags ``contrib`` and ``honest-but-curious`` are enabled on import; the
latter only for ``mechanisms._rowwise``, which picks each query's values from the DataFrame
row by row (its stability, one row in gives at most one value out, is stated there).

The package: :mod:`.queries` (what is asked, validated; the registry of query kinds),
:mod:`.mechanisms` (OpenDP's measurement per kind, and the free preview), :mod:`.run`
(composition, the noise drawn once, the results, the exact counts for officers).
"""

from __future__ import annotations

from .mechanisms import CONFIDENCE, QueryPlan, preview
from .queries import (
    DATA,
    DOMAIN,
    FORM_PARTS,
    HIERARCHY,
    LABEL_SOURCES,
    MAX_CATEGORIES,
    MAX_DELTA,
    MAX_EPSILON,
    MAX_QUERIES,
    OTHER_LABEL,
    QUERY_TYPES,
    TYPED,
    Count,
    Grouping,
    Histogram,
    Mean,
    Quantiles,
    Query,
    Sum,
    describe_grouping,
    kinds_using,
    queries_from_list,
    query_from_dict,
    requested_delta,
    requested_epsilon,
    validate_queries,
)
from .run import (
    SMALL_CELL,
    CompiledRelease,
    QueryResult,
    ReleaseResult,
    canonical_json,
    compile_release,
    run_release,
    true_counts,
)

__all__ = [
    "CONFIDENCE",
    "DATA",
    "FORM_PARTS",
    "DOMAIN",
    "HIERARCHY",
    "LABEL_SOURCES",
    "MAX_CATEGORIES",
    "MAX_DELTA",
    "MAX_EPSILON",
    "MAX_QUERIES",
    "OTHER_LABEL",
    "QUERY_TYPES",
    "SMALL_CELL",
    "TYPED",
    "CompiledRelease",
    "Count",
    "Grouping",
    "Histogram",
    "Mean",
    "Quantiles",
    "Query",
    "QueryPlan",
    "QueryResult",
    "ReleaseResult",
    "Sum",
    "canonical_json",
    "compile_release",
    "describe_grouping",
    "kinds_using",
    "preview",
    "queries_from_list",
    "query_from_dict",
    "requested_delta",
    "requested_epsilon",
    "run_release",
    "true_counts",
    "validate_queries",
]
