"""The project's one HTTP receiver (`connectors.servers.receiver.Receiver`) as the tests use it: dedupes by
Idempotency-Key, refuses a key reused with another body, answers as told, restarts on its port."""

from __future__ import annotations

import socket
import threading

import pytest

from connectors.servers import wait_until
from connectors.servers.receiver import Receiver


@pytest.fixture
def receiver(http_receiver):
    http_receiver.reset()
    yield http_receiver
    http_receiver.reset()


@pytest.mark.integration
@pytest.mark.webhook
def test_receiver_dedupes_by_idempotency_key(receiver):
    import requests

    with requests.Session() as session:
        for body, key in [(b"a", "k1"), (b"a", "k1"), (b"b", "k2"), (b"no-key-1", None), (b"no-key-2", None)]:
            headers = {"Idempotency-Key": key} if key else {}
            response = session.post(f"{receiver.url}/hook", data=body, headers=headers, timeout=10)
            assert response.status_code == 200
        # the key reused with another body: refused, as the Idempotency-Key draft says (not a duplicate)
        reused = session.post(f"{receiver.url}/hook", data=b"a-changed", headers={"Idempotency-Key": "k1"}, timeout=10)
        assert reused.status_code == 422 and "k1" in reused.json()["detail"]
        assert reused.headers["Content-Type"] == "application/problem+json"
        assert reused.json()["title"] == "Idempotency-Key is already used"
    assert receiver.accepted == [b"a", b"b", b"no-key-1", b"no-key-2"]
    assert len(receiver.requests) == 6
    assert [r.duplicate for r in receiver.requests] == [False, True, False, False, False, False]
    assert [r.status for r in receiver.requests] == [200] * 5 + [422]
    assert receiver.requests[0].path == "/hook" and receiver.requests[0].idempotency_key == "k1"


@pytest.mark.integration
@pytest.mark.webhook
def test_receiver_fail_next_and_respond_with(receiver):
    import requests

    receiver.fail_next(2, status=429, headers={"Retry-After": "1"})
    answers = [requests.post(receiver.url, data=f"{i}", headers={"Idempotency-Key": "same"}, timeout=10) for i in range(3)]
    assert [a.status_code for a in answers] == [429, 429, 200]
    assert answers[0].headers["Retry-After"] == "1"
    assert receiver.accepted == [b"2"]  # failed requests are not accepted, so the retry's key is still free

    receiver.respond_with(500, body=b"boom")
    assert requests.post(receiver.url, data=b"x", timeout=10).status_code == 500
    receiver.reset_behaviour()
    assert requests.post(receiver.url, data=b"y", timeout=10).status_code == 200
    assert receiver.accepted == [b"2", b"y"]


@pytest.mark.integration
@pytest.mark.webhook
def test_receiver_delay_next_makes_clients_time_out(receiver):
    import requests

    receiver.delay_next(1, 2.0)
    with pytest.raises(requests.exceptions.Timeout):
        requests.post(receiver.url, data=b"slow", headers={"Idempotency-Key": "s"}, timeout=0.3)
    retry = requests.post(receiver.url, data=b"slow", headers={"Idempotency-Key": "s"}, timeout=10)
    assert retry.status_code == 200 and retry.json()["duplicate"] is True
    assert wait_until(lambda: len(receiver.requests) == 2, timeout=5)
    assert receiver.accepted == [b"slow"]


@pytest.mark.integration
@pytest.mark.webhook
def test_receiver_restart_on_same_port():
    import requests

    with Receiver(record=True) as receiver, requests.Session() as session:
        url = receiver.url
        assert session.post(url, data=b"1", timeout=5).status_code == 200  # keeps the connection alive
        receiver.stop()
        with pytest.raises(requests.exceptions.ConnectionError):
            session.post(url, data=b"while-down", timeout=5)
        receiver.start()
        assert receiver.url == url
        assert session.post(url, data=b"2", timeout=5).status_code == 200
        assert receiver.accepted == [b"1", b"2"]


@pytest.mark.integration
@pytest.mark.webhook
def test_receiver_is_thread_safe(receiver):
    import requests

    def send(worker):
        with requests.Session() as session:
            for i in range(25):
                session.post(receiver.url, data=f"{i % 10}", headers={"Idempotency-Key": f"{i % 10}"}, timeout=10)

    threads = [threading.Thread(target=send, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(receiver.requests) == 100
    assert len(receiver.accepted) == 10


@pytest.mark.integration
@pytest.mark.webhook
def test_receiver_connections_send_without_nagle_delay(receiver):
    """Every kept-alive connection has TCP_NODELAY: the stdlib sends an answer's headers and body in two
    writes, and with Nagle's algorithm the body would wait for the client's delayed ACK (40 ms a request)."""
    import requests

    with requests.Session() as session:
        assert session.post(receiver.url, data=b"x", timeout=10).status_code == 200
        with receiver._server.connections_lock:
            connections = list(receiver._server.connections)
        assert connections, "the receiver dropped the kept-alive connection"
        assert all(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for c in connections)
