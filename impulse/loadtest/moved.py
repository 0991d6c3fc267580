"""The harness's module paths that moved into its sub-packages and still import, for one release.

Each old path in `MOVED` is a thin module (``impulse/loadtest/run.py``, …) that calls `alias`: importing it warns
(`DeprecationWarning`, naming the new path) and gives the moved module itself, so every name, and anything a caller
patches, is the new module's. The old paths are those users may have imported: the homes of the names of
``impulse.loadtest.__all__`` and the modules the documentation names. The harness's own code imports the new paths.
"""

from __future__ import annotations

import importlib
import sys
import warnings

__all__ = ["MOVED", "alias"]

#: old module path → the module it moved to
MOVED = {
    "impulse.loadtest.bound": "impulse.loadtest.measure.bound",
    "impulse.loadtest.config": "impulse.loadtest.settings.config",
    "impulse.loadtest.display": "impulse.loadtest.load.display",
    "impulse.loadtest.latency_names": "impulse.loadtest.measure.latency_names",
    "impulse.loadtest.ramp": "impulse.loadtest.load.ramp",
    "impulse.loadtest.report": "impulse.loadtest.reports.report",
    "impulse.loadtest.run": "impulse.loadtest.load.run",
    "impulse.loadtest.target": "impulse.loadtest.settings.target",
    "impulse.loadtest.verdict": "impulse.loadtest.reports.verdict",
}


def alias(old: str) -> None:
    """Make the module being imported as `old` the module it moved to, warning the importer of the new path."""
    new = MOVED[old]
    warnings.warn(f"{old} has moved to {new}: import it from there (the old path goes in the next release)",
                  DeprecationWarning, stacklevel=3)  # 3: the importer's line (the import machinery's frames skipped)
    sys.modules[old] = importlib.import_module(new)
