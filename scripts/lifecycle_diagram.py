"""Print the release request's lifecycle as a Mermaid state diagram, made from the code.

The diagram is drawn from the transition table (``TRANSITIONS``: (state, action) -> next state
and who acts) and the model's initial state, so it cannot drift from what the services enforce.

    python scripts/lifecycle_diagram.py           # print the diagram
    python scripts/lifecycle_diagram.py --write   # put it in docs/architecture.md

``tests/test_docs.py`` fails when the diagram in docs/architecture.md is not this output.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START = "<!-- lifecycle:start -->"
END = "<!-- lifecycle:end -->"

# The one place that names where the transition table lives.
LIFECYCLE_MODULE = "releases.services.lifecycle"


def load_transitions() -> dict:
    """The table ``{(state, action): Transition(target, who, label)}`` from the code."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonymizer_site.settings")
    import django

    django.setup()
    return importlib.import_module(LIFECYCLE_MODULE).TRANSITIONS


def initial_state() -> str:
    """The state a new release request starts in (the model field's default)."""
    from django.apps import apps

    model = apps.get_model("releases", "ReleaseRequest")
    return str(model._meta.get_field("state").default)


def diagram(transitions: dict, initial: str) -> str:
    """Mermaid ``stateDiagram-v2``: one arrow per (state, next state), labelled with the actions
    that take it and who may take them; an action that keeps the state is a loop."""
    labels: dict[str, str] = {}
    order: list[str] = []
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (state, action), transition in transitions.items():
        target = state if transition.target is None else transition.target
        for s in (state, target):
            if str(s) not in labels:
                labels[str(s)] = getattr(s, "label", str(s))
                order.append(str(s))
        edges[(str(state), str(target))].append(f"{action} ({transition.who})")
    sources = {str(state) for state, _ in transitions}
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += [f'    state "{labels[s]}" as {s}' for s in order]
    lines.append(f"    [*] --> {initial}")
    for (source, target), actions in edges.items():
        lines.append(f"    {source} --> {target} : {', '.join(actions)}")
    lines += [f"    {s} --> [*]" for s in order if s not in sources]
    lines.append("```")
    return "\n".join(lines) + "\n"


def replace_between_markers(text: str, block: str) -> str:
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{DOC} has no {START} ... {END} markers.")
    return f"{head}{START}\n{block}{END}{tail}"


def committed_block(text: str) -> str:
    """What is between the markers in ``text`` (without the newline after the start marker)."""
    return text.partition(START)[2].partition(END)[0].removeprefix("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"update {DOC.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    block = diagram(load_transitions(), initial_state())
    if args.write:
        DOC.write_text(replace_between_markers(DOC.read_text(), block))
        print(f"Wrote the lifecycle diagram into {DOC.relative_to(ROOT)}.")
    else:
        sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
