"""Webhook sink throughput vs a plain ``requests.Session`` loop, against the same local HTTP receiver.

One run, two measurements over the same rows, cut into the same requests of ``--batch-size`` rows:

1. baseline: one ``requests.Session`` POSTing the prebuilt JSON bodies one after another (no Spark);
2. sink: ``impulse`` → ``webhook-sink`` with ``Trigger.AvailableNow`` on a warmed-up local Spark session
   (rows rendered from Arrow on the executors, ``--max-in-flight`` requests per partition).

The receiver runs in its own process (stdlib ``ThreadingHTTPServer``, HTTP/1.1 keep-alive): it reads each
body, counts its rows and answers ``200`` with an empty body. Both runs are checked against its counts.

    python bench/webhook_sink.py --rows 1000000 --batch-size 100 --json
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from connectors.options import OptionReader
from connectors.session import local_session
from impulse.options import ImpulseOptions
from impulse.source import ImpulseBatchReader
from sinks.webhook.bodies import Bodies
from sinks.webhook.options import WebhookOptions

# ------------------------------------------------------------------------------------------- receiver


class _Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address) -> None:
        super().__init__(address, _Handler)
        self.lock = threading.Lock()
        self.requests = self.rows = self.bytes = 0


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Receiver

    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        rows = body.count(b'{"counter"')
        with self.server.lock:
            self.server.requests += 1
            self.server.rows += rows
            self.server.bytes += len(body)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    do_PUT = do_PATCH = do_POST

    def do_GET(self) -> None:  # /stats, for the bench's progress line and checks
        with self.server.lock:
            payload = json.dumps({"requests": self.server.requests, "rows": self.server.rows,
                                  "bytes": self.server.bytes}).encode()
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload)
                         + payload)


def serve() -> None:
    """Run the receiver on a free loopback port; print the port; serve until stdin closes."""
    server = _Receiver(("127.0.0.1", 0))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


class Receiver:
    """The receiver process, seen from the bench."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as response:
            return json.loads(response.read())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


# ---------------------------------------------------------------------------------------------- runs


class Progress:
    """A progress line once a second: rows, rows/s, requests, errors (read from the receiver)."""

    def __init__(self, name: str, receiver: Receiver, quiet: bool) -> None:
        self.name, self.receiver, self.quiet = name, receiver, quiet
        self.start = receiver.stats()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.t0 = time.monotonic()
        if not self.quiet:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        next_tick = self.t0 + 1.0
        last_rows, last_t = 0, self.t0
        while not self._stop.wait(max(0.0, next_tick - time.monotonic())):
            next_tick += 1.0  # fixed schedule: the line does not drift
            now, stats = time.monotonic(), self.receiver.stats()
            rows = stats["rows"] - self.start["rows"]
            print(f"  {self.name}: {now - self.t0:6.1f}s {rows:>10,} rows {(rows - last_rows) / (now - last_t):>12,.0f} rows/s "
                  f"{stats['requests'] - self.start['requests']:>8,} requests", file=sys.stderr, flush=True)
            last_rows, last_t = rows, now


def bodies(rows: int, partitions: int, batch_size: int) -> list[tuple[str, bytes]]:
    """The sink's request bodies (and idempotency keys) for impulse's rows, cut the sink's way."""
    opts = WebhookOptions.read(OptionReader({"url": "http://127.0.0.1/", "batchSize": str(batch_size)}, name="bench"))
    reader = ImpulseBatchReader(ImpulseOptions.from_options({
        "eventsPerSecond": "1000000000", "numPartitions": str(partitions), "limit": str(rows), "startTime": "0"}))
    out = []
    for partition in reader.partitions():
        cut = Bodies(opts)
        made = [r.body() for batch in reader.read(partition) for r in cut.add(batch)] + [r.body() for r in cut.rest()]
        out += [(f"bench:0:{partition.subtask_index}:{k}", body) for k, body in enumerate(made)]
    return out


def run_baseline(receiver: Receiver, prebuilt: list[tuple[str, bytes]], quiet: bool) -> dict:
    import requests

    session = requests.Session()
    errors = 0
    with Progress("requests loop", receiver, quiet) as progress:
        for key, body in prebuilt:
            response = session.post(receiver.url + "/baseline", data=body,
                                    headers={"Content-Type": "application/json", "Idempotency-Key": key})
            errors += not 200 <= response.status_code < 300
        seconds = time.monotonic() - progress.t0
    session.close()
    return {"seconds": seconds, "errors": errors, **_delta(progress.start, receiver.stats())}


def run_sink(spark, receiver: Receiver, rows: int, partitions: int, batch_size: int, max_in_flight: int,
             quiet: bool, path: str = "/sink") -> dict:
    checkpoint = tempfile.mkdtemp(prefix="bench-webhook-")
    metrics = Path(checkpoint) / "metrics.jsonl"
    frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000_000).option("startTime", "0")
             .option("numPartitions", partitions).option("limit", rows).load())
    with Progress("webhook sink", receiver, quiet) as progress:
        query = (frame.writeStream.format("webhook-sink").option("url", receiver.url + path)
                 .option("batchSize", batch_size).option("maxInFlight", max_in_flight)
                 .option("metricsPath", str(metrics)).option("checkpointLocation", checkpoint + "/ck")
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        seconds = time.monotonic() - progress.t0
    batches = [json.loads(line) for line in metrics.read_text().splitlines()]
    write_s = (max(b["ackUs"] for b in batches) - min(b["writeStartUs"] for b in batches)) / 1e6
    return {"seconds": seconds, "write_seconds": write_s, "errors": 0, **_delta(progress.start, receiver.stats())}


def _delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in ("requests", "rows", "bytes")}


def spark_session(partitions: int):
    return local_session(f"local[{partitions}]", "bench-webhook-sink", **{"spark.driver.memory": "2g"})


def _check(name: str, run: dict, rows: int, requests: int) -> None:
    run["rows_per_s"] = run["rows"] / run["seconds"]
    run["requests_per_s"] = run["requests"] / run["seconds"]
    if "write_seconds" in run:
        run["write_rows_per_s"] = run["rows"] / run["write_seconds"]
    if run["rows"] != rows or run["requests"] != requests:
        run["errors"] += 1
        print(f"{name}: the receiver counted {run['rows']:,} rows in {run['requests']:,} requests, expected "
              f"{rows:,} in {requests:,}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per run (default 1,000,000)")
    parser.add_argument("--batch-size", type=int, default=100, help="rows per request (default 100)")
    parser.add_argument("--partitions", type=int, default=2, help="Spark partitions = tasks sending at once (default 2)")
    parser.add_argument("--max-in-flight", type=int, default=4, help="concurrent requests per task (default 4)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each, interleaved; the medians are compared (default 3)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return 0

    receiver = Receiver()
    result: dict = {"rows": args.rows, "batch_size": args.batch_size, "partitions": args.partitions,
                    "max_in_flight": args.max_in_flight, "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
                    "baseline_runs": [], "sink_runs": []}
    failed = True
    try:
        expected_requests = sum(-(-(args.rows // args.partitions + (p < args.rows % args.partitions)) // args.batch_size)
                                for p in range(args.partitions))
        print(f"preparing {expected_requests:,} request bodies and a Spark session…", file=sys.stderr, flush=True)
        prebuilt = bodies(args.rows, args.partitions, args.batch_size)
        spark = spark_session(args.partitions)
        run_sink(spark, receiver, min(args.rows, 200_000), args.partitions, args.batch_size, args.max_in_flight,
                 quiet=True, path="/warmup")  # JVM, Python workers and imports warmed up, not timed
        for i in range(args.repeat):
            baseline = run_baseline(receiver, prebuilt, args.quiet)
            _check("baseline", baseline, args.rows, expected_requests)
            sink = run_sink(spark, receiver, args.rows, args.partitions, args.batch_size, args.max_in_flight,
                            args.quiet, path=f"/sink{i}")
            _check("sink", sink, args.rows, expected_requests)
            result["baseline_runs"].append(baseline)
            result["sink_runs"].append(sink)
            print(f"run {i + 1}/{args.repeat}: loop {baseline['rows_per_s']:,.0f} rows/s, sink {sink['rows_per_s']:,.0f} "
                  f"rows/s (write phase {sink['write_rows_per_s']:,.0f})", file=sys.stderr, flush=True)
        for name, key in (("baseline", "rows_per_s"), ("sink", "rows_per_s"), ("sink_write", "write_rows_per_s")):
            runs = result["sink_runs" if name.startswith("sink") else "baseline_runs"]
            result[f"{name}_rows_per_s"] = statistics.median(r[key] for r in runs)
        for name in ("baseline", "sink"):
            result[f"{name}_requests_per_s"] = statistics.median(r["requests_per_s"] for r in result[f"{name}_runs"])
        result["ratio"] = result["sink_rows_per_s"] / result["baseline_rows_per_s"]
        result["write_ratio"] = result["sink_write_rows_per_s"] / result["baseline_rows_per_s"]
        failed = any(r["errors"] for r in result["baseline_runs"] + result["sink_runs"])
    finally:
        receiver.close()
        if "ratio" in result:
            r = result
            print(f"requests.Session loop: {r['baseline_rows_per_s']:>10,.0f} rows/s {r['baseline_requests_per_s']:>7,.0f} "
                  "requests/s", file=sys.stderr)
            print(f"webhook sink (query):  {r['sink_rows_per_s']:>10,.0f} rows/s {r['sink_requests_per_s']:>7,.0f} "
                  f"requests/s (write phase {r['sink_write_rows_per_s']:,.0f} rows/s)", file=sys.stderr)
            print(f"ratio sink/loop (medians of {args.repeat}): {r['ratio']:.2f}x (write phase {r['write_ratio']:.2f}x)",
                  file=sys.stderr)
        if args.json:
            print(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
