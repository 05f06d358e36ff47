"""Protection of earlier releases: every joint class with each earlier extract holds at least k
records.

Two extracts of the same rows can be intersected when their rows can be linked (Sweeney's
complementary-release attack): a row's *joint class* is its class in this extract paired with
its class in the earlier one, or with "not in it" when the earlier extract left it out (the
rows of one class that the earlier extract left out form one joint class). Each extract may be
k-anonymous and the joint classes still single people out.

The earlier releases are data, not parameters: the search counts each earlier extract's
classes within every class of a candidate (:attr:`.base.Classes.linked`), and a class fails
when one of its joint classes is smaller than k; like every failing class it is then
suppressed. The model is monotone with generalization (merging classes merges their joint
classes, which only grow) but not with suppression: a class that passes can merge with a
small failing one into a class that fails whole (10 rows in earlier class A and 2 in earlier
class B, k=5: alone, the 2 rows are suppressed; merged, all 12 are). The search then prunes
with k-anonymity, which the model implies.

It is not offered among the models a release is asked for with (:data:`.registry.REGISTRY`):
it needs the earlier releases, which the caller gives (:data:`.registry.LINKED`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..arrays import BoolArray, FloatArray, IntArray
from ..privacy import SensitiveCounts
from .base import Check, Classes, Criterion, DataContext, ParamSpec

__all__ = ["EarlierReleases", "smallest_joint_class"]


def smallest_joint_class(sc: SensitiveCounts) -> IntArray:
    """Per class, its smallest joint class with the earlier release (0 for an empty class)."""
    out = np.zeros(sc.n_groups, dtype=np.int64)
    if len(sc.group):
        # Cells are sorted by class: the minimum of each run of one class.
        starts = np.flatnonzero(np.r_[True, sc.group[1:] != sc.group[:-1]])
        out[sc.group[starts]] = np.minimum.reduceat(sc.count, starts)
    return out


class EarlierReleases(Criterion):
    name = "earlier-releases"
    label = "protection of earlier releases"
    summary = (
        "Every joint class with each earlier extract (a class of this extract paired with a "
        "class of the earlier one, or with the rows the earlier one left out) holds at least "
        "k records."
    )
    params = (
        ParamSpec(
            "k",
            "int",
            "k",
            "Smallest number of records a joint class with an earlier extract holds.",
            symbol="k",
            minimum=1,
            metavar="N",
        ),
    )
    #: Mondrian builds its own classes and does not count the earlier ones in them.
    local_recoding = False
    k: int

    def describe(self) -> str:
        return f"joint classes with earlier releases of at least {self.k}"

    def monotone(self, with_suppression: bool) -> bool:
        return not with_suppression  # see the module docstring

    def min_class_size(self, data: DataContext) -> int:
        return int(self.k)  # a class smaller than k holds joint classes smaller than k

    def class_fails(self, classes: Classes, data: DataContext) -> BoolArray:
        fails = np.zeros(len(classes.sizes), dtype=bool)
        for sc in classes.linked.values():
            fails[sc.group[sc.count < self.k]] = True
        return fails

    def class_borderline(self, classes: Classes, data: DataContext) -> BoolArray:
        near = np.zeros(len(classes.sizes), dtype=bool)
        for sc in classes.linked.values():
            near |= smallest_joint_class(sc) == self.k
        return near

    def class_columns(self, classes: Classes, data: DataContext) -> dict[str, FloatArray]:
        return {
            f"{name}:smallest_joint_class": smallest_joint_class(sc).astype(np.float64)
            for name, sc in classes.linked.items()
        }

    def column_labels(self, sensitive: Sequence[str]) -> list[tuple[str, str]]:
        return []  # named after the earlier releases, which only the classes know

    def achieved(self, classes: Classes, data: DataContext) -> dict[str, Any]:
        return {
            "smallest_joint_class": {
                name: int(sc.count.min()) if len(sc.count) else 0
                for name, sc in classes.linked.items()
            }
        }

    def check(self, achieved: Mapping[str, Any]) -> list[Check]:
        return [
            Check(
                f"joint classes with {name}",
                value >= self.k,
                f"smallest joint class {value}, k requested {self.k}",
            )
            for name, value in (achieved.get("smallest_joint_class") or {}).items()
        ]
