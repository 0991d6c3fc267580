"""The README's accounts-to-Redis cookbook in its own driver process, for the SIGKILL test:
``python -m tests.sinks.redis_changelog_driver '<json: url, checkpoint>'`` runs the block until it ends."""

from __future__ import annotations

import json
import sys

from connectors.session import local_session
from tests.readme import DOCS, python_block


def cookbook(url: str, checkpoint: str) -> str:
    """The README block, with the test server's address and a checkpoint of the test's own."""
    block = python_block("## Changelogs: `changelog.key`", page=DOCS / "how-to" / "related-streams.md")
    assert block.count('"redis://localhost:6379/0"') == 1 and block.count('"/tmp/ck-accounts"') == 1
    return block.replace('"redis://localhost:6379/0"', repr(url)).replace('"/tmp/ck-accounts"', repr(checkpoint))


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    namespace = {"spark": local_session("local[2]", "changelog-driver")}
    exec(compile(cookbook(args["url"], args["checkpoint"]), "README.md", "exec"), namespace)  # noqa: S102
    namespace["query"].awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
