"""The real test servers themselves (connectors/servers/) do what the sink tests rely on."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from connectors.conformance.network import cut_points
from connectors.servers import KAFKA_VERSION, RedisCluster, RedisServer, fetch_kafka, free_port, kafka_jars_dir, wait_until
from connectors.servers.base import unclaimed_port
from connectors.servers.kafka import KAFKA_POM, pom_digest
from connectors.servers.tap import DOWN, UP, Tap

# ------------------------------------------------------------------------------------------- helpers


def test_an_unclaimed_port_is_bindable_and_outside_the_ports_the_os_gives_outgoing_connections():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(20):
        port = unclaimed_port()
        assert 1024 <= port < low
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_wait_until_returns_value_and_times_out():
    start = time.monotonic()
    assert wait_until(lambda: time.monotonic() - start > 0.1 and "done", timeout=5) == "done"
    with pytest.raises(TimeoutError, match="the impossible"):
        wait_until(lambda: False, timeout=0.2, message="the impossible")


def test_the_pom_and_the_readme_name_the_kafka_version_of_the_package():
    """One Kafka version: the package's constant, the pom Maven resolves the broker's jars from, and every
    "Kafka X.Y.Z" of the README."""
    pom = ET.parse(KAFKA_POM).getroot()
    assert pom.findtext("m:properties/m:kafka.version", namespaces={"m": "http://maven.apache.org/POM/4.0.0"}) \
        == KAFKA_VERSION
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    mentioned = re.findall(r"\bKafka (\d+\.\d+\.\d+)\b", readme)
    assert mentioned and set(mentioned) == {KAFKA_VERSION}, mentioned


def test_the_kafka_jar_cache_is_keyed_by_the_pom_without_its_comments(tmp_path):
    """A comment edited in the pom keeps the cached jars; another dependency version is another cache folder."""
    text = KAFKA_POM.read_text()
    commented = tmp_path / "commented.xml"
    commented.write_text(text.replace("<project ", "<!-- another comment -->\n<project ", 1))
    bumped = tmp_path / "bumped.xml"
    bumped.write_text(text.replace(f"<kafka.version>{KAFKA_VERSION}<", "<kafka.version>0.0.1<", 1))
    assert pom_digest(commented) == pom_digest(KAFKA_POM) != pom_digest(bumped)
    assert kafka_jars_dir().name == f"kafka-{KAFKA_VERSION}-{pom_digest()[:12]}"


# --------------------------------------------------------------------------------------------- Redis


@pytest.mark.integration
@pytest.mark.redis
def test_redis_set_get(redis_server):
    client = redis_server.client()
    key = f"test-servers:{uuid.uuid4().hex}"
    client.set(key, b"value")
    assert client.get(key) == b"value"
    assert redis_server.url.startswith("redis://")


@pytest.mark.integration
@pytest.mark.redis
def test_redis_restart_with_persistence_keeps_data():
    with RedisServer(persistence=True) as server:
        port = server.port
        server.client().set("k", "v")
        server.restart()
        assert server.port == port
        assert server.client().get("k") == b"v"


@pytest.mark.integration
@pytest.mark.redis
def test_redis_without_persistence_keeps_data_over_a_restart_not_over_a_stop():
    with RedisServer() as server:
        server.client().set("k", "v")
        server.restart()  # SHUTDOWN SAVE: a snapshot the new process loads
        assert server.client().get("k") == b"v"
        server.stop()  # SHUTDOWN NOSAVE
        (server.dir / "dump.rdb").unlink()
        server.start()
        assert server.client().get("k") is None


# ------------------------------------------------------------------------------------------ Redis Cluster


@pytest.mark.integration
@pytest.mark.redis
def test_redis_cluster_has_three_primaries_with_a_replica_each_and_serves_every_slot(redis_cluster):
    primaries = redis_cluster.primaries()
    assert len(primaries) == 3
    assert sorted(slot for node in primaries for first, last in node.slots for slot in range(first, last + 1)) \
        == list(range(16384))
    assert all(len(redis_cluster.replicas_of(node)) == 1 for node in primaries)
    client = redis_cluster.client()
    try:
        prefix = f"test-servers:{uuid.uuid4().hex}"
        keys = [f"{prefix}:{i}" for i in range(60)]
        for key in keys:
            client.set(key, key.upper())
        owners = {redis_cluster.node_for_key(key).id for key in keys}
        assert owners == {node.id for node in primaries}, "60 keys should land on every primary"
        read = redis_cluster.cli(commands=[f"GET {key}" for key in keys], address=primaries[0].address)
        assert read.splitlines() == [f'"{key.upper()}"' for key in keys]
    finally:
        client.close()


@pytest.mark.integration
@pytest.mark.redis
def test_redis_cluster_half_migrated_slot_answers_ask_then_moved_once_done(redis_cluster):
    import redis

    key = f"test-servers:{uuid.uuid4().hex}"
    slot = int(redis_cluster.execute("CLUSTER", "KEYSLOT", key))
    source = redis_cluster.node_for_slot(slot)
    target = next(node for node in redis_cluster.primaries() if node.id != source.id)
    on_source = redis_cluster.node_client(source.address)
    try:
        on_source.set(key, b"before")
        redis_cluster.migrate_slot(slot, target, finish=False)
        missing = f"{{{key}}}:absent"  # same slot, not on the source: the source sends the client to the target
        with pytest.raises(redis.exceptions.AskError) as ask:
            on_source.execute_command("GET", missing)
        assert (ask.value.slot_id, f"{ask.value.host}:{ask.value.port}") == (slot, target.address)
        assert on_source.get(key) == b"before"  # keys still on the source are served there
        redis_cluster.finish_migration(slot, source, target)
        assert redis_cluster.node_for_slot(slot).id == target.id
        with pytest.raises(redis.exceptions.MovedError) as moved:
            on_source.execute_command("GET", key)
        assert (moved.value.slot_id, f"{moved.value.host}:{moved.value.port}") == (slot, target.address)
        assert redis_cluster.cli("GET", key, address=source.address) == '"before"'
    finally:
        on_source.close()
        if redis_cluster.node_for_slot(slot).id != source.id:  # leave the slot where it was
            redis_cluster.migrate_slot(slot, source)


@pytest.mark.integration
@pytest.mark.redis
def test_redis_cluster_kill_primary_promotes_its_replica_with_the_acknowledged_writes(redis_cluster):
    key = f"test-servers:{uuid.uuid4().hex}"
    slot = int(redis_cluster.execute("CLUSTER", "KEYSLOT", key))
    old = redis_cluster.node_for_slot(slot)
    replica = redis_cluster.replicas_of(old)[0]
    on_old = redis_cluster.node_client(old.address)
    try:
        on_old.set(key, b"acknowledged")
        assert on_old.execute_command("WAIT", 1, 10_000) == 1  # on the replica before the primary dies
    finally:
        on_old.close()
    try:
        new = redis_cluster.kill_primary(slot)
        assert new.id == replica.id
        assert redis_cluster.cli("GET", key, address=new.address) == '"acknowledged"'
    finally:
        redis_cluster.revive()
    again = {node.id: node for node in redis_cluster.topology()}
    assert again[old.id].connected and not again[old.id].primary and again[old.id].primary_id == replica.id


@pytest.mark.integration
@pytest.mark.redis
def test_redis_cluster_reshard_moves_slots_and_their_keys(redis_cluster):
    from sinks.redis.slots import slot_tag

    source, target = redis_cluster.primaries()[:2]
    before = {slot for first, last in source.slots for slot in range(first, last + 1)}
    tag = uuid.uuid4().hex
    keys = {slot: f"{{{slot_tag(slot)}}}:test-servers:{tag}" for slot in sorted(before)[:20]}  # one key per slot
    on_source = redis_cluster.node_client(source.address)
    on_target = redis_cluster.node_client(target.address)
    try:
        for key in keys.values():
            on_source.set(key, b"moved")
        redis_cluster.reshard(5, source, target)
        now = next(n for n in redis_cluster.topology() if n.id == source.id)
        after = {slot for first, last in now.slots for slot in range(first, last + 1)}
        moved = before - after
        assert len(moved) == 5 and all(redis_cluster.node_for_slot(slot).id == target.id for slot in moved)
        assert redis_cluster.cli(commands=[f"GET {key}" for key in keys.values()]).splitlines() == ['"moved"'] * len(keys)
        assert moved <= set(keys), "redis-cli moves the source's first slots"
        assert [on_target.get(keys[slot]) for slot in sorted(moved)] == [b"moved"] * 5  # served there, no MOVED
        assert [on_source.get(keys[slot]) for slot in sorted(set(keys) - moved)] == [b"moved"] * (len(keys) - 5)
    finally:
        on_source.close()
        on_target.close()
        still = next(n for n in redis_cluster.topology() if n.id == source.id)
        for slot in sorted(before - {s for first, last in still.slots for s in range(first, last + 1)}):
            redis_cluster.migrate_slot(slot, source)  # back where they were (a reshard back might pick others)
    assert all(redis_cluster.node_for_slot(slot).id == source.id for slot in moved)


@pytest.mark.integration
@pytest.mark.redis
def test_serve_redis_cluster_prints_its_nodes_and_sigterm_stops_them():
    with _serve("redis-cluster") as (serve, ready):
        assert "redis-cluster ready at redis://" in ready, ready + serve.stdout.read()[-3000:]
        entry = ready.split("ready at redis://")[1].split()[0]
        assert "cluster_state:ok" in RedisCluster.external(f"redis://{entry}").cli("CLUSTER", "INFO")
        pids = {int(line.split()[0]) for line in subprocess.run(
            ["pgrep", "-P", str(serve.pid), "-a", "redis-server"], capture_output=True, text=True).stdout.splitlines()}
        assert len(pids) == 6, pids
        _stop_with_sigterm(serve, pids, "the cluster's nodes", timeout=30)


# --------------------------------------------------------------------------------------------- Kafka


def _transactional_producer(broker, name):
    producer = broker.producer(**{"transactional.id": f"test-servers-{name}-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    return producer


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_jars_fetched_once_into_the_cache():
    jars = fetch_kafka()
    assert jars == kafka_jars_dir()
    assert (jars / ".complete").is_file()
    assert (jars / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file()
    start = time.monotonic()
    assert fetch_kafka() == jars
    assert time.monotonic() - start < 1  # cached: no Maven run


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_committed_visible_aborted_invisible(kafka_broker):
    topic = kafka_broker.create_topic(f"servers-txn-{uuid.uuid4().hex[:8]}", partitions=2)
    producer = _transactional_producer(kafka_broker, "txn")

    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"committed-{i}".encode(), key=str(i).encode(), partition=i % 2)
    producer.commit_transaction(30)

    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)  # the aborted records really reach the log before the abort
    producer.abort_transaction(30)

    committed = sorted(m.value() for m in kafka_broker.consume_all(topic))
    assert committed == [f"committed-{i}".encode() for i in range(4)]
    everything = sorted(m.value() for m in kafka_broker.consume_all(topic, isolation="read_uncommitted"))
    assert everything == sorted([f"committed-{i}".encode() for i in range(4)] + [f"aborted-{i}".encode() for i in range(3)])


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_open_transaction_is_not_read(kafka_broker):
    topic = kafka_broker.create_topic(f"servers-open-{uuid.uuid4().hex[:8]}")
    producer = _transactional_producer(kafka_broker, "open")
    producer.begin_transaction()
    producer.produce(topic, value=b"pending")
    producer.flush(30)
    assert kafka_broker.consume_all(topic, timeout=20) == []
    producer.commit_transaction(30)
    assert [m.value() for m in kafka_broker.consume_all(topic)] == [b"pending"]


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_read_right_after_a_commit_sees_the_whole_transaction(kafka_broker):
    """The commit markers are written after commit_transaction returns: before `read_topic` waited for them, a
    read_committed read at once missed a whole partition in 1 to 3 of 20 tries, and this test failed in 2 of 3 runs."""
    producer = _transactional_producer(kafka_broker, "at-once")
    for attempt in range(10):
        topic = kafka_broker.create_topic(f"servers-at-once-{attempt}-{uuid.uuid4().hex[:8]}", partitions=2)
        producer.begin_transaction()
        for i in range(1000):
            producer.produce(topic, value=str(i).encode(), partition=i % 2)
        producer.commit_transaction(30)
        assert len(kafka_broker.consume_all(topic)) == 1000, f"attempt {attempt}"


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_restart_keeps_committed_data(kafka_broker):
    if not kafka_broker.managed:
        pytest.skip("KAFKA_BROKERS points at an external broker, which these tests cannot restart")
    topic = kafka_broker.create_topic(f"servers-restart-{uuid.uuid4().hex[:8]}")
    producer = _transactional_producer(kafka_broker, "restart")
    producer.begin_transaction()
    producer.produce(topic, value=b"before-restart")
    producer.commit_transaction(30)
    bootstrap = kafka_broker.bootstrap

    kafka_broker.restart()

    assert kafka_broker.bootstrap == bootstrap
    assert [m.value() for m in kafka_broker.consume_all(topic)] == [b"before-restart"]
    after = _transactional_producer(kafka_broker, "after-restart")  # the coordinator works again
    after.begin_transaction()
    after.produce(topic, value=b"after-restart")
    after.commit_transaction(30)
    # commit_transaction returns once the coordinator logged the commit; the markers reach the partition
    # after that (and a restarted broker is slower), so the record becomes visible to read_committed soon.
    values = lambda: [m.value() for m in kafka_broker.consume_all(topic)]  # noqa: E731
    wait_until(lambda: values() == [b"before-restart", b"after-restart"], timeout=30,
               message=lambda: f"read_committed sees {values()}")




# --------------------------------------------------------------------------------- Toxiproxy and the tap


def _echo_server():
    """A loopback server answering each chunk with the same bytes: one reply per request."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn):
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener


def _exchange(address: str, requests: list[bytes]) -> list[bytes]:
    """Send each request and read its whole echo; stop at the first broken one (what came back so far)."""
    host, port = address.rsplit(":", 1)
    replies = []
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        for request in requests:
            try:
                sock.sendall(request)
                reply = b""
                while len(reply) < len(request):
                    chunk = sock.recv(65536)
                    if not chunk:
                        return replies + [reply]
                    reply += chunk
            except OSError:
                return replies
            replies.append(reply)
    return replies


@pytest.mark.integration
def test_toxiproxy_limit_data_cuts_at_the_byte_and_the_tap_records_turns(toxiproxy):
    listener = _echo_server()
    requests = [b"a" * 10, b"b" * 20, b"c" * 30]
    with Tap(f"127.0.0.1:{listener.getsockname()[1]}") as tap:
        proxy = toxiproxy.proxy(tap.address)
        try:
            assert _exchange(proxy.listen, requests) == requests
            wait_until(lambda: tap.snapshot() and tap.snapshot()[0].closed, 5)
            [conversation] = tap.snapshot()
            assert conversation.turns == [(d, len(r)) for r in requests for d in (UP, DOWN)]
            # per request: inside it, after it; after each reply but the last
            cuts = cut_points(conversation, ("inside_request", "after_request", "after_reply"))
            assert [(c.kind, c.direction, c.size) for c in cuts][:3] == [
                ("inside_request", UP, 9), ("after_request", UP, 10), ("after_reply", DOWN, 10)]
            assert len(cuts) == 3 * len(requests) - 1

            tap.reset()
            proxy.add_toxic("limit_data", DOWN, bytes=30)  # after the second reply: the third never comes back
            got = _exchange(proxy.listen, requests)  # the close reads as an empty reply, or a reset as none
            assert got[:2] == requests[:2] and got[2:] in ([], [b""])
            assert tap.wait_for_cut(DOWN, 30, 5) is not None
            proxy.clear()
            assert proxy.toxics() == [] and _exchange(proxy.listen, requests) == requests

            # a reset placed by the tap after the second request (30 bytes up, 10 down): the connection is reset
            # before that request reaches the server: the first reply comes back, not the third
            [reset] = [c for c in cut_points(conversation, ("reset_after_request",)) if c.size == 30]
            assert (reset.direction, reset.other, str(reset).split()[0]) == (UP, 10, "reset")
            tap.reset()
            tap.trigger(UP, reset.size, lambda: proxy.add_toxic("reset_peer", UP, timeout=0), other=reset.other)
            got = _exchange(proxy.listen, requests)
            assert got[:1] == requests[:1] and got != requests and tap.wait_for_trigger(5) is not None
            assert len(tap.triggered.turns) >= 3  # fired on the connection that carried the first round trip
            proxy.clear()
            assert _exchange(proxy.listen, requests) == requests

            # the same point on a conversation whose turns before it differ (a longer first request):
            # the bytes are reached, the recorded turns are not, so the tap lets the connection be
            tap.reset()
            tap.trigger(UP, reset.size, lambda: proxy.add_toxic("reset_peer", UP, timeout=0), other=reset.other,
                        accept=reset.landed)
            other = [requests[0] + b"a" * 5, *requests[1:]]
            assert _exchange(proxy.listen, other) == other and tap.triggered is None
            tap.disarm()
        finally:
            proxy.delete()
    listener.close()


def _descendants(pid: int) -> set[int]:
    """Every process below `pid` (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        for child in (task / "children").read_text().split():
            found |= {int(child)} | _descendants(int(child))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _kill(pids) -> None:
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@contextmanager
def _serve(*args: str, out: Path | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    """``python -m connectors.servers serve ARGS…`` started, with its first line (``… ready at …``); on exit, if it is
    still running, it and everything below it are killed (a failed test leaves no server behind).

    With `out`, its stdout is redirected to that file (as a shell's ``> FILE``), and the first line is read from the
    file once it is there (polled for 60 s, or until the process exits)."""
    root = Path(__file__).resolve().parents[1]
    with open(out, "w") if out is not None else open(os.devnull) as sink:
        serve = subprocess.Popen([sys.executable, "-m", "connectors.servers", "serve", *args], cwd=root,
                                 stdout=subprocess.PIPE if out is None else sink, stderr=subprocess.STDOUT, text=True)
    try:
        if out is None:
            yield serve, serve.stdout.readline()
        else:
            wait_until(lambda: "\n" in out.read_text() or serve.poll() is not None, 60, 0.05,
                       f"a first line in {out}")
            yield serve, out.read_text().partition("\n")[0]
    finally:
        if serve.poll() is None:
            _kill(_descendants(serve.pid))
            serve.kill()
            serve.wait(30)


def _jvm_and_the_rest_below(serve: subprocess.Popen) -> set[int]:
    """Every process below `serve`, a JVM among them (else the test would check nothing)."""
    children = _descendants(serve.pid)
    assert any("java" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
               for pid in children if _alive(pid)), "no JVM under serve: the test checks nothing"
    return children


def _stop_with_sigterm(serve: subprocess.Popen, children: set[int], what: str, timeout: float = 60.0) -> None:
    """SIGTERM (a plain `kill`): `serve` exits 0 and every one of `children` exits within `timeout` seconds; any
    left then is killed."""
    try:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0
        wait_until(lambda: not any(_alive(pid) for pid in children), timeout, 0.1, f"{what} to exit after SIGTERM")
    finally:
        _kill(children)


def test_serve_kafka_creates_topics_and_sigterm_stops_its_jvm():
    """`python -m connectors.servers serve kafka --topic NAME:PARTITIONS`: the topic exists once it says ready,
    and SIGTERM (a plain `kill`) stops the broker's JVM as Ctrl-C does, instead of leaving it running."""
    from confluent_kafka.admin import AdminClient

    with _serve("kafka", "--topic", "orders:3", "--topic", "events") as (serve, ready):
        assert "kafka ready at" in ready, ready + serve.stdout.read()[-3000:]
        bootstrap = ready.split("ready at ")[1].split()[0]
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
        assert len(topics["orders"].partitions) == 3 and len(topics["events"].partitions) == 1, topics
        _stop_with_sigterm(serve, _jvm_and_the_rest_below(serve), "serve's JVMs")


def test_schema_registry_fetched_once_into_the_cache():
    from connectors.servers import APICURIO_VERSION, fetch_schema_registry

    home = fetch_schema_registry()
    assert (home / ".complete").is_file() and APICURIO_VERSION in home.name
    runner = home / (home / ".runner").read_text().strip()
    assert runner.is_file() and runner.name.endswith("-runner.jar")
    assert fetch_schema_registry() == home


@pytest.mark.integration
def test_schema_registry_registers_and_refuses_what_its_subject_rule_refuses(schema_registry):
    """Confluent's API: a schema registered under a subject gets an id that reads back the same text; with the
    subject's compatibility set to BACKWARD, a new version adding a field without a default is refused (409)."""
    import json

    from connectors.servers import ServerError

    subject = f"servers-{uuid.uuid4().hex[:8]}-value"
    v1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}
    answer = schema_registry.request("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(v1)})
    assert isinstance(answer["id"], int)
    assert json.loads(schema_registry.request("GET", f"/schemas/ids/{answer['id']}")["schema"]) == v1
    assert subject in schema_registry.subjects()
    schema_registry.set_compatibility(subject, "BACKWARD")
    v2 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string"}]}
    with pytest.raises(ServerError, match="HTTP 409"):
        schema_registry.request("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(v2)})


@pytest.mark.integration
@pytest.mark.redis
def test_serve_flushes_its_ready_line_into_a_redirected_stdout(tmp_path):
    """`serve redis > FILE`: the "ready at" line is in the file while the server runs (not held in a buffer until
    it exits), and the address it names answers."""
    import redis

    with _serve("redis", out=tmp_path / "serve.out") as (serve, ready):
        assert serve.poll() is None and "redis ready at redis://127.0.0.1:" in ready, (tmp_path / "serve.out").read_text()
        assert redis.Redis.from_url(ready.split("ready at ")[1].split()[0], socket_timeout=5).ping()
        _stop_with_sigterm(serve, _descendants(serve.pid), "redis-server")


@pytest.mark.parametrize("kind, module, extra", [("redis", "redis", "redis"), ("redis-cluster", "redis", "redis"),
                                                 ("kafka", "confluent_kafka", "kafka")])
def test_serve_refuses_at_once_without_its_client_library(kind, module, extra, tmp_path):
    """A `module`.py that raises ImportError, first on PYTHONPATH, stands for a machine without the extra: `serve`
    exits 2 at once (not after its readiness timeout) naming the extra, without a traceback or a server."""
    (tmp_path / f"{module}.py").write_text(f"raise ImportError('{module} is not installed here (a test stand-in)')\n")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    shadowed = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=root, env=env, capture_output=True,
                              text=True, timeout=60)
    assert shadowed.returncode == 1 and "a test stand-in" in shadowed.stderr  # the stand-in does hide the library

    started = time.monotonic()
    serve = subprocess.run([sys.executable, "-m", "connectors.servers", "serve", kind], cwd=root, env=env,
                           capture_output=True, text=True, timeout=60)
    assert serve.returncode == 2, serve.stdout + serve.stderr
    assert time.monotonic() - started < 15  # the redis readiness timeout is 20 s, Kafka's 120 s
    package = "confluent-kafka" if module == "confluent_kafka" else module
    assert serve.stderr == (f"python -m connectors.servers: error: serve {kind} needs {package}: "
                            f"pip install 'impulse-connectors[{extra}]'\n")
    assert "ready at" not in serve.stdout


def test_serve_that_cannot_start_exits_1_with_its_reason_and_no_traceback(tmp_path):
    """No redis-server on the PATH (an empty directory is the whole PATH): one line saying what to install."""
    root = Path(__file__).resolve().parents[1]
    serve = subprocess.run([sys.executable, "-m", "connectors.servers", "serve", "redis"], cwd=root,
                           env={**os.environ, "PATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert serve.returncode == 1, serve.stdout + serve.stderr
    assert serve.stderr.startswith("python -m connectors.servers: error: serve redis: redis-server is not installed")
    assert "Traceback" not in serve.stderr and "ready at" not in serve.stdout


def test_serve_schema_registry_answers_and_sigterm_stops_its_jvm():
    """`python -m connectors.servers serve schema-registry` prints the Confluent API's URL once it answers, and
    SIGTERM stops its JVM."""
    import json
    import urllib.request

    with _serve("schema-registry") as (serve, ready):
        assert "schema-registry ready at http://127.0.0.1:" in ready, ready + serve.stdout.read()[-3000:]
        url = ready.split("ready at ")[1].split()[0]
        assert url.endswith("/apis/ccompat/v7")
        with urllib.request.urlopen(url + "/subjects", timeout=10) as response:
            assert json.loads(response.read()) == []
        _stop_with_sigterm(serve, _jvm_and_the_rest_below(serve), "serve's JVM")
