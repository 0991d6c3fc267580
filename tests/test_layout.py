"""The README's Layout section matches the tree: each folder it names exists, each sink package is there, and
each module it names in sinks/ and connectors/ exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.readme import section

ROOT = Path(__file__).resolve().parents[1]


def layout() -> dict[str, str]:
    """First column (a folder or a glob) → its description, from the Layout section's block."""
    block = section("## Layout").split("```")[1]
    entries: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        if line and not line[0].isspace():
            current, _, text = line.partition(" ")
            entries[current] = text.strip()
        elif current is not None:
            entries[current] += " " + line.strip()
    return entries


def test_the_layout_section_matches_the_tree():
    entries = layout()
    assert {"impulse/", "sinks/", "connectors/", "tests/", "bench/", "pyspark_*.py"} <= set(entries)
    for name in entries:
        assert list(ROOT.glob(name.rstrip("/"))), f"the Layout names {name}, which is not in the tree"
    sinks = {p.name for p in (ROOT / "sinks").iterdir() if (p / "__init__.py").exists()}
    assert sinks == {"kafka", "redis", "webhook"} and all(f"{name}/" in entries["sinks/"] for name in sinks)
    for folder in ("sinks/", "connectors/"):
        for module in re.findall(r"\b(\w+\.py)\b", entries[folder]):
            assert list((ROOT / folder).rglob(module)), f"the Layout's {folder} names {module}, which is not there"
