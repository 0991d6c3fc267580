"""The README's code blocks, for the tests that run them as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def section(heading: str) -> str:
    """The README from the heading that starts with `heading` (``"### Changelogs"``) to the next heading of the same
    or a higher level (a ``# comment`` line in a code block is not a heading)."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n" + heading) + 1
    level = len(heading) - len(heading.lstrip("#"))
    following = re.compile(r"^#{1,%d} " % level, re.MULTILINE)
    for found in following.finditer(text, start + len(heading)):
        if text.count("\n```", start, found.start()) % 2 == 0:  # not a comment line inside a code block
            return text[start:found.start()]
    return text[start:]


def python_block(heading: str, index: int | None = None) -> str:
    """The one ```python block of the section under `heading`, or its `index`-th (from 0) of several."""
    found = [b.split("```", 1)[0] for b in section(heading).split("```python\n")[1:]]
    if index is None:
        (block,) = found
        return block
    return found[index]


#: The comment that says, just above a fenced block, why no test runs it: ``<!-- not run in CI: reason -->``.
NOT_RUN = re.compile(r"<!-- not run in CI: (.+?) -->")


def blocks() -> list[tuple[str, int, str, int, str | None]]:
    """Every fenced block of the README: ``(heading, ordinal under that heading, language, line, not-run reason)``;
    the heading is the nearest one above the block (any level), the ordinal counts from 0."""
    found, heading, seen, fence, reason = [], "", {}, None, None
    lines = README.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if fence is None and re.match(r"#{1,6} ", line):
            heading = line
        if line.startswith("```"):
            if fence is None:
                above = "\n".join(lines[max(0, number - 3):number - 1])
                marked = NOT_RUN.search(above)
                fence = (line[3:].strip(), number, marked.group(1) if marked else None)
            else:
                language, start, reason = fence
                ordinal = seen.get(heading, 0)
                seen[heading] = ordinal + 1
                found.append((heading, ordinal, language, start, reason))
                fence = None
    return found
