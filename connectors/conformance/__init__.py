"""The connector conformance suite: reusable pytest tests proving a sink keeps the offset-commit protocol.

See `connectors.conformance.suite` for the cases and how to run them for a sink, and
``python -m connectors.conformance --help`` to run them from the command line against a target.
"""

from connectors.conformance.adapter import SinkAdapter
from connectors.conformance.suite import SinkConformance, expected_events, run_query

__all__ = ["SinkAdapter", "SinkConformance", "expected_events", "run_query"]
