"""The engine's modules depend on each other one way: no module imports, directly or through
others, a module that imports it back (imports inside functions and under TYPE_CHECKING
count too), and no function imports an engine module."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "releases" / "engine"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ENGINE.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ENGINE.rglob("*.py")}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports(
    name: str, path: Path, tree: ast.AST, modules: dict[str, Path]
) -> list[tuple[str, ast.AST]]:
    """(engine module imported, import statement) for every import under ``tree``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # A package's own submodules importing it (for a sibling) is not a dependency.
            if target and target != name and not name.startswith(target + "."):
                found.append((target, node))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {t for t, _ in _imports(name, path, _tree(path), modules)}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A path that comes back to where it started, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_engine_modules_import_one_way():
    graph = _graph()
    assert "releases.engine.criteria.base" in graph and len(graph) > 20
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])
    # The bottom layer imports nothing of the engine; the models do not import each other.
    for bottom in ("errors", "constants", "arrays"):
        assert graph[f"releases.engine.{bottom}"] == set()
    models = {n for n in graph if n.startswith("releases.engine.criteria.")} - {
        "releases.engine.criteria.base",
        "releases.engine.criteria.registry",
        "releases.engine.criteria.model",
    }
    for model in models:
        assert not graph[model] & (models | {"releases.engine.criteria.registry"}), model


def test_no_function_imports_an_engine_module():
    modules = _modules()
    inside = []
    for name, path in modules.items():
        for func in ast.walk(_tree(path)):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                imported = _imports(name, path, func, modules)
                inside += [f"{name}:{node.lineno} imports {target}" for target, node in imported]
    assert inside == []
