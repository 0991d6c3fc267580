"""pytest plugin for running the conformance suite outside this repository's tests.

``pytest_plugins = ["connectors.conformance.plugin"]`` gives a session ``spark`` fixture (``local[2,2]``:
two cores, one task retry, every data source of this project registered) and a session ``toxiproxy``
fixture (`connectors.servers.toxiproxy.Toxiproxy`, built with ``go install`` on first use, for the network
cases); a conftest that defines its own fixture of either name wins over this one.
"""

from __future__ import annotations

import pytest

from connectors.servers.toxiproxy import Toxiproxy
from connectors.session import local_session


@pytest.fixture(scope="session")
def spark():
    session = local_session("local[2,2]", "conformance", **{"spark.sql.shuffle.partitions": 2})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def toxiproxy():
    with Toxiproxy.from_env() as server:
        yield server
