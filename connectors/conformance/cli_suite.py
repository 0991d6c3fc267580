"""The conformance suite bound to the target named on the command line (see ``__main__``)."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from connectors.conformance.__main__ import ENVIRONMENT
from connectors.conformance.suite import SinkConformance
from connectors.registry import connector


def target_arguments() -> argparse.Namespace:
    """What ``python -m connectors.conformance`` parsed: the sink's name and its adapter's arguments."""
    return argparse.Namespace(**json.loads(os.environ[ENVIRONMENT]))


class TestConformance(SinkConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls):
        args = target_arguments()
        with connector(args.sink).adapter_class().from_arguments(args) as adapter:
            yield adapter
