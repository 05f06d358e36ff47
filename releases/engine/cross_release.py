"""Releases judged together: the joint partition of a new extract with an earlier extract of
the same rows (Sweeney's complementary-release and temporal attacks).

**The assumption**: rows can be linked across the two extracts (the same person is the same
source row in both, and a recipient of both can tell which rows belong together, through
columns released unchanged in both, quasi-identifiers both release, or the sensitive values
themselves). Under it, a row's *joint class* is its class in the new extract paired with its
class in the earlier one; rows the earlier extract left out (suppressed, or not in its input)
are paired with "not in it", so those of one new class form one joint class. Rows the new
extract suppresses are not in it and in no joint class.

Each extract is described by its *membership*: per source row of the input, the number of its
equivalence class in the extract, or :data:`NOT_IN` (-1). :func:`release_membership`
re-applies a release to its input; :func:`extract_membership` reads it off a released table;
:func:`cross_release_check` builds the joint partition with integer group-bys and measures it
(the smallest joint class, the rows in joint classes smaller than k, and with sensitive
attributes the l-diversity and t-closeness of the joint classes, by the privacy models' own
code); :func:`linking_evidence` lists what makes linking possible.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .api import anonymize, encode, judge_levels
from .arrays import IntArray
from .criteria import (
    Classes,
    DataContext,
    EarlierReleases,
    LDiversity,
    PrivacyModel,
    TCloseness,
)
from .criteria.base import EPS
from .errors import EngineError
from .hierarchy import Hierarchy
from .privacy import SensitiveCounts
from .types import AnonymizationConfig

__all__ = [
    "ASSUMPTION",
    "NOT_IN",
    "Constraint",
    "CrossReleaseCheck",
    "LinkingEvidence",
    "ReleasedColumns",
    "cross_release_check",
    "extract_membership",
    "joint_class_sizes",
    "joint_partition",
    "linking_evidence",
    "release_membership",
    "align_by_key",
    "sensitive_context",
    "what_constrained",
]

#: The membership of a source row that is not in an extract.
NOT_IN = -1

#: The assumption every cross-release figure rests on, in words for the person who reads it.
ASSUMPTION = (
    "Rows can be linked across the two extracts: whoever holds both can tell which released "
    "rows are the same person (through columns both release unchanged, quasi-identifiers both "
    "release, or the sensitive values). Each person is then known by the pair of their "
    "classes, their joint class; rows one extract left out form a joint class with the other "
    "rows of their class that it left out."
)


#: How releases of other versions of a dataset (a later file of the same source) are judged.
VERSIONS_LINKED = (
    "Releases of earlier versions of this dataset are judged as releases of the same source: "
    "their rows are linked to this version's by the key column {key} (a row is the earlier "
    "row with the same key; a key absent from the earlier version is not in that release)."
)
VERSIONS_UNLINKED = (
    "Releases of other versions of this dataset are not linked to this one: the dataset has "
    "no key column saying which rows of two versions are the same person."
)


# --------------------------------------------------------------------------- memberships


def align_by_key(
    membership: IntArray, earlier_keys: Sequence[str], new_keys: Sequence[str]
) -> IntArray:
    """An earlier version's membership carried onto a new version's rows by their key: per new
    row, the class of the earlier row with the same key, or :data:`NOT_IN` when the earlier
    version has no such key. Keys must be unique in each version (``EngineError``)."""
    earlier = pd.Index(pd.Series(list(earlier_keys), dtype=object))
    new = pd.Series(list(new_keys), dtype=object)
    if len(earlier) != len(membership):
        raise EngineError(
            f"The earlier membership describes {len(membership):,} rows and its version has "
            f"{len(earlier):,}."
        )
    for name, keys in (("earlier", earlier), ("new", pd.Index(new))):
        if not keys.is_unique:
            raise EngineError(f"The key column's values repeat in the {name} version.")
    positions = earlier.get_indexer(pd.Index(new))
    aligned = np.full(len(new), NOT_IN, dtype=np.int64)
    found = positions >= 0
    aligned[found] = np.asarray(membership, dtype=np.int64)[positions[found]]
    return aligned


def _dense(classes: IntArray) -> IntArray:
    """Class numbers renumbered 0.. in order of appearance, -1 kept."""
    out = np.full(len(classes), NOT_IN, dtype=np.int64)
    inside = classes >= 0
    codes, _ = pd.factorize(classes[inside], sort=False)
    out[inside] = codes
    return out


def extract_membership(
    extract: pd.DataFrame, source_rows: Sequence[int] | IntArray, rows: int, columns: Sequence[str]
) -> IntArray:
    """Each input row's class in a released table: rows of ``extract`` are grouped by their
    released ``columns`` (the quasi-identifiers); ``source_rows[i]`` is the input row of the
    extract's row ``i`` (in any order); the other input rows are :data:`NOT_IN`."""
    source = np.asarray(source_rows, dtype=np.int64)
    if len(source) != len(extract):
        raise EngineError("The extract and its source rows differ in length.")
    out = np.full(rows, NOT_IN, dtype=np.int64)
    if len(extract) == 0:
        return out
    # One integer per row from the columns' codes (mixed radix, compacted before it could
    # overflow): faster than a group-by on the columns themselves.
    key = np.zeros(len(extract), dtype=np.int64)
    space = 1
    for name in columns:
        column = extract[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            codes = column.cat.codes.to_numpy().astype(np.int64) + 1  # a missing cell is 0
            card = len(column.cat.categories) + 1
        else:
            factorized, uniques = pd.factorize(column, use_na_sentinel=False)
            codes, card = factorized.astype(np.int64), max(len(uniques), 1)
        if space * card >= 1 << 62:
            compact, _ = pd.factorize(key, sort=False)
            key, space = compact.astype(np.int64), int(compact.max()) + 1
        key = key * card + codes
        space *= card
    group, _ = pd.factorize(key, sort=False)
    out[source] = group.astype(np.int64)
    return out


def release_membership(data: pd.DataFrame, config: AnonymizationConfig) -> IntArray:
    """Each input row's class in the release ``config`` makes of ``data`` (:data:`NOT_IN` for
    a suppressed row). With every level given (a full-domain release re-applied), the levels
    are applied without searching; Mondrian is run again (it is deterministic)."""
    qis = list(config.quasi_identifiers)
    levels = config.levels or {}
    if config.algorithm == "optimal" and all(q in levels for q in qis):
        enc, context = encode(data, config)
        _, base_to_class, judged = judge_levels(
            enc, config.model, context, tuple(int(levels[q]) for q in qis)
        )
        row_class = base_to_class[enc.row_class]
        out = judged.fails[row_class]
        if config.research_subset is not None:
            out = out | ~config.research_subset.rows  # only the subset's rows are released
        return _dense(np.where(out, NOT_IN, row_class))
    result = anonymize(data, config)
    if result.source_rows is None:
        raise EngineError("The release does not say which input rows it holds.")
    return extract_membership(result.data, result.source_rows, len(data), qis)


def sensitive_context(
    data: pd.DataFrame,
    sensitive: Sequence[str],
    hierarchies: Mapping[str, Hierarchy] | None = None,
) -> DataContext:
    """What the privacy models know of the sensitive attributes of ``data`` (each input row's
    value code), to measure the joint classes with them."""
    codes: dict[str, IntArray] = {}
    labels: dict[str, list[str]] = {}
    for name in sensitive:
        column = data[name]
        if not isinstance(column.dtype, pd.CategoricalDtype):
            column = column.where(column.notna(), "")
        values, uniques = pd.factorize(column, sort=False, use_na_sentinel=False)
        codes[name] = values.astype(np.int64)
        labels[name] = [str(u) for u in uniques]
    return DataContext(len(data), codes, labels, dict(hierarchies or {}))


# --------------------------------------------------------------------------- the joint partition


def _joint_keys(new: IntArray, earlier: IntArray) -> tuple[IntArray, IntArray]:
    """The input rows in the new extract and one integer per row naming its joint class."""
    new = np.asarray(new, dtype=np.int64)
    earlier = np.asarray(earlier, dtype=np.int64)
    if new.shape != earlier.shape:
        raise EngineError(
            f"The two extracts describe {len(new):,} and {len(earlier):,} input rows: they "
            "are not of the same rows."
        )
    rows = np.flatnonzero(new >= 0).astype(np.int64)
    theirs = earlier[rows]
    # "Not in it" is one more class of the earlier extract.
    absent = int(theirs.max()) + 1 if len(theirs) else 0
    theirs = np.where(theirs < 0, absent, theirs)
    return rows, new[rows] * (absent + 1) + theirs  # < 2**63 for any extract in memory


def joint_partition(new: IntArray, earlier: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The joint classes of the rows in the new extract.

    Returns ``(rows, joint, sizes)``: the input rows in the new extract, each one's joint class
    (numbered 0..), and the size of every joint class."""
    rows, key = _joint_keys(new, earlier)
    joint, _ = pd.factorize(key, sort=False)
    joint = joint.astype(np.int64)
    return rows, joint, np.bincount(joint).astype(np.int64)


def joint_class_sizes(new: IntArray, earlier: IntArray) -> IntArray:
    """The size of every joint class (in no particular order): a sort of the rows' joint
    keys, several times faster than numbering the classes."""
    _, key = _joint_keys(new, earlier)
    if len(key) == 0:
        return np.zeros(0, dtype=np.int64)
    key.sort()
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    sizes: IntArray = np.diff(np.r_[starts, len(key)]).astype(np.int64)
    return sizes


@dataclass(frozen=True)
class CrossReleaseCheck:
    """The joint partition of the new extract with one earlier extract, measured.

    ``rows``: rows of the new extract; ``joint_classes``: how many joint classes they form;
    ``smallest_joint_class``; ``rows_below_k``: rows whose joint class holds fewer than
    ``k``; ``classes_new``: classes of the new extract (without the earlier one, the joint
    classes would be these). With sensitive attributes: per attribute, the smallest distinct l
    (``l``), the smallest entropy l (``entropy_l``, when asked) and the largest t (``t``, with
    ``t_distance``, when asked) over the joint classes.

    ``passed``: no joint class below k and, when ``l_required`` / ``t_required`` are given,
    every joint class at least that l (entropy l when measured, else distinct l) and at most
    that t."""

    rows: int
    classes_new: int
    joint_classes: int
    smallest_joint_class: int
    rows_below_k: int
    k: int
    l: dict[str, float] = field(default_factory=dict)  # noqa: E741
    entropy_l: dict[str, float] = field(default_factory=dict)
    t: dict[str, float] = field(default_factory=dict)
    t_distance: str | None = None
    l_required: float | None = None
    t_required: float | None = None

    @property
    def passed(self) -> bool:
        if self.rows_below_k:
            return False
        ells = self.entropy_l or self.l
        if self.l_required is not None and any(v + EPS < self.l_required for v in ells.values()):
            return False
        return self.t_required is None or all(v <= self.t_required + EPS for v in self.t.values())

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "smallest_joint_class": self.smallest_joint_class,
            "rows_below_k": self.rows_below_k,
            "joint_classes": self.joint_classes,
            "k": self.k,
            "rows": self.rows,
            "classes_new": self.classes_new,
            "passed": self.passed,
        }
        if self.l:
            out["l"] = dict(self.l)
        if self.entropy_l:
            out["entropy_l"] = dict(self.entropy_l)
        if self.t:
            out["t"] = dict(self.t)
            out["t_distance"] = self.t_distance
        if self.l_required is not None:
            out["l_required"] = self.l_required
        if self.t_required is not None:
            out["t_required"] = self.t_required
        return out


def cross_release_check(
    new: IntArray,
    earlier: IntArray,
    k: int,
    sensitive: DataContext | None = None,
    entropy: bool = False,
    t_distance: str | None = None,
    l_required: float | None = None,
    t_required: float | None = None,
) -> CrossReleaseCheck:
    """Measure the joint partition of ``new`` with ``earlier`` (memberships of the same input
    rows, :data:`NOT_IN` for a row not in the extract).

    ``sensitive``: the sensitive attributes' codes of every input row
    (:func:`sensitive_context`); with it the distinct l of the joint classes is measured, their
    entropy l when ``entropy``, and their t-closeness with ``t_distance`` ("equal", "ordered"
    or "hierarchical"; t is measured against each attribute's distribution in the whole
    input, as the release's own t-closeness is). ``l_required`` and ``t_required``: the l and
    t the release asks for, which the joint classes must reach to pass."""
    if k < 1:
        raise EngineError(f"k must be at least 1, not {k}.")
    measured = sensitive is not None and bool(sensitive.sensitive)
    if measured:
        rows, joint, sizes = joint_partition(new, earlier)
    else:
        sizes = joint_class_sizes(new, earlier)
    inside = np.asarray(new)[np.asarray(new) >= 0]
    classes_new = int(np.count_nonzero(np.bincount(inside))) if len(inside) else 0
    figures: dict[str, Any] = {}
    if sensitive is not None and measured and len(sizes):
        counts = {
            name: SensitiveCounts.from_codes(
                joint,
                codes[rows],
                n_groups=len(sizes),
                n_values=len(sensitive.labels.get(name, ())) or None,
            )
            for name, codes in sensitive.codes.items()
        }
        classes = Classes(sizes, counts)
        distinct = LDiversity(l=1, variant="distinct").achieved(classes, sensitive)
        figures["l"] = dict(distinct["l"])
        if entropy:
            figures["entropy_l"] = dict(
                LDiversity(l=1, variant="entropy").achieved(classes, sensitive)["l"]
            )
        if t_distance is not None:
            figures["t"] = dict(
                TCloseness(t=1, distance=t_distance).achieved(classes, sensitive)["t"]
            )
            figures["t_distance"] = t_distance
    return CrossReleaseCheck(
        rows=int(len(inside)),
        classes_new=classes_new,
        joint_classes=int(len(sizes)),
        smallest_joint_class=int(sizes.min()) if len(sizes) else 0,
        rows_below_k=int(sizes[sizes < k].sum()),
        k=int(k),
        l_required=None if l_required is None or "l" not in figures else float(l_required),
        t_required=None if t_required is None or "t" not in figures else float(t_required),
        **figures,
    )


# --------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class ReleasedColumns:
    """What an extract releases: its columns, its quasi-identifiers with their levels (None:
    generalized locally, per class) and its sensitive attributes. Other columns are released
    unchanged."""

    columns: tuple[str, ...]
    quasi_identifiers: Mapping[str, int | None]
    sensitive: tuple[str, ...] = ()

    def unchanged(self) -> set[str]:
        """Columns whose released values are the original ones (a quasi-identifier at level 0
        too)."""
        return {c for c in self.columns if self.quasi_identifiers.get(c, 0) == 0}


@dataclass(frozen=True)
class LinkingEvidence:
    """What makes linking the two extracts possible, column by column (in the new extract's
    order): columns both release unchanged, quasi-identifiers of either that both release (an
    unchanged value is generalized as easily as the recipient of both likes), sensitive
    attributes both release."""

    unchanged: list[str]
    quasi_identifiers: list[str]
    sensitive: list[str]

    @property
    def any(self) -> bool:
        return bool(self.unchanged or self.quasi_identifiers or self.sensitive)

    def as_dict(self) -> dict[str, Any]:
        return {
            "unchanged": list(self.unchanged),
            "quasi_identifiers": list(self.quasi_identifiers),
            "sensitive": list(self.sensitive),
        }


def linking_evidence(new: ReleasedColumns, earlier: ReleasedColumns) -> LinkingEvidence:
    """The shared columns that let a recipient of both extracts link their rows."""
    shared = [c for c in new.columns if c in set(earlier.columns)]
    both_unchanged = new.unchanged() & earlier.unchanged()
    return LinkingEvidence(
        unchanged=[c for c in shared if c in both_unchanged],
        quasi_identifiers=[
            c for c in shared if c in new.quasi_identifiers or c in earlier.quasi_identifiers
        ],
        sensitive=[c for c in shared if c in set(new.sensitive) and c in set(earlier.sensitive)],
    )


# --------------------------------------------------------------------------- what protection cost


@dataclass(frozen=True)
class Constraint:
    """What protecting the earlier releases changed: the levels the search chooses without
    protecting them (None for local recoding) and the earlier releases that release would
    not be safe with (its joint classes with them smaller than k)."""

    unprotected_levels: dict[str, int] | None
    constrained_by: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "unprotected_levels": self.unprotected_levels,
            "constrained_by": list(self.constrained_by),
        }


def what_constrained(data: pd.DataFrame, config: AnonymizationConfig) -> Constraint:
    """Which earlier releases constrained a protected search: the release ``config`` makes
    without :class:`.criteria.EarlierReleases` (one more search), judged with each earlier
    release (``config.earlier_releases``) at the k the protection asked for."""
    model = config.model
    protections = [c for c in model.criteria if isinstance(c, EarlierReleases)]
    if not protections:
        raise EngineError("The configuration protects no earlier release.")
    k = max(c.k for c in protections)
    plain = PrivacyModel(
        criteria=[c for c in model.criteria if not isinstance(c, EarlierReleases)],
        suppression_limit=model.suppression_limit,
        population=model.population,
    )
    result = anonymize(data, dataclasses.replace(config, model=plain, earlier_releases={}))
    if result.source_rows is None:
        raise EngineError("The release does not say which input rows it holds.")
    new = extract_membership(
        result.data, result.source_rows, len(data), list(config.quasi_identifiers)
    )
    constrained = [
        name
        for name, earlier in config.earlier_releases.items()
        if cross_release_check(new, earlier, k).rows_below_k > 0
    ]
    levels = dict(result.levels) if result.levels is not None else None
    return Constraint(levels, constrained)
