"""The conformance suite bound to the target named on the command line (see ``__main__``)."""

from __future__ import annotations

import json
import os

import pytest

from connectors.conformance.suite import SinkConformance


def adapter_from_environment():
    target = json.loads(os.environ["IMPULSE_CONFORMANCE_TARGET"])
    if target["sink"] == "redis-sink":
        from connectors.conformance.adapters import RedisAdapter

        return RedisAdapter(target["url"], target=target["target"])
    from connectors.conformance.adapters import KafkaAdapter

    return KafkaAdapter(target["bootstrap"])


class TestConformance(SinkConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls):
        return adapter_from_environment()
