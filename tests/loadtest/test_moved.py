"""The harness's old module paths (`impulse.loadtest.moved.MOVED`): each still imports, warns naming the new path, and
is the moved module itself; nothing of the project, its tests, benchmarks or docs hooks imports one (this test
alone does)."""

from __future__ import annotations

import ast
import importlib
import sys
import warnings
from pathlib import Path

import pytest

from impulse.loadtest.moved import MOVED

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_naming_the_new_one_and_is_the_moved_module(old):
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)   # imported already by an earlier test: the shim runs again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        __import__(old)   # as an import statement does: no frame of importlib's own between the shim and here
    module = sys.modules[old]
    assert module is new
    assert [(w.category, w.filename) for w in caught] == [(DeprecationWarning, __file__)]   # the importer's line
    assert f"{old} has moved to {MOVED[old]}" in str(caught[0].message)
    exported = getattr(new, "__all__", ())
    assert exported and all(getattr(module, name) is getattr(new, name) for name in exported)


def test_every_old_path_is_a_shim_and_every_shim_is_listed():
    shims = {f"impulse.loadtest.{path.stem}" for path in (ROOT / "impulse" / "loadtest").glob("*.py")
             if "alias(__name__)" in path.read_text()}
    assert shims == set(MOVED)


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_nothing_imports_an_old_path():
    files = [p for folder in ("impulse", "sinks", "connectors", "tests", "bench") for p in (ROOT / folder).rglob("*.py")]
    files += [ROOT / "docs" / "hooks.py", *ROOT.glob("pyspark_*.py")]
    found = {f"{path.relative_to(ROOT)}: {name}" for path in files if path != Path(__file__)
             for name in _imported(path) & set(MOVED)}
    assert len(files) > 100
    assert found == set()
