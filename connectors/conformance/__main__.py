"""Run the conformance suite from the command line against a target you name.

    python -m connectors.conformance redis-sink --url redis://localhost:6379/0 [--target list]
    python -m connectors.conformance kafka-sink --bootstrap localhost:9092
    python -m connectors.conformance redis-sink --url … -- -k fault -x     # after --: pytest arguments

The suite writes under unique key prefixes / topics and removes what it wrote. A Spark session
(``local[2,2]``) is started in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

SINKS = ("redis-sink", "kafka-sink")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    split = argv.index("--") if "--" in argv else len(argv)
    own, pytest_args = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(prog="python -m connectors.conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("sink", choices=SINKS, help="the sink's format name")
    parser.add_argument("--url", help="redis-sink: redis:// URL of the target")
    parser.add_argument("--target", default="list", choices=("list", "string", "hash", "stream"),
                        help="redis-sink: the Redis data type to write (default: list)")
    parser.add_argument("--bootstrap", help="kafka-sink: bootstrap servers, host:port[,host:port]")
    args = parser.parse_args(own)
    needed = {"redis-sink": "url", "kafka-sink": "bootstrap"}[args.sink]
    if not getattr(args, needed):
        parser.error(f"{args.sink} needs --{needed}")
    return args, pytest_args


def main(argv: list[str] | None = None) -> int:
    import pytest

    args, pytest_args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ["IMPULSE_CONFORMANCE_TARGET"] = json.dumps(vars(args))
    suite = Path(__file__).with_name("cli_suite.py")
    # -o addopts=: run in this process, whatever a pytest configuration around the checkout adds (this
    # repository's runs its own tests on two xdist workers).
    return pytest.main([str(suite), "-o", "addopts=", "-p", "connectors.conformance.plugin", "-q", *pytest_args])


if __name__ == "__main__":
    sys.exit(main())
