"""``python -m connectors.servers``: fetch what the servers need, or run one server in the foreground."""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Iterable

import connectors.servers as servers


def main(argv: Iterable[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m connectors.servers", description=servers.__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch-kafka", help="download the Kafka jars into the cache (no-op when present)")
    serve = sub.add_parser("serve", help="run one server in the foreground until Ctrl-C")
    serve.add_argument("kind", choices=["kafka", "redis", "http", "spark-cluster", "spark-connect"])
    args = parser.parse_args(list(argv))
    if args.command == "fetch-kafka":
        print(servers.fetch_kafka())
        return 0
    server = {"kafka": servers.KafkaBroker, "redis": servers.RedisServer, "http": servers.Receiver,
              "spark-cluster": servers.SparkStandaloneCluster, "spark-connect": servers.SparkConnectServer}[args.kind]()
    with server:
        address = getattr(server, {"kafka": "bootstrap", "spark-cluster": "master_url"}.get(args.kind, "url"))
        where = f" (dir {server.dir})" if hasattr(server, "dir") else ""
        print(f"{args.kind} ready at {address}{where}; Ctrl-C to stop", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
