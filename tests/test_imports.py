"""The project's import graph, read from the source with `ast`: no cycle among its modules, none among its packages,
no private name imported from another module, and no shipped module that reads a path under ``tests/``.

The modules are those of ``impulse``, ``sinks``, ``connectors`` and the top-level ``pyspark_*`` entry points: what the
package ships. Every import statement counts, at any depth (inside functions and ``if TYPE_CHECKING:`` blocks too): an
edge goes to the module imported (``from package import module`` to the module, ``from module import name`` to
the module). A package's own ``__init__`` running first is not an edge: only what a module names.

The load harness's packages keep the order its docstring lists them in (`impulse.loadtest`): a module of one imports
none of a package listed after it.

A package is a folder with an ``__init__.py``. Package A imports package B when a module in A (or in a package under
A) imports one in B (or under B), and neither package holds the other: so a cycle between two sub-packages, or between
a package and a sibling's sub-package, is a cycle of packages even where the modules themselves form none.

And one run-time check: importing the data sources (what Spark's Python processes import) does not import pandas.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
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


def package_of(name: str, path: Path) -> str | None:
    """The package a module is in (a package's ``__init__`` is its own); None for a top-level module."""
    if path.name == "__init__.py":
        return name
    return name.rpartition(".")[0] or None


def enclosing(package: str) -> list[str]:
    """`package` and every package that holds it: ``a.b.c``, ``a.b``, ``a``."""
    parts = package.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def holds(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer + ".")


def package_graph(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """Package → package it imports → the module imports behind it (``module -> module``), for every two packages of
    which neither holds the other (module docstring)."""
    modules = project_modules(root)
    graph: dict[str, dict[str, list[str]]] = {}
    for name, targets in import_graph(root).items():
        source = package_of(name, modules[name])
        for target in sorted(targets):
            imported = package_of(target, modules[target])
            if source is None or imported is None:
                continue
            for a in enclosing(source):
                for b in enclosing(imported):
                    if not holds(a, b) and not holds(b, a):
                        graph.setdefault(a, {}).setdefault(b, []).append(f"{name} -> {target}")
    return graph


def package_cycle(root: Path = ROOT) -> str | None:
    """One cycle of packages, each link with the module imports behind it; None without one."""
    graph = package_graph(root)
    cycle = find_cycle({package: set(imported) for package, imported in graph.items()})
    if cycle is None:
        return None
    return "; ".join(f"{a} -> {b} ({', '.join(graph[a][b])})" for a, b in zip(cycle, cycle[1:]))


#: how code names a path: joined with `/`, or given to one of these callables (by their last name)
_PATH_CALLS = {"join", "joinpath", "Path", "PurePath", "open"}
_UNDER_TESTS = re.compile(r"^tests(/|$)")


def _names_tests(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(_UNDER_TESTS.match(node.value))


def _callable_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def paths_under_tests(root: Path = ROOT) -> list[str]:
    """``module:line`` of each place a shipped module names a path under ``tests/`` (the checkout's test suite, which an
    installed package does not have): ``"tests"`` or ``"tests/…"`` joined with ``/`` (``ROOT / "tests"``), passed to
    ``os.path.join``, ``joinpath``, ``Path`` or ``open``, or in an f-string after a value (``f"{ROOT}/tests/…"``)."""
    found: set[tuple[str, int]] = set()
    for name, path in project_modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                hit = _names_tests(node.left) or _names_tests(node.right)
            elif isinstance(node, ast.Call) and _callable_name(node.func) in _PATH_CALLS:
                hit = any(_names_tests(arg) for arg in node.args)
            elif isinstance(node, ast.JoinedStr):
                hit = any(isinstance(value, ast.FormattedValue) and isinstance(text, ast.Constant)
                          and str(text.value).startswith("/") and _names_tests(ast.Constant(text.value[1:]))
                          for value, text in zip(node.values, node.values[1:]))
            else:
                hit = False
            if hit:
                found.add((name, node.lineno))
    return [f"{name}:{line}" for name, line in sorted(found)]


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


def test_no_package_imports_a_package_that_imports_it():
    assert {"impulse.loadtest", "impulse.nexmark"} <= set(package_graph())
    cycle = package_cycle()
    assert cycle is None, f"import cycle of packages: {cycle}"


def harness_layers(root: Path = ROOT) -> list[str]:
    """The packages of ``impulse.loadtest``, from the bottom up, as its docstring lists them (``- `name`: …``)."""
    doc = ast.get_docstring(ast.parse((root / "impulse" / "loadtest" / "__init__.py").read_text())) or ""
    return [f"impulse.loadtest.{name}" for name in re.findall(r"^- `(\w+)`:", doc, re.MULTILINE)]


def imports_up(layers: list[str], root: Path = ROOT) -> list[str]:
    """``module -> module`` for each import from a module of one of `layers` into one listed after it."""
    def rank(module: str) -> int | None:
        return next((i for i, layer in enumerate(layers) if holds(layer, module)), None)

    return sorted(f"{name} -> {target}" for name, targets in import_graph(root).items() for target in targets
                  if rank(name) is not None and rank(target) is not None and rank(target) > rank(name))


def test_the_harness_packages_import_only_those_listed_below_them():
    layers = harness_layers()
    harness = ROOT / "impulse" / "loadtest"
    folders = {f"impulse.loadtest.{path.name}" for path in harness.iterdir() if (path / "__init__.py").exists()}
    assert len(layers) > 5 and set(layers) == folders, "impulse.loadtest's docstring lists each of its packages once"
    assert imports_up(layers) == []


#: shipped modules that still read a file of the checkout's tests/, each with what it reads. An entry goes once its
#: module stops: the test fails until it does, so the list can only shrink.
def test_no_shipped_module_reads_a_path_under_tests():
    assert paths_under_tests() == []


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


def test_a_cycle_of_packages_is_found_where_the_modules_form_none(tmp_path):
    for folder in ("sinks", "sinks/a", "sinks/a/inner", "sinks/b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "sinks" / "a" / "x.py").write_text("from sinks.b import y\n")
    (tmp_path / "sinks" / "b" / "y.py").write_text("def f():\n    from sinks.a.inner import z\n")
    (tmp_path / "sinks" / "a" / "inner" / "z.py").write_text("Z = 1\n")
    (tmp_path / "sinks" / "top.py").write_text("import sinks.a.x\n")  # sinks holds both: no link of packages
    assert find_cycle(import_graph(tmp_path)) is None
    assert package_cycle(tmp_path) == ("sinks.a -> sinks.b (sinks.a.x -> sinks.b.y); "
                                       "sinks.b -> sinks.a (sinks.b.y -> sinks.a.inner.z)")
    (tmp_path / "sinks" / "b" / "y.py").write_text("")
    assert package_cycle(tmp_path) is None


def test_a_shipped_module_naming_a_path_under_tests_is_found(tmp_path):
    (tmp_path / "sinks").mkdir()
    (tmp_path / "sinks" / "__init__.py").write_text('"""Reads nothing under tests/: a docstring may say so."""\n')
    (tmp_path / "sinks" / "reads.py").write_text(
        "import os\nfrom pathlib import Path\nROOT = Path(__file__).parents[1]\n"
        "POM = ROOT / 'tests' / 'kafka' / 'pom.xml'\n"
        "DATA = os.path.join(ROOT, 'tests/data')\n"
        "TEXT = open(f'{ROOT}/tests/x.txt')\n"
        "MORE = ROOT.joinpath('tests', 'y')\n")
    (tmp_path / "sinks" / "writes.py").write_text(
        "def suite(element):\n    element.set('tests', '1')\n    return {'tests': '0', 'name': 'tests'}\n")
    assert paths_under_tests(tmp_path) == ["sinks.reads:4", "sinks.reads:5", "sinks.reads:6", "sinks.reads:7"]


def test_importing_a_data_source_does_not_import_pandas():
    # Spark starts a Python process per streaming query (and per planner) that imports the source or sink and
    # never needs pandas; pyarrow's first array or scalar imports it (~0.2 s of CPU each time), so no module a
    # registration entry point imports may build one at import
    modules = sorted(path.stem for path in ROOT.glob("pyspark_*.py"))
    assert len(modules) >= 6, modules
    code = (f"import sys\nfor m in {modules!r}:\n    __import__(m)\n"
            "print(sorted(m for m in ('pandas', 'pyarrow.dataset') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "[]", f"imported at import time: {done.stdout}"
