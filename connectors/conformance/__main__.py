"""Run the conformance suite from the command line against a target you name.

    python -m connectors.conformance redis-sink --url redis://localhost:6379/0 [--target list]
    python -m connectors.conformance kafka-sink --bootstrap localhost:9092
    python -m connectors.conformance webhook-sink [--url http://host:port]  # default: a local deduping receiver
    python -m connectors.conformance redis-sink --url … -- -k fault -x     # after --: pytest arguments

The suite runs on pytest: the `conformance` extra installs it (``pip install "impulse-connectors[conformance]"``).

The sinks and their arguments come from `connectors.registry` (each sink's conformance adapter adds
its own). The suite writes under unique key prefixes / topics / URL paths and removes what it wrote.
A Spark session (``local[2,2]``) is started in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from connectors.registry import sinks

ENVIRONMENT = "IMPULSE_CONFORMANCE_TARGET"


def install_text() -> str:
    """What installs the suite's own dependency (pytest), with the sink extras a run needs (`connectors.registry`)."""
    extras = [row.extra for row in sinks() if row.extra]
    named = f"{', '.join(extras[:-1])} or {extras[-1]}" if len(extras) > 1 else "".join(extras)
    return f"python3 -m pip install \"impulse-connectors[conformance]\" (add the sink's extra: {named})"


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    split = argv.index("--") if "--" in argv else len(argv)
    own, pytest_args = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(prog="python -m connectors.conformance", description=__doc__.split("\n\n")[0],
                                     epilog="pytest arguments go after '--', e.g. `python -m connectors.conformance "
                                            "redis-sink --url redis://localhost:6379/0 -- -k fault -x`. The suite "
                                            f"runs on pytest: {install_text()}")
    commands = parser.add_subparsers(dest="sink", required=True, metavar="sink",
                                     help="the sink's format name: " + ", ".join(row.name for row in sinks()))
    for row in sinks():
        adapter = row.adapter_class()
        row_parser = commands.add_parser(row.name, help=(adapter.__doc__ or "").split("\n\n")[0].strip())
        adapter.add_arguments(row_parser)
    return parser.parse_args(own), pytest_args


def main(argv: list[str] | None = None) -> int:
    args, pytest_args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import pytest  # noqa: PLC0415 - the conformance extra's pytest
    except ImportError:
        print(f"python -m connectors.conformance: the conformance suite runs on pytest, which is not installed: "
              f"{install_text()}", file=sys.stderr)
        return 2
    os.environ[ENVIRONMENT] = json.dumps(vars(args))
    suite = Path(__file__).with_name("cli_suite.py")
    # -o addopts=: run in this process, whatever a pytest configuration around the checkout adds (this
    # repository's runs its own tests on two xdist workers).
    return pytest.main([str(suite), "-o", "addopts=", "-p", "connectors.conformance.plugin", "-q", *pytest_args])


if __name__ == "__main__":
    sys.exit(main())
