"""PySpark's data-source lookup imports every top-level ``pyspark_*`` module, and one failed import hides every
Python format: each of ours must import with none of the extras installed (no client library, no hdrhistogram)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from connectors.registry import connectors

ROOT = Path(__file__).resolve().parents[1]
# what the extras install, by import name: each sink's client libraries, and the harness's and sinks' own
EXTRAS = sorted({module for row in connectors() for module in row.preload}
                | {"hdrh", "prometheus_client", "matplotlib", "requests"})

_PROBE = """
import importlib, sys
blocked = set(sys.argv[1].split(","))
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"No module named {name!r} (an extra that is not installed)")
sys.meta_path.insert(0, Absent())
for module in sys.argv[2:]:
    source = importlib.import_module(module).DefaultSource
    print(module, source.name())
"""


def test_every_entry_point_imports_without_the_extras():
    modules = sorted(p.stem for p in ROOT.glob("pyspark_*.py"))
    assert len(modules) >= len(connectors())
    done = subprocess.run([sys.executable, "-c", _PROBE, ",".join(EXTRAS), *modules], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    names = [line.split()[1] for line in done.stdout.splitlines()]
    assert set(names) >= {row.name for row in connectors()}
