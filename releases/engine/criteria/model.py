"""The whole privacy model of a release (:class:`PrivacyModel`): its criteria in any combination,
the suppression limit and the population; how a candidate release is judged
(:meth:`PrivacyModel.evaluate`) and the review's check lines read back from a stored summary
(:func:`checks`).

Per-class criteria mark the classes that fail. Dataset criteria (average risk, population
uniqueness) are then enforced as ARX's ``RiskBasedCriterion.enforce``: the remaining classes
are ordered smallest first (ties: lower information loss, then earlier first row) and the
shortest prefix whose suppression fulfils the criterion is found by ARX's binary search
(``HashGroupifyDistribution.suppressWhileNotFulfilledBinary``). Classes whose every
quasi-identifier is ``*`` take no part (ARX counts them as suppressed for risk, but not
against the suppression limit). A transformation is valid when all suppressed rows number at
most the suppression limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ..arrays import BoolArray, FloatArray, IntArray
from ..errors import EngineError
from ..privacy import distinct_l, entropy_l, t_distance
from ..risk import PopulationModel
from .base import Check, Classes, Criterion, DataContext, ParamSpec, per_attribute
from .highest_risk import HighestRisk
from .k_anonymity import KAnonymity
from .l_diversity import LDiversity
from .registry import REGISTRY, criterion_from_spec
from .t_closeness import TCloseness

__all__ = ["POPULATION_PARAMS", "Evaluation", "PrivacyModel", "checks"]

#: The population model's fields (for the form and the command line).
POPULATION_PARAMS = (
    ParamSpec(
        "population_size",
        "int",
        "population size",
        "How many people the data were drawn from (for population uniqueness and the "
        "journalist and marketer risk).",
        minimum=1,
        required=False,
        flag="--population-size",
        metavar="N",
    ),
    ParamSpec(
        "sampling_fraction",
        "float",
        "sampling fraction",
        "The data's share of that population (instead of its size), e.g. 0.01 for 1 in 100.",
        minimum=0,
        maximum=1,
        minimum_exclusive=True,
        required=False,
        flag="--sampling-fraction",
        metavar="F",
    ),
)


@dataclass
class Evaluation:
    """A candidate release judged: the classes to suppress, the rows they hold, and whether
    that is within the suppression limit."""

    fails: BoolArray
    suppressed: int
    valid: bool


def _half(total: int) -> int:
    return int(total / 2)  # Java's integer division: toward zero


def _suppression_prefix(
    fulfilled: Callable[[int], bool],
    start: int,
    m: int,
    suppressed_at: Callable[[int], int],
    limit: int | None,
) -> tuple[int, bool]:
    """ARX's ``suppressWhileNotFulfilledBinary`` over the ordered suppressible classes: the
    number of them (from ``start``) to suppress, and whether the search gave up because the
    suppressed rows exceeded ``limit``."""
    if m <= start or fulfilled(start):
        return start, False

    def state(prefix: int) -> bool | None:
        ok = fulfilled(prefix)
        if not ok and limit is not None and suppressed_at(prefix) > limit:
            return None
        return ok

    low, high = start, m - 1
    mid = _half(low + high)
    while low <= high:
        ok = state(mid + 1)
        if ok is None:
            return mid + 1, True
        if ok:
            high = mid - 1
        else:
            low = mid + 1
        mid = _half(low + high)
    ok = state(mid + 1)
    if ok is None:
        return mid + 1, True
    if not ok and mid + 1 < m:
        return mid + 2, False
    return mid + 1, False


def _holds_without_smallest(
    criterion: Criterion, ordered: IntArray, data: DataContext, prefix: int
) -> bool:
    """Whether dataset ``criterion`` holds once the ``prefix`` smallest of the classes (their
    sizes ``ordered``, ascending) are suppressed."""
    return criterion.fulfilled(ordered[prefix:], data)


@dataclass(frozen=True, init=False)
class PrivacyModel:
    """The privacy models a release must satisfy (criteria, in any combination), the share of
    input rows that may be suppressed, and the population the data were drawn from.

    ``PrivacyModel(k=5, l=2, l_variant="entropy", suppression_limit=0.05)`` builds k-anonymity,
    l-diversity and t-closeness from keywords as before; ``criteria=[...]`` takes any
    criteria. ``k``, ``l``, ``l_variant``, ``c``, ``t`` and ``t_distance`` read back the first
    such criterion (``k`` is 1 without k-anonymity).
    """

    criteria: tuple[Criterion, ...]
    suppression_limit: float
    population: PopulationModel | None

    def __init__(
        self,
        k: int = 1,
        l: float | None = None,  # noqa: E741
        l_variant: str = "distinct",
        c: float | None = None,
        t: float | None = None,
        t_distance: str = "equal",
        suppression_limit: float = 0.0,
        *,
        criteria: Iterable[Criterion] | None = None,
        population: PopulationModel | None = None,
    ) -> None:
        built: list[Criterion] = list(criteria or ())
        if k != 1:
            built.insert(0, KAnonymity(k=k))
        if l is not None:
            built.append(LDiversity(l=l, variant=l_variant, c=c))
        if t is not None:
            built.append(TCloseness(t=t, distance=t_distance))
        object.__setattr__(self, "criteria", tuple(built))
        object.__setattr__(self, "suppression_limit", float(suppression_limit))
        object.__setattr__(self, "population", population)

    # --- legacy views
    def _first(self, kind: type[Criterion]) -> Any:
        return next((c for c in self.criteria if isinstance(c, kind)), None)

    @property
    def k(self) -> int:
        ks = [c.k for c in self.criteria if isinstance(c, KAnonymity)]
        return max(ks) if ks else 1

    @property
    def l(self) -> float | None:  # noqa: E743
        c = self._first(LDiversity)
        return None if c is None else c.l

    @property
    def l_variant(self) -> str:
        c = self._first(LDiversity)
        return "distinct" if c is None else c.variant

    @property
    def c(self) -> float | None:
        c = self._first(LDiversity)
        return None if c is None else c.c

    @property
    def t(self) -> float | None:
        c = self._first(TCloseness)
        return None if c is None else c.t

    @property
    def t_distance(self) -> str:
        c = self._first(TCloseness)
        return "equal" if c is None else c.distance

    # --- groups
    @property
    def class_criteria(self) -> tuple[Criterion, ...]:
        return tuple(c for c in self.criteria if c.scope == "class")

    @property
    def dataset_criteria(self) -> tuple[Criterion, ...]:
        return tuple(c for c in self.criteria if c.scope == "dataset")

    @property
    def needs_sensitive(self) -> bool:
        return any(c.needs_sensitive for c in self.criteria)

    # --- validation, description, storage
    def validate(self) -> None:
        if not 0.0 <= self.suppression_limit <= 1.0:
            raise EngineError(
                "The suppression limit is a share of rows between 0 and 1, "
                f"not {self.suppression_limit!r}."
            )
        for criterion in self.criteria:
            criterion.validate()
        if self.population is not None:
            self.population.validate()
        for criterion in self.criteria:
            if criterion.needs_population and self.population is None:
                raise EngineError(
                    f"{criterion.label.capitalize()} needs the population size or the "
                    "sampling fraction."
                )

    def describe_criteria(self) -> str:
        return " and ".join(c.describe() for c in self.criteria) or "no privacy model"

    def describe(self) -> str:
        parts = [c.describe() for c in self.criteria] or ["no privacy model"]
        parts.append(f"at most {self.suppression_limit * 100:g}% of rows suppressed")
        if self.population is not None:
            parts.append(self.population.describe())
        return ", ".join(parts)

    def to_spec(self) -> dict[str, Any]:
        return {
            "criteria": [c.to_spec() for c in self.criteria],
            "suppression_limit": self.suppression_limit,
            "population": None if self.population is None else self.population.to_spec(),
        }

    @classmethod
    def from_spec(
        cls, spec: Mapping[str, Any] | Sequence[Mapping[str, Any]], **overrides: Any
    ) -> PrivacyModel:
        """From :meth:`to_spec`'s dict, or a bare list of criteria (then ``suppression_limit``
        and ``population`` may be given as keywords). Validates."""
        if isinstance(spec, Mapping):
            items = spec.get("criteria") or []
            limit = overrides.get("suppression_limit", spec.get("suppression_limit", 0.0))
            population = overrides.get("population", spec.get("population"))
        else:
            items = list(spec)
            limit = overrides.get("suppression_limit", 0.0)
            population = overrides.get("population")
        if not isinstance(population, PopulationModel):
            population = PopulationModel.from_spec(population)
        try:
            limit = float(limit or 0.0)
        except (TypeError, ValueError):
            raise EngineError(f"The suppression limit must be a number, not {limit!r}.") from None
        model = cls(
            criteria=[criterion_from_spec(item) for item in items],
            suppression_limit=limit,
            population=population,
        )
        model.validate()
        return model

    @classmethod
    def from_fields(
        cls, data: Mapping[str, Any], suppression_limit: float | None = None
    ) -> PrivacyModel:
        """From flat fields named ``ParamSpec.key(model)`` (a form's cleaned data): a model is
        requested when its first parameter has a value. ``suppression_limit`` and the
        population fields are read from ``data`` unless given. Validates."""
        criteria = []
        for name, kind in REGISTRY.items():
            main = kind.params[0]
            if data.get(main.key(name)) in (None, ""):
                continue
            criteria.append(kind(**{p.name: data.get(p.key(name)) for p in kind.params}))
        population = PopulationModel.from_spec(
            {
                p.name: data.get(p.name)
                for p in POPULATION_PARAMS
                if data.get(p.name) not in (None, "")
            }
        )
        limit = data.get("suppression_limit") if suppression_limit is None else suppression_limit
        model = cls(criteria=criteria, suppression_limit=float(limit or 0.0), population=population)
        model.validate()
        return model

    def fields(self) -> dict[str, Any]:
        """The flat fields :meth:`from_fields` reads (to fill a form from a stored model)."""
        out: dict[str, Any] = {"suppression_limit": self.suppression_limit}
        for criterion in self.criteria:
            for spec in criterion.params:
                out[spec.key(criterion.name)] = getattr(criterion, spec.name)
        if self.population is not None:
            out.update(self.population.to_spec())
        return out

    # --- evaluation
    def monotone(self) -> bool:
        """Whether "valid within the suppression limit" carries over to every generalization
        (ARX's ``getMonotonicityOfPrivacy``: every criterion monotone with generalization, and
        with suppression too unless no row may be suppressed)."""
        with_suppression = self.suppression_limit > 0
        return all(
            c.monotone(False) and (not with_suppression or c.monotone(True)) for c in self.criteria
        )

    def pruning_model(self, data: DataContext) -> PrivacyModel:
        """A per-class model, monotone even with suppression, implied by this one: a
        transformation invalid for it is invalid for this model (its k raised to the smallest
        class that can pass)."""
        implied: list[Criterion] = []
        k = 1
        for criterion in self.criteria:
            for c in criterion.implied(data):
                if isinstance(c, KAnonymity | HighestRisk):
                    k = max(k, c.min_class_size(data))
                elif c not in implied:
                    implied.append(c)
            # Classes smaller than a criterion's bound fail it for sure.
            k = max(k, criterion.min_class_size(data))
        if k > 1:
            implied.insert(0, KAnonymity(k=k))
        return PrivacyModel(criteria=implied, suppression_limit=self.suppression_limit)

    def min_class_size(self, data: DataContext) -> int:
        return max((c.min_class_size(data) for c in self.class_criteria), default=1)

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        """True for each class failing some per-class criterion."""
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for criterion in self.class_criteria:
            fails |= criterion.class_fails(classes, data)
        return fails

    def evaluate(
        self,
        classes: Classes,
        data: DataContext,
        limit_rows: int | None = None,
        tie_order: Callable[[IntArray, int], IntArray] | None = None,
        excluded: BoolArray | None = None,
    ) -> Evaluation:
        """Which classes to suppress (see the module docstring). ``limit_rows``: the
        suppression limit in rows (None: no limit, and no early stop); ``tie_order(index, count)``: the
        ``count`` classes of ``index`` (all of one size) a dataset criterion suppresses first
        (default: as numbered);
        ``excluded``: classes that dataset criteria ignore (fully generalized ones)."""
        sizes = classes.sizes
        fails = self.class_fails(classes, data)
        dataset = self.dataset_criteria
        if dataset:
            keep = ~fails if excluded is None else ~fails & ~excluded
            index = np.flatnonzero(keep)
            # The criteria only see the sizes of the classes left, so the binary search runs on
            # sorted sizes; which classes of the last size suppressed go is settled after.
            ordered = np.sort(sizes[index])
            already = int(sizes[fails].sum())
            cumulative = np.concatenate([[0], np.cumsum(ordered)])
            prefix = 0
            aborted = False

            def suppressed_at(p: int) -> int:
                return already + int(cumulative[p])

            for criterion in dataset:
                prefix, aborted = _suppression_prefix(
                    partial(_holds_without_smallest, criterion, ordered, data),
                    prefix,
                    len(index),
                    suppressed_at,
                    limit_rows,
                )
                if aborted:
                    break
            suppressed = already + int(cumulative[prefix])
            valid = not aborted and (limit_rows is None or suppressed <= limit_rows)
            if prefix and (valid or limit_rows is None):
                boundary = ordered[prefix - 1]
                smaller = index[sizes[index] < boundary]
                tied = index[sizes[index] == boundary]
                count = prefix - len(smaller)
                if tie_order is not None:
                    tied = tie_order(tied, count)
                fails = fails.copy()
                fails[smaller] = True
                fails[tied[:count]] = True
            # An invalid transformation's fails are only its per-class failures.
            return Evaluation(fails, suppressed, valid)
        suppressed = int(sizes[fails].sum())
        return Evaluation(fails, suppressed, limit_rows is None or suppressed <= limit_rows)

    def failing_models(self, classes: Classes, data: DataContext) -> FloatArray:
        """Per class, the comma-separated names of the per-class models it fails ("" if none)."""
        out = np.full(len(classes.sizes), "", dtype=object)
        for criterion in self.class_criteria:
            bad = criterion.class_fails(classes, data)
            out[bad] = np.where(out[bad] == "", criterion.name, out[bad] + "," + criterion.name)
        return out

    def borderline_models(self, classes: Classes, data: DataContext) -> FloatArray:
        """Per class, the comma-separated names of the per-class models it only just passes
        (see :meth:`Criterion.class_borderline`; "" if none)."""
        out = np.full(len(classes.sizes), "", dtype=object)
        for criterion in self.class_criteria:
            near = criterion.class_borderline(classes, data)
            out[near] = np.where(out[near] == "", criterion.name, out[near] + "," + criterion.name)
        return out

    def class_columns(
        self, classes: Classes, data: DataContext
    ) -> dict[str, FloatArray | IntArray]:
        """The classes table's measures: ``size``, then per sensitive attribute S distinct l
        (``S:distinct_l``), entropy l (``S:entropy_l``) and t (``S:t``, equal distance unless
        the model's t-closeness uses another), then the criteria's own columns."""
        out: dict[str, FloatArray | IntArray] = {"size": classes.sizes}
        for name, sc in per_attribute(classes, data):
            out[f"{name}:distinct_l"] = distinct_l(sc)
            out[f"{name}:entropy_l"] = entropy_l(sc)
            out[f"{name}:t"] = t_distance(sc, data.t_context(name, "equal"))
        for criterion in self.class_criteria:
            out.update(criterion.class_columns(classes, data))
        return out

    def legacy_achieved(
        self, classes: Classes, data: DataContext
    ) -> tuple[dict[str, float], dict[str, float]]:
        """``achieved_l`` (lowest l of the model's variant, distinct without l-diversity) and
        ``achieved_t`` (largest t, the model's distance or equal) per sensitive attribute."""
        if not data.sensitive:
            return {}, {}
        ell = self._first(LDiversity) or LDiversity(l=1, variant="distinct")
        tee = self._first(TCloseness) or TCloseness(t=1, distance="equal")
        return dict(ell.achieved(classes, data)["l"]), dict(tee.achieved(classes, data)["t"])

    def class_column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        """(column, label) of the per-class measures in the classes table, in order."""
        labels = {}
        for s in sensitive:
            labels[f"{s}:distinct_l"] = f"distinct l ({s})"
            labels[f"{s}:entropy_l"] = f"entropy l ({s})"
            labels[f"{s}:t"] = f"t, equal distance ({s})"
        for criterion in self.class_criteria:
            labels.update(dict(criterion.column_labels(sensitive)))
        return list(labels.items())

    def achieved(self, classes: Classes, data: DataContext) -> list[dict[str, Any]]:
        """Per criterion: its spec, description and achieved values on the released classes
        (JSON-ready; what :func:`checks` reads back)."""
        return [
            {
                "model": c.name,
                "spec": c.to_spec(),
                "description": c.describe(),
                "achieved": c.achieved(classes, data),
            }
            for c in self.criteria
        ]


def checks(summary: Mapping[str, Any]) -> list[Check]:
    """The review's check lines from a stored summary (``AnonymizationResult.report()``): one
    per model (and sensitive attribute), then the suppression limit."""
    spec = summary.get("privacy_model") or {}
    lines: list[Check] = []
    for entry in summary.get("models") or []:
        criterion = criterion_from_spec(entry.get("spec") or {"model": entry.get("model")})
        lines.extend(criterion.check(entry.get("achieved") or {}))
    rows_in = int(summary.get("rows_in") or 0)
    allowed = int(float(spec.get("suppression_limit") or 0.0) * rows_in + 1e-9)
    suppressed = int(summary.get("suppressed") or 0)
    lines.append(
        Check(
            "suppression limit",
            suppressed <= allowed,
            f"{suppressed} rows suppressed, at most {allowed} allowed",
        )
    )
    return lines
