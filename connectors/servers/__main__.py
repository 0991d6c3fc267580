"""``python -m connectors.servers``: fetch what the servers need, or run one server in the foreground.

``serve KIND`` first imports the Python client the server is started with (its ``client_library``): without
it, it refuses at once, naming the extra to install (exit 2, one line on stderr). It prints ``KIND ready at
ADDRESS …`` (flushed, so a redirected stdout has it at once) when the server answers, and runs until Ctrl-C or
SIGTERM (exit 0); a server that cannot start exits 1 with its reason, without a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Iterable

import connectors.servers as servers
from connectors.servers.secured import SECURED_KINDS, secured_server

PROG = "python -m connectors.servers"

SERVERS = {"kafka": servers.KafkaBroker, "redis": servers.RedisServer, "redis-cluster": servers.RedisCluster,
           "http": servers.Receiver, "spark-cluster": servers.SparkStandaloneCluster,
           "spark-connect": servers.SparkConnectServer, "toxiproxy": servers.Toxiproxy,
           "schema-registry": servers.SchemaRegistry}
_ADDRESS = {"kafka": "bootstrap", "spark-cluster": "master_url"}   # the attribute "ready at" shows; others: url


def main(argv: Iterable[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=servers.__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch-kafka", help="download the Kafka jars into the cache (no-op when present)")
    sub.add_parser("fetch-schema-registry", help="download Apicurio Registry into the cache (no-op when present)")
    sub.add_parser("fetch-toxiproxy", help="build the pinned Toxiproxy server into the cache with `go install` "
                                           "(no-op when present)")
    serve = sub.add_parser("serve", help="run one server in the foreground until Ctrl-C or SIGTERM")
    serve.add_argument("kind", choices=list(SERVERS))
    serve.add_argument("--topic", action="append", default=[], type=_topic, metavar="NAME[:PARTITIONS]",
                       help="kafka: create this topic (default 1 partition) once the broker is up; repeatable. "
                            "The broker does not create topics on first use")
    serve.add_argument("--secured", action="store_true",
                       help=f"{', '.join(SECURED_KINDS)}: secured as the tests have them (TLS, a user 'impulse' with a "
                            "random password, client certificates from a throwaway CA); prints the sink options")
    args = parser.parse_args(list(argv))
    if args.command == "serve" and args.topic and args.kind != "kafka":
        parser.error("--topic is for 'serve kafka'")
    if args.command == "serve" and args.secured and args.kind not in SECURED_KINDS:
        parser.error(f"--secured is for {', '.join(SECURED_KINDS)}, not {args.kind}")
    if args.command == "fetch-kafka":
        print(servers.fetch_kafka())
        return 0
    if args.command == "fetch-schema-registry":
        print(servers.fetch_schema_registry())
        return 0
    if args.command == "fetch-toxiproxy":
        print(servers.fetch_toxiproxy())
        return 0
    return _serve(args.kind, args.topic, args.secured)


def _serve(kind: str, topics: list[tuple[str, int]], secured: bool = False) -> int:
    """Run the server of `kind` until Ctrl-C or SIGTERM; the exit code (see the module docstring)."""
    cls = SERVERS[kind]
    try:
        if cls.client_library is not None:
            cls.client_library.require(f"serve {kind}")
    except servers.ServerError as exc:
        return _error(str(exc), 2)
    stack = contextlib.ExitStack()
    server, ways_in = cls(), None
    if secured:
        ca_dir = Path(tempfile.mkdtemp(prefix="impulse-serve-ca-"))
        stack.callback(shutil.rmtree, ca_dir, ignore_errors=True)
        server, ways_in = secured_server(kind, ca_dir)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the server's JVM or process as Ctrl-C does
    try:
        with stack, contextlib.suppress(KeyboardInterrupt), server:
            for name, partitions in topics:
                server.create_topic(name, partitions)
            print(f"{kind} ready at {_where(kind, server)}"
                  + "".join(f"; topic {name} ({partitions} partitions)" for name, partitions in topics)
                  + "; Ctrl-C to stop", flush=True)
            for line in ways_in() if ways_in is not None else []:
                print(f"  {line}", flush=True)
            signal.pause()
    except servers.ServerError as exc:
        return _error(f"serve {kind}: {exc}", 1)
    return 0


def _where(kind: str, server) -> str:
    """The server's address for its "ready at" line (a cluster's nodes, a process's directory)."""
    address = getattr(server, _ADDRESS.get(kind, "url"))
    if kind == "redis-cluster":
        address += " (nodes: " + ", ".join(server.urls) + "; clients: redis-cli -c -p PORT)"
    return address + (f" (dir {server.dir})" if hasattr(server, "dir") else "")


def _error(message: str, code: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    return code


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _topic(text: str) -> tuple[str, int]:
    """``NAME[:PARTITIONS]`` → ``(name, partitions)``."""
    name, _, count = text.partition(":")
    if not name or (count and not (count.isdigit() and int(count) >= 1)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME or NAME:PARTITIONS with PARTITIONS ≥ 1")
    return name, int(count or 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
