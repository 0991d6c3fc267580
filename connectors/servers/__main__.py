"""``python -m connectors.servers``: fetch what the servers need, or run one server in the foreground."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from typing import Iterable

import connectors.servers as servers


def main(argv: Iterable[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m connectors.servers", description=servers.__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch-kafka", help="download the Kafka jars into the cache (no-op when present)")
    sub.add_parser("fetch-schema-registry", help="download Apicurio Registry into the cache (no-op when present)")
    sub.add_parser("fetch-toxiproxy", help="build the pinned Toxiproxy server into the cache with `go install` "
                                           "(no-op when present)")
    serve = sub.add_parser("serve", help="run one server in the foreground until Ctrl-C or SIGTERM")
    serve.add_argument("kind", choices=["kafka", "redis", "redis-cluster", "http", "spark-cluster", "spark-connect",
                                       "toxiproxy", "schema-registry"])
    serve.add_argument("--topic", action="append", default=[], type=_topic, metavar="NAME[:PARTITIONS]",
                       help="kafka: create this topic (default 1 partition) once the broker is up; repeatable. "
                            "The broker does not create topics on first use")
    args = parser.parse_args(list(argv))
    if args.command == "serve" and args.topic and args.kind != "kafka":
        parser.error("--topic is for 'serve kafka'")
    if args.command == "fetch-kafka":
        print(servers.fetch_kafka())
        return 0
    if args.command == "fetch-schema-registry":
        print(servers.fetch_schema_registry())
        return 0
    if args.command == "fetch-toxiproxy":
        print(servers.fetch_toxiproxy())
        return 0
    server = {"kafka": servers.KafkaBroker, "redis": servers.RedisServer, "redis-cluster": servers.RedisCluster,
              "http": servers.Receiver, "spark-cluster": servers.SparkStandaloneCluster,
              "spark-connect": servers.SparkConnectServer, "toxiproxy": servers.Toxiproxy,
              "schema-registry": servers.SchemaRegistry}[args.kind]()
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the server's JVM or process as Ctrl-C does
    with contextlib.suppress(KeyboardInterrupt), server:
        for name, partitions in args.topic:
            server.create_topic(name, partitions)
        address = getattr(server, {"kafka": "bootstrap", "spark-cluster": "master_url"}.get(args.kind, "url"))
        where = f" (dir {server.dir})" if hasattr(server, "dir") else ""
        if args.kind == "redis-cluster":
            address += " (nodes: " + ", ".join(server.urls) + "; clients: redis-cli -c -p PORT)"
        topics = "".join(f"; topic {name} ({partitions} partitions)" for name, partitions in args.topic)
        print(f"{args.kind} ready at {address}{where}{topics}; Ctrl-C to stop", flush=True)
        signal.pause()
    return 0


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
