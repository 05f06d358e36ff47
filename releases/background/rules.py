"""What every lifecycle table shares: a transition (the state an action leads to, who may take
it, its label) and the questions asked of a table. A stateful model's table lives in its
feature's ``rules.py``; nothing else decides a state: every write of one takes its target from
the table (``target``) and its condition from the states the action leaves (``sources``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: The actor of the worker's and the sweeper's actions (no person).
SYSTEM = "system"


@dataclass(frozen=True)
class Transition:
    #: The state after the action; ``None``: the action does not change the state.
    target: str | None
    who: str
    label: str


def _moved(target: str | None, action: str) -> str:
    if target is None:
        raise ValueError(f"{action!r} does not change the state.")
    return target


class Table:
    """A lifecycle table: (state, action) -> :class:`Transition`."""

    def __init__(self, transitions: Mapping[tuple[str, str], Transition]) -> None:
        self.transitions = dict(transitions)

    def allows(self, state: str, action: str) -> bool:
        return (state, action) in self.transitions

    def sources(self, action: str) -> list[str]:
        """The states from which ``action`` is possible."""
        return [state for (state, name) in self.transitions if name == action]

    def target(self, state: str, action: str) -> str:
        """The state ``action`` leads to from ``state`` (an action that changes it)."""
        return _moved(self.transitions[(state, action)].target, action)

    def target_of(self, action: str) -> str:
        """The one state ``action`` leads to from every state it leaves (for a conditional
        update whose row may be in any of them)."""
        (only,) = {t.target for (_, name), t in self.transitions.items() if name == action}
        return _moved(only, action)

    def targets(self, *actions: str) -> frozenset[str]:
        """The states the actions lead to."""
        return frozenset(
            t.target
            for (_, name), t in self.transitions.items()
            if name in actions and t.target is not None
        )

    def who(self, action: str) -> str:
        return next(t.who for (_, name), t in self.transitions.items() if name == action)

    def label(self, action: str) -> str:
        return next(t.label for (_, name), t in self.transitions.items() if name == action)
