"""The code blocks of the README and of the documentation's pages (docs/), for the tests that run them as written:
`section` and `python_block` read the README by default, a page of docs/ with ``page=DOCS / "how-to/…md"``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the documentation site's pages (mkdocs.yml), and the one page of measured figures
DOCS = ROOT / "docs"
BENCH = ROOT / "bench" / "README.md"


def section(heading: str, page: Path = README) -> str:
    """The README (or `page`) from the heading that starts with `heading` (``"### Changelogs"``) to the next heading
    of the same or a higher level (a ``# comment`` line in a code block is not a heading)."""
    text = "\n" + page.read_text(encoding="utf-8")  # a heading on the first line follows a newline too
    start = text.index("\n" + heading) + 1
    level = len(heading) - len(heading.lstrip("#"))
    following = re.compile(r"^#{1,%d} " % level, re.MULTILINE)
    for found in following.finditer(text, start + len(heading)):
        if text.count("\n```", start, found.start()) % 2 == 0:  # not a comment line inside a code block
            return text[start:found.start()]
    return text[start:]


def python_block(heading: str, index: int | None = None, page: Path = README) -> str:
    """The one ```python block of the README's (or `page`'s) section under `heading`, or its `index`-th (from 0)."""
    found = [b.split("```", 1)[0] for b in section(heading, page).split("```python\n")[1:]]
    if index is None:
        (block,) = found
        return block
    return found[index]


#: The comment that says, just above a fenced block, why no test runs it: ``<!-- not run in CI: reason -->``.
NOT_RUN = re.compile(r"<!-- not run in CI: (.+?) -->")
#: A fence: ``` or ~~~ (three or more), indented too (a block in a list or an admonition), then its language.
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<language>[^\s`]*)")


def blocks(page: Path = README) -> list[tuple[str, int, str, int, str | None]]:
    """Every fenced block of `page` (the README, or a page of docs/): ``(heading, ordinal under that heading,
    language, line, not-run reason)``; the heading is the nearest one above the block (any level), the ordinal
    counts from 0."""
    found, heading, seen, fence, reason = [], "", {}, None, None
    lines = page.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if fence is None and re.match(r"#{1,6} ", line):
            heading = line
        opened = FENCE.match(line)
        if opened:
            if fence is None:
                above = "\n".join(lines[max(0, number - 3):number - 1])
                marked = NOT_RUN.search(above)
                fence = (opened["language"], number, marked.group(1) if marked else None, opened["fence"])
            elif opened["fence"].startswith(fence[3]) and not opened["language"]:
                language, start, reason, _ = fence
                ordinal = seen.get(heading, 0)
                seen[heading] = ordinal + 1
                found.append((heading, ordinal, language, start, reason))
                fence = None
    return found
