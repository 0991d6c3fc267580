"""`ruff check` with the project's configuration (pyproject.toml's ``[tool.ruff]``) finds nothing in what the package
ships: impulse/, sinks/, connectors/ and the pyspark_* entry points. Its output is the failure message.

ruff comes with the ``test`` extra (setup.cfg), which tests/run installs."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ruff() -> list[str]:
    """The command that runs ruff: this interpreter's install (the test extra's pin), else the one on PATH."""
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    assert found, "ruff is not installed: pip install -e '.[test]' (tests/run does)"
    return [found]


def test_ruff_finds_nothing():
    done = subprocess.run([*ruff(), "check", "--no-cache", "--output-format", "concise", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"ruff check found problems:\n{done.stdout}{done.stderr}"


def test_ruff_checks_the_shipped_packages():
    done = subprocess.run([*ruff(), "check", "--show-files", "."], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    files = {Path(line).resolve().relative_to(ROOT).parts[0] for line in done.stdout.splitlines()
             if line.endswith(".py")}
    assert {"impulse", "sinks", "connectors", "pyspark_impulse.py"} <= files, done.stdout + done.stderr
    assert not files & {"tests", "bench", "examples", "docs"}, sorted(files)
