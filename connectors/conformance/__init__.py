"""The connector conformance suite: reusable pytest tests proving a sink keeps the offset-commit protocol.

See `connectors.conformance.suite` for the cases and how to run them for a sink, and
``python -m connectors.conformance --help`` to run them from the command line against a target.
"""

from importlib import import_module

from connectors.conformance.adapter import SinkAdapter

__all__ = ["SinkAdapter", "SinkConformance", "expected_events", "run_query"]

_LAZY = {"SinkConformance": "suite", "expected_events": "harness", "run_query": "harness"}


def __getattr__(name: str) -> object:
    """The suite's names, imported on first use: the suite needs pytest, and ``python -m connectors.conformance``
    must be able to say so (and print its ``--help``) where pytest is not installed."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
