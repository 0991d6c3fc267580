"""The project's import graph, read from the source with `ast`: no cycle among its modules, and no private name
imported from another module.

The modules are those of ``impulse``, ``sinks``, ``connectors`` and the top-level ``pyspark_*`` entry points.
Every import statement counts, at any depth (inside functions and ``if TYPE_CHECKING:`` blocks too): an edge
goes to the module imported (``from package import module`` to the module, ``from module import name`` to
the module). A package's own ``__init__`` running first is not an edge: only what a module names.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("impulse", "sinks", "connectors")


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project by dotted name (a package by its own name, for its ``__init__.py``)."""
    found = {path.stem: path for path in root.glob("pyspark_*.py")}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str | None, int]]:
    """``(module imported, name taken from it or None, line)`` of every import in `path` of a project module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names if alias.name in modules]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.append((f"{base}.{alias.name}", None, node.lineno))
                elif base in modules:
                    found.append((base, alias.name, node.lineno))
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {name: {target for target, _, _ in imports_of(name, path, modules) if target != name}
            for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as its modules in order, the first repeated at the end; None without one."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def private_imports(root: Path = ROOT) -> list[str]:
    """``module:line imports _name from other`` for each private name a module takes from another module."""
    modules = project_modules(root)
    return [f"{name}:{line} imports {taken} from {target}"
            for name, path in sorted(modules.items())
            for target, taken, line in imports_of(name, path, modules)
            if taken is not None and taken.startswith("_") and not taken.startswith("__") and target != name]


def test_the_project_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 50 and graph["pyspark_kafka_sink"] == {"sinks.kafka.sink"}
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_no_private_name_is_imported_across_modules():
    assert private_imports() == []


def test_a_cycle_is_found_and_named(tmp_path):
    (tmp_path / "sinks").mkdir()
    (tmp_path / "sinks" / "__init__.py").write_text("")
    (tmp_path / "sinks" / "a.py").write_text("from sinks import b\n")
    (tmp_path / "sinks" / "b.py").write_text("def f():\n    from .c import g\n")
    (tmp_path / "sinks" / "c.py").write_text("import sinks.a\nfrom sinks.b import _hidden\n")
    graph = import_graph(tmp_path)
    assert find_cycle(graph) == ["sinks.a", "sinks.b", "sinks.c", "sinks.a"]
    assert private_imports(tmp_path) == ["sinks.c:2 imports _hidden from sinks.b"]
    (tmp_path / "sinks" / "c.py").write_text("import sinks.other\n")
    assert find_cycle(import_graph(tmp_path)) is None
