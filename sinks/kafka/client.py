"""The Kafka sink's client layer: confluent-kafka imported on demand, the clients a Python worker keeps
between tasks, and the translation of librdkafka's errors into the project's."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any, Callable

from connectors.errors import DeliveryError, FencedError, SinkError, TransientError, map_errors
from connectors.registry import import_extra
from sinks.kafka.options import KafkaOptions, log
from sinks.kafka.security import is_handshake_failure

__all__ = ["import_kafka", "import_kafka_admin", "IdleClients", "idle_producers", "idle_checkers", "idle_admins",
           "quietly", "REFUSED_AT_ONCE", "COORDINATOR_MOVING", "kafka_error_name", "translate", "mapped",
           "handshake_errors", "note_handshake_error"]


def import_kafka() -> ModuleType:
    """``confluent_kafka``, through the gate that names the ``kafka`` extra."""
    return import_extra("confluent_kafka", "kafka", "the kafka sink", "confluent-kafka")


def import_kafka_admin() -> ModuleType:
    """``confluent_kafka.admin``, through the same gate."""
    return import_extra("confluent_kafka.admin", "kafka", "the kafka sink", "confluent-kafka")


class IdleClients:
    """Clients a finished task or check left in this Python process, for the next one with the same settings.

    Spark keeps its Python workers between tasks and micro-batches (the writer's planner and committer
    are long-lived too), so a client can outlive the call that made it, as Spark's Kafka sink caches
    its producers per executor. Only a client whose last use succeeded is kept; one idle longer than
    ``max_idle_s`` is dropped (librdkafka closes it) at the next take or keep of any key.
    """

    def __init__(self, max_idle_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_idle_s = max_idle_s
        self.clock = clock
        self._clients: dict[tuple, tuple[Any, float]] = {}

    def take(self, key: tuple) -> Any | None:
        self._expire()
        client, _ = self._clients.pop(key, (None, 0.0))
        return client

    def keep(self, key: tuple, client: Any) -> None:
        self._expire()
        self._clients[key] = (client, self.clock())

    def _expire(self) -> None:
        now = self.clock()
        for key in [k for k, (_, since) in self._clients.items() if now - since > self.max_idle_s]:
            del self._clients[key]


# at_least_once producers between tasks: a task reuses the client, its connections and producer id (figures:
# bench/README.md). exactly_once makes a fresh producer per task attempt: its init_transactions is the fence.
idle_producers = IdleClients(max_idle_s=600.0)  # Spark's producer cache: 10 min
# The driver's metadata client between checks (every micro-batch, twice: planner and committer): a connected
# client answers without a new client's threads, connections and teardown.
idle_checkers = IdleClients(max_idle_s=60.0)
# The driver's admin client between partition checks (`KafkaSink.committed_beyond`, every micro-batch), and
# executors' between reads of topic limits (`KafkaSink.topic_limits`).
idle_admins = IdleClients(max_idle_s=60.0)


def quietly(call: Callable[[], Any]) -> None:
    """Clean-up after a failure: its own errors would hide the one that matters (the next writer fences anyway)."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - clean-up after a failure: that failure is the one to raise
        log.debug("kafka-sink: clean-up call failed: %s", exc)


# -- error translation ------------------------------------------------------------------------------

_FENCED = {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FATAL"}
_REFUSED = {  # the broker (or librdkafka on its behalf) refused the record: a retry cannot help
    "MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION",
    "INVALID_RECORD", "RECORD_LIST_TOO_LARGE", "TOPIC_AUTHORIZATION_FAILED", "POLICY_VIOLATION", "INVALID_TIMESTAMP",
    "TOPIC_EXCEPTION", "UNSUPPORTED_FOR_MESSAGE_FORMAT", "CORRUPT_MESSAGE", "_INVALID_ARG", "_KEY_SERIALIZATION",
    "_VALUE_SERIALIZATION",
}
REFUSED_AT_ONCE = {10}  # librdkafka's codes for a record it refuses itself, for what it is: MSG_SIZE_TOO_LARGE


def kafka_error_name(code: int) -> str:
    return import_kafka().KafkaError(code).name()


COORDINATOR_MOVING = {"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                      "UNSTABLE_OFFSET_COMMIT"}
_NOT_ALLOWED = {"TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
                "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION", "_SSL"}
_BROKEN = {"_STATE", "_NOT_CONFIGURED", "_CONFLICT", "INVALID_TXN_STATE", "_INVALID_TYPE", "INVALID_TRANSACTION_TIMEOUT",
           "UNSUPPORTED_VERSION", "_UNSUPPORTED_FEATURE", "UNSUPPORTED_FOR_MESSAGE_FORMAT"}


def translate(err, opts: KafkaOptions, doing: str, more: str = "") -> SinkError:
    """The project's error for a librdkafka `KafkaError`: what a retry may fix is a `TransientError`."""
    code = err.name()
    where = f"kafka-sink: {doing} at {opts.bootstrap}"
    reason = f"{err.str()}{more}"
    if code in _REFUSED:
        return DeliveryError(f"{where}: the broker refused the record: {reason}")
    if opts.exactly_once and (err.fatal() or code in _FENCED):
        return FencedError(f"{where}: this writer was fenced by a newer one with the same transactional id "
                           f"(another attempt of this partition, or another query with the same "
                           f"transactionalIdPrefix and commit id): {reason}")
    if code in _NOT_ALLOWED:
        return SinkError(f"{where}: {reason} (the principal needs Write on the topics and, for exactly_once, Write "
                         f"on the transactional ids and Read on the groups '{opts.transactional_id_prefix}-*')")
    if code in _BROKEN and not err.retriable() and not err.txn_requires_abort():
        return SinkError(f"{where}: {reason}")
    # Lost brokers, timeouts, moving coordinators, an aborted transaction; at_least_once: also a fatal
    # idempotence error, which a new producer (the retry) does not have.
    return TransientError(f"{where}: {reason}")


def mapped(opts: KafkaOptions, doing: str):
    """Translate confluent-kafka errors into the project's at this boundary (``raise … from exc``)."""
    return map_errors(lambda exc: _from_client(exc, opts, doing))


def _from_client(exc: Exception, opts: KafkaOptions, doing: str) -> SinkError | None:
    kafka = import_kafka()
    cause = exc
    # confluent-kafka raises a fatal error from poll()/flush(); when a delivery callback runs while it is
    # pending, Python reports a SystemError caused by that KafkaException.
    if isinstance(exc, SystemError) and isinstance(exc.__cause__, kafka.KafkaException):
        cause = exc.__cause__
    if not isinstance(cause, kafka.KafkaException):
        return None
    err = cause.args[0] if cause.args else None
    if isinstance(err, kafka.KafkaError):
        return translate(err, opts, doing)
    return SinkError(f"kafka-sink: {doing} at {opts.bootstrap}: {cause}")


#: The last error librdkafka reported in the background to the driver's check client of these settings (its
#: `_idle_key`): a failed security handshake shows there, while `list_topics` only says "transport failure".
handshake_errors: dict[tuple, Any] = {}


def note_handshake_error(key: tuple, err) -> None:
    """A check client's ``error_cb``: keep a failed authentication or TLS handshake (a refused client certificate
    included), the cause a timeout hides."""
    if is_handshake_failure(err.name(), err.str()):
        handshake_errors[key] = err
