"""The real command line: the one-liner with the embedded default, Ctrl-C, and the exit code 2 errors.

One run is a subprocess of the installed ``impulse-load`` with its own Spark (``--master local[2]``),
stopped with SIGINT; the complete run and the error cases call ``main()`` in-process (the errors end
before Spark is needed; the run reuses the shared session).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from impulse.loadtest.cli import main
from tests.loadtest.helpers import assert_latency_plausible, assert_report_files
from connectors.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
PERF_LINE = re.compile(r"^[\d,]+ events sent, [\d,.]+ events/sec \([\d,.]+ MB/sec\), [\d,.]+ ms avg latency, "
                       r"[\d,.]+ ms max latency\.$")


def _command() -> list[str]:
    """The installed console script (proves the entry point), next to this interpreter."""
    script = Path(sys.executable).with_name("impulse-load")
    if script.exists():
        return [str(script)]
    found = shutil.which("impulse-load")
    assert found, "impulse-load is not installed: pip install --config-settings editable_mode=compat -e ."
    return [found]


class _Process:
    """A subprocess whose stdout lines are collected by a thread (so the test can wait for one)."""

    def __init__(self, args: list[str]) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        self.stderr = ""
        self._out = threading.Thread(target=self._read, daemon=True)
        self._err = threading.Thread(target=lambda: setattr(self, "stderr", self.proc.stderr.read()), daemon=True)
        self._out.start()
        self._err.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, pattern: re.Pattern, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((line for line in self.lines if pattern.search(line)), None)
            if found is not None:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.kill()
        pytest.fail(f"no line matching {pattern.pattern!r}; output:\n" + "\n".join(self.lines) + self.stderr[-3000:])

    def finish(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("impulse-load did not exit; output:\n" + "\n".join(self.lines))
        self._out.join(10)
        self._err.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


@pytest.mark.integration
@pytest.mark.webhook
def test_the_embedded_default_runs_to_completion_in_process(spark, tmp_path, capsys):
    # main() in this process reuses the shared session (and leaves it running)
    code = main(["--duration", "3s", "--rate", "2000", "--output", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"embedded HTTP receiver at http://127\.0\.0\.1:\d+/events", out)
    assert "impulse-load summary: webhook-sink, 2 partitions, 64 B payload, trigger 1s, completed" in out
    assert re.search(r"events\s+6,000\s+6,000", out)
    assert "embedded receiver: 6,000 rows accepted" in out and "= the committed events" in out
    assert re.search(r"latency \(ms\)\s+p50\s+p95\s+p99\s+p99\.9\s+p99\.99\s+max", out)
    for part in ("end-to-end", "schedule delay", "delivery"):
        assert re.search(rf"^\s+{part}(\s+[\d,.]+){{6}}$", out, re.MULTILINE), part
    assert re.search(r"triggerExecution\s+[\d,.]+\s+[\d,]+", out)
    assert f"report: {tmp_path / 'report.json'}" in out
    report = assert_report_files(tmp_path, 6_000)
    assert report["summary"]["sink"] == "webhook-sink" and report["receiver"]["rows"] == 6_000
    assert report["config"]["options"]["format"] == "ndjson"
    assert_latency_plausible(report["latencyMs"], report["batches"][-1]["timeS"])
    assert spark.range(1).count() == 1  # the shared session still works


@pytest.mark.integration
@pytest.mark.slow
def test_the_one_liner_runs_everything_and_ctrl_c_still_writes_the_report(tmp_path):
    """The installed command with the embedded default (receiver, local Spark), stopped by SIGINT once it reports."""
    run = _Process(_command() + ["--rate", "2000", "--duration", "10m", "--master", "local[2]",
                                 "--output", str(tmp_path)])
    try:
        run.wait_for_line(PERF_LINE, timeout=240)  # the load is running: a kafka-producer-perf-test line
        run.proc.send_signal(signal.SIGINT)
        code = run.finish(timeout=120)
    finally:
        run.kill()
    out = run.output
    assert code == 130, out + run.stderr[-3000:]
    assert re.search(r"embedded HTTP receiver at http://127\.0\.0\.1:\d+/events", out)
    assert re.search(r"^\s+[\d.]+s\s+[\d,]+ ev/s of 2,000 \(\d+%\)\s+lag [\d,]+\s+batches \d+\s+delivered [\d,]+/1,200,000$",
                     out, re.MULTILINE)  # the live line (plain, every 5 s: stdout is a pipe)
    assert "stopping after the running micro-batch" in out
    assert "impulse-load summary: webhook-sink, 2 partitions, 64 B payload, trigger 1s, interrupted" in out
    assert "Traceback" not in run.stderr

    report = json.loads((tmp_path / "report.json").read_text())
    events = report["summary"]["events"]
    assert 0 < events < 1_200_000 and report["summary"]["outcome"] == "interrupted"
    # stopped between batches: the receiver has every committed event (and at most a cut batch more)
    assert report["receiver"]["rows"] >= events
    assert_report_files(tmp_path, events)
    assert_latency_plausible(report["latencyMs"], report["batches"][-1]["timeS"])


# ---------------------------------------------------------------- errors: exit code 2, one line, no traceback


def _error_of(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("impulse-load: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


def test_cli_errors_exit_2_with_one_line(capsys):
    port = free_port()
    assert f"cannot reach Redis at redis://127.0.0.1:{port}" in _error_of(
        capsys, "--sink", "redis-sink", "-o", f"url=redis://127.0.0.1:{port}")
    assert "for option 'topic'" in _error_of(capsys, "--sink", "kafka-sink", "-o", "kafka.bootstrap.servers=127.0.0.1:9")
    assert "unknown option 'keyPrefx'" in _error_of(
        capsys, "--sink", "redis-sink", "-o", f"url=redis://127.0.0.1:{port}", "-o", "keyPrefx=t")
    assert "option 'url'" in _error_of(capsys, "--sink", "webhook-sink", "-o", "url=ftp://example.com")
    assert "--rate" in _error_of(capsys, "--rate", "fast")
    assert "--ramp" in _error_of(capsys, "--sink", "noop", "--ramp", "10k:10k")
    assert "replay: invalid value None for option 'path'" in _error_of(capsys, "--source", "replay", "--check")


@pytest.mark.integration
@pytest.mark.redis
def test_the_harness_runs_against_a_redis_cluster(spark, redis_cluster, tmp_path, capsys):
    prefix = f"load-{uuid.uuid4().hex[:8]}:"
    code = main(["--sink", "redis-sink", "-o", f"url={redis_cluster.url}", "-o", "cluster=true", "-o",
                 f"keyPrefix={prefix}", "--duration", "3s", "--rate", "2000", "--output", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "impulse-load summary: redis-sink" in out and re.search(r"events\s+6,000\s+6,000", out)
    # every event a string key of its own, on whichever primary: counted with redis-cli -c on each primary
    landed = sum(len(redis_cluster.cli("--scan", "--pattern", f"{prefix}*", address=p.address).split())
                 for p in redis_cluster.primaries())
    assert landed == 6_000
