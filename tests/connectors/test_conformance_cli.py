"""`python -m connectors.conformance`: the command a third party runs the suite with."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_runs_the_suite_in_its_own_process():
    """Run from this checkout, whose setup.cfg adds xdist workers for our own tests: the CLI must not."""
    done = subprocess.run([sys.executable, "-m", "connectors.conformance", "redis-sink", "--url",
                           "redis://127.0.0.1:1/0", "--", "-k", "no_such_case"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 5, done.stdout[-2000:] + done.stderr[-2000:]  # 5: ran, no case selected
    assert "bringing up nodes" not in done.stdout, done.stdout[-2000:]
    deselected = int(done.stdout.rsplit(" deselected", 1)[0].split()[-1])
    assert deselected > 10  # the whole suite was collected


def test_webhook_sink_runs_against_the_reference_receiver():
    """No target to name: the CLI starts the project's deduping receiver and the suite passes against it,
    a network case included (the plugin starts Toxiproxy; the adapter's network_route puts it in front)."""
    done = subprocess.run([sys.executable, "-m", "connectors.conformance", "webhook-sink", "--",
                           "-k", "basic_write or bad_network"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]


def test_an_unknown_sink_lists_the_registry():
    done = subprocess.run([sys.executable, "-m", "connectors.conformance", "no-such-sink"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "redis-sink" in done.stderr and "webhook-sink" in done.stderr, done.stderr[-2000:]


_WITHOUT_PYTEST = """
import runpy, sys
sys.modules["pytest"] = None  # as where pytest is not installed: importing it raises ModuleNotFoundError
sys.argv = ["python -m connectors.conformance", *sys.argv[1:]]
runpy.run_module("connectors.conformance", run_name="__main__", alter_sys=True)
"""


def test_without_pytest_the_cli_names_the_install_command_and_its_help_works():
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", _WITHOUT_PYTEST, *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    done = run("redis-sink", "--url", "redis://127.0.0.1:1/0")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "runs on pytest, which is not installed" in done.stderr, done.stderr[-2000:]
    assert 'pip install "impulse-connectors[conformance]"' in done.stderr
    assert "Traceback" not in done.stderr
    helped = run("--help")
    assert helped.returncode == 0, helped.stderr[-2000:]
    text = " ".join(helped.stdout.split())
    assert "pytest arguments go after '--'" in text and "impulse-connectors[conformance]" in text
    extras = (ROOT / "setup.cfg").read_text(encoding="utf-8").split("[options.extras_require]")[1]
    assert "\nconformance =\n    pytest" in extras  # the install command the message names installs pytest
