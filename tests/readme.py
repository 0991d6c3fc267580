"""The README's code blocks, for the tests that run them as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def section(heading: str) -> str:
    """The README from the heading that starts with `heading` (``"### Changelogs"``) to the next heading of the same
    or a higher level."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n" + heading) + 1
    level = len(heading) - len(heading.lstrip("#"))
    following = re.compile(r"^#{1,%d} " % level, re.MULTILINE)
    found = following.search(text, start + len(heading))
    return text[start:found.start() if found else len(text)]


def python_block(heading: str) -> str:
    """The one ```python block of the section under `heading`."""
    (block,) = [b.split("```", 1)[0] for b in section(heading).split("```python\n")[1:]]
    return block
