"""The Layout page of the documentation (docs/explanation/layout.md) matches the tree: each folder and file it names
exists, each module it names is in the folder of its line, and every Python package under impulse/, sinks/ and
connectors/ has a line of its own."""

from __future__ import annotations

import re
from pathlib import Path

from connectors import registry
from tests.readme import DOCS, section

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = DOCS / "explanation" / "layout.md"


def layout() -> dict[str, str]:
    """First column (a folder or a glob) → its description, from the Layout page's block."""
    block = section("# Layout", LAYOUT).split("```")[1]
    entries: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        if line and not line[0].isspace():
            current, _, text = line.partition(" ")
            entries[current] = text.strip()
        elif current is not None:
            entries[current] += " " + line.strip()
    return entries


def packages() -> set[str]:
    """Every package folder under impulse/, sinks/ and connectors/ (a folder with an ``__init__.py``), as
    ``"sinks/kafka/"``."""
    return {f"{init.parent.relative_to(ROOT).as_posix()}/" for top in ("impulse", "sinks", "connectors")
            for init in (ROOT / top).rglob("__init__.py")}


def test_the_layout_page_names_only_what_is_in_the_tree():
    entries = layout()
    assert {"impulse/", "sinks/", "connectors/", "tests/", "bench/", "pyspark_*.py"} <= set(entries)
    for name in entries:
        assert list(ROOT.glob(name.rstrip("/"))), f"the Layout names {name}, which is not in the tree"
    for folder, text in entries.items():
        if folder.endswith("/"):
            for module in re.findall(r"(?<![\w/*])(\w+\.py)\b", text):
                assert (ROOT / folder / module).is_file(), f"the Layout's {folder} names {module}, which is not there"


def test_every_package_has_its_line():
    found = packages()
    assert {"impulse/loadtest/", "sinks/kafka/", "connectors/servers/"} <= found, "the packages were not found"
    missing = sorted(found - set(layout()))
    assert not missing, f"docs/explanation/layout.md: give these packages a line of their own: {missing}"


def test_each_sink_package_is_a_registered_sink_and_named_by_the_layout():
    """The packages under sinks/ are exactly those the registry's sink rows live in (`connectors.registry`)."""
    packages = {p.name for p in (ROOT / "sinks").iterdir() if (p / "__init__.py").exists()}
    registered = {row.module.split(".")[1] for row in registry.sinks() if row.module.startswith("sinks.")}
    assert packages == registered and packages, f"sinks/ holds {sorted(packages)}, the registry {sorted(registered)}"
    assert all(f"sinks/{name}/" in layout() for name in packages)
