"""A librdkafka producer that takes Arrow columns whole: the Kafka sink's write path.

confluent-kafka's ``Producer.produce()`` takes one record per Python call and, for every record,
allocates a delivery state and takes the GIL again when its delivery report is served (its
``delivery.report.only.error`` is emulated in Python). This module calls the same librdkafka that
confluent-kafka ships (``confluent_kafka.libs``), through `ctypes`, with:

- ``rd_kafka_produce_batch``: one call per Arrow record batch and topic; each message's value and
  key point into the Arrow buffers and are copied by librdkafka (``RD_KAFKA_MSG_F_COPY``), so the
  batch may be released as soon as the call returns. No Python object per record.
- librdkafka's own ``delivery.report.only.error``: a delivered record costs the Python thread
  nothing; a failed one reaches `ArrowProducer.failures` when `poll`/`flush` serve it.
- the transactional calls (``init_transactions`` … ``commit_transaction``) with the progress
  offsets of a group given by its id (``rd_kafka_consumer_group_metadata_new``).

Errors are raised as ``confluent_kafka.KafkaException(KafkaError(...))``, with librdkafka's code,
reason and fatal / retriable / abortable flags, so callers handle them as they would
confluent-kafka's own. Records with headers or a timestamp, which ``produce_batch`` cannot carry,
go through ``rd_kafka_produceva`` one call per record (vectors built with numpy).

Ordering: records of one topic partition are enqueued in row order. When the local queue is full
(``queue.buffering.max.messages`` / ``.kbytes``) librdkafka refuses that record and every later
one of the call, so the producer serves delivery reports and resumes from the first refused record:
back-pressure, never a drop and never a reorder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from ctypes import CFUNCTYPE, POINTER, c_char_p, c_int, c_int32, c_int64, c_size_t, c_ssize_t, c_void_p
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, requires
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from sinks.kafka.client import import_kafka

__all__ = ["ArrowProducer", "library", "UnsupportedLibrdkafka", "supported_range"]

_PRODUCER = 0
_F_COPY = 0x2
_F_PARTITION = 0x8
_PURGE_QUEUE, _PURGE_INFLIGHT = 0x1, 0x2
_ERR_QUEUE_FULL = -184
_ERR_INVALID_ARG = -186
_ERR_UNKNOWN_PARTITION = -190
_PARTITION_UA = -1
_QUEUE_FULL_WAIT_MS = 50
_EMPTY = ctypes.create_string_buffer(1)  # where an empty (not null) value points when Arrow has no data buffer

# rd_kafka_message_t (rdkafka.h): err, rkt, partition, payload, len, key, key_len, offset, _private.
_MESSAGE = np.dtype({
    "names": ["err", "rkt", "partition", "payload", "len", "key", "key_len", "offset", "private"],
    "formats": ["<i4", "<u8", "<i4", "<u8", "<u8", "<u8", "<u8", "<i8", "<u8"],
    "offsets": [0, 8, 16, 24, 32, 40, 48, 56, 64], "itemsize": 72,
})
# rd_kafka_vu_t: a vtype and a 64-byte union (pointer, size, ... at offsets 8, 16, 24).
_VU = np.dtype({"names": ["vtype", "a", "b"], "formats": ["<i4", "<u8", "<u8"], "offsets": [0, 8, 16],
                "itemsize": 72})
_VT_RKT, _VT_PARTITION, _VT_VALUE, _VT_KEY, _VT_OPAQUE, _VT_MSGFLAGS, _VT_TIMESTAMP, _VT_HEADERS = 2, 3, 4, 5, 6, 7, 8, 10


class _Message(ctypes.Structure):
    _fields_ = [("err", c_int), ("rkt", c_void_p), ("partition", c_int32), ("payload", c_void_p),
                ("len", c_size_t), ("key", c_void_p), ("key_len", c_size_t), ("offset", c_int64),
                ("private", c_void_p)]


class _TopicPartition(ctypes.Structure):  # rd_kafka_topic_partition_t
    _fields_ = [("topic", c_char_p), ("partition", c_int32), ("offset", c_int64), ("metadata", c_void_p),
                ("metadata_size", c_size_t), ("opaque", c_void_p), ("err", c_int), ("private", c_void_p)]


class _MetadataTopic(ctypes.Structure):
    _fields_ = [("topic", c_char_p), ("partition_cnt", c_int), ("partitions", c_void_p), ("err", c_int)]


class _Metadata(ctypes.Structure):
    _fields_ = [("broker_cnt", c_int), ("brokers", c_void_p), ("topic_cnt", c_int),
                ("topics", POINTER(_MetadataTopic)), ("orig_broker_id", c_int32), ("orig_broker_name", c_char_p)]


_DeliveryCallback = CFUNCTYPE(None, c_void_p, POINTER(_Message), c_void_p)

_SIGNATURES: dict[str, tuple[Any, list]] = {
    "rd_kafka_version": (c_int, []),
    "rd_kafka_conf_new": (c_void_p, []),
    "rd_kafka_conf_set": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_size_t]),
    "rd_kafka_conf_set_dr_msg_cb": (None, [c_void_p, _DeliveryCallback]),
    "rd_kafka_conf_destroy": (None, [c_void_p]),
    "rd_kafka_new": (c_void_p, [c_int, c_void_p, c_char_p, c_size_t]),
    "rd_kafka_destroy": (None, [c_void_p]),
    "rd_kafka_topic_new": (c_void_p, [c_void_p, c_char_p, c_void_p]),
    "rd_kafka_topic_destroy": (None, [c_void_p]),
    "rd_kafka_topic_name": (c_char_p, [c_void_p]),
    "rd_kafka_produce_batch": (c_int, [c_void_p, c_int32, c_int, c_void_p, c_int]),
    "rd_kafka_produceva": (c_void_p, [c_void_p, c_void_p, c_size_t]),
    "rd_kafka_headers_new": (c_void_p, [c_size_t]),
    "rd_kafka_header_add": (c_int, [c_void_p, c_char_p, c_ssize_t, c_char_p, c_ssize_t]),
    "rd_kafka_headers_destroy": (None, [c_void_p]),
    "rd_kafka_poll": (c_int, [c_void_p, c_int]),
    "rd_kafka_flush": (c_int, [c_void_p, c_int]),
    "rd_kafka_outq_len": (c_int, [c_void_p]),
    "rd_kafka_purge": (c_int, [c_void_p, c_int]),
    "rd_kafka_fatal_error": (c_int, [c_void_p, c_char_p, c_size_t]),
    "rd_kafka_metadata": (c_int, [c_void_p, c_int, c_void_p, POINTER(POINTER(_Metadata)), c_int]),
    "rd_kafka_metadata_destroy": (None, [POINTER(_Metadata)]),
    "rd_kafka_err2str": (c_char_p, [c_int]),
    "rd_kafka_init_transactions": (c_void_p, [c_void_p, c_int]),
    "rd_kafka_begin_transaction": (c_void_p, [c_void_p]),
    "rd_kafka_send_offsets_to_transaction": (c_void_p, [c_void_p, c_void_p, c_void_p, c_int]),
    "rd_kafka_commit_transaction": (c_void_p, [c_void_p, c_int]),
    "rd_kafka_abort_transaction": (c_void_p, [c_void_p, c_int]),
    "rd_kafka_consumer_group_metadata_new": (c_void_p, [c_char_p]),
    "rd_kafka_consumer_group_metadata_destroy": (None, [c_void_p]),
    "rd_kafka_topic_partition_list_new": (c_void_p, [c_int]),
    "rd_kafka_topic_partition_list_add": (POINTER(_TopicPartition), [c_void_p, c_char_p, c_int32]),
    "rd_kafka_topic_partition_list_set_offset": (c_int, [c_void_p, c_char_p, c_int32, c_int64]),
    "rd_kafka_topic_partition_list_destroy": (None, [c_void_p]),
    "rd_kafka_error_code": (c_int, [c_void_p]),
    "rd_kafka_error_string": (c_char_p, [c_void_p]),
    "rd_kafka_error_is_fatal": (c_int, [c_void_p]),
    "rd_kafka_error_is_retriable": (c_int, [c_void_p]),
    "rd_kafka_error_txn_requires_abort": (c_int, [c_void_p]),
    "rd_kafka_error_destroy": (None, [c_void_p]),
}


class UnsupportedLibrdkafka(ImportError):
    """The librdkafka found beside confluent-kafka lacks a function (or is too old) for `ArrowProducer`."""


def supported_range() -> str:
    """The confluent-kafka versions this package declares (its ``kafka`` extra), e.g. ``<2.17,>=2.6``; "" when
    the package is not installed (run from a checkout)."""
    try:
        for requirement in requires("impulse-connectors") or ():
            if requirement.startswith("confluent-kafka") and "kafka" in requirement.partition(";")[2]:
                return requirement.partition(";")[0][len("confluent-kafka"):].strip()
    except PackageNotFoundError:  # run from a checkout that is not installed
        pass
    return ""


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The librdkafka that confluent-kafka was installed with (its wheel's copy, else the system's).

    Raises `UnsupportedLibrdkafka`, naming the missing function and the supported confluent-kafka
    range, when it lacks one of the functions this module binds (another wheel layout or release).
    """
    confluent_kafka = import_kafka()
    package = os.path.dirname(confluent_kafka.__file__)
    candidates = sorted(glob.glob(os.path.join(package, os.pardir, "confluent_kafka.libs", "librdkafka*.so*"))
                        + glob.glob(os.path.join(package, ".dylibs", "librdkafka*.dylib")))
    if not candidates:
        found = ctypes.util.find_library("rdkafka")
        candidates = [found] if found else []
    installed = f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
    remedy = (f"install a supported release: pip install 'confluent-kafka{supported_range()}'" if supported_range()
              else "install the confluent-kafka release that the kafka extra of impulse-connectors declares")
    if not candidates:
        raise UnsupportedLibrdkafka(f"the kafka sink found no librdkafka next to {installed} or on the system; {remedy}")
    lib = ctypes.CDLL(candidates[0])
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise UnsupportedLibrdkafka(f"the kafka sink calls librdkafka's {name}, which {candidates[0]} of "
                                        f"{installed} does not have; {remedy}") from None
        function.restype, function.argtypes = restype, argtypes
    if lib.rd_kafka_version() < 0x02000000:
        raise UnsupportedLibrdkafka(f"librdkafka {lib.rd_kafka_version():#x} at {candidates[0]} is older than 2.0; "
                                    f"{remedy}")
    return lib


def _kafka_error(code: int, reason: str | None = None, **flags: bool):
    return import_kafka().KafkaError(code, reason or library().rd_kafka_err2str(code).decode(), **flags)


def _raise_error(error: int | None) -> None:
    """Raise an ``rd_kafka_error_t *`` (and free it) as a KafkaException; nothing for NULL."""
    if not error:
        return
    lib = library()
    try:
        exc = import_kafka().KafkaException(_kafka_error(
            lib.rd_kafka_error_code(error), lib.rd_kafka_error_string(error).decode(),
            fatal=bool(lib.rd_kafka_error_is_fatal(error)), retriable=bool(lib.rd_kafka_error_is_retriable(error)),
            txn_requires_abort=bool(lib.rd_kafka_error_txn_requires_abort(error))))
    finally:
        lib.rd_kafka_error_destroy(error)
    raise exc


def _raise_code(code: int, reason: str | None = None) -> None:
    if code:
        raise import_kafka().KafkaException(_kafka_error(code, reason))


def _setting(value: Any) -> bytes:
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return str(value).encode()


def _ms(timeout_s: float) -> int:
    return max(0, int(timeout_s * 1000))


def _pointers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Addresses and lengths of each value of a binary array (0 and 0 for a null)."""
    if array.type != pa.binary():
        raise TypeError(f"expected a binary array, got {array.type}")
    _, offsets_buffer, data = array.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=len(array) + 1, offset=array.offset * 4)
    lengths = np.diff(offsets).astype(np.uint64)
    base = data.address if data is not None and data.address else ctypes.addressof(_EMPTY)  # NULL: a null
    addresses = offsets[:-1].astype(np.uint64) + np.uint64(base)
    if array.null_count:
        nulls = array.is_null().to_numpy(zero_copy_only=False)
        addresses[nulls] = 0
        lengths[nulls] = 0
    return addresses, lengths


def _delivery_callback(failures: list) -> Any:
    """librdkafka's delivery report callback, appending failed records to ``failures``.

    A closure over the list, not a bound method: the producer holds the callback, and no reference
    cycle keeps a dropped producer (and its librdkafka handle) alive until the cyclic GC runs.
    """

    def delivered(_rk, message, _opaque) -> None:
        m = message.contents
        if m.err:
            topic = library().rd_kafka_topic_name(m.rkt).decode() if m.rkt else None
            failures.append((_kafka_error(m.err), topic, m.partition, m.private or 0))

    return _DeliveryCallback(delivered)


class ArrowProducer:
    """A librdkafka producer fed with Arrow arrays (see the module docstring).

    ``config`` holds librdkafka properties (values as Python values; booleans as true/false).
    ``delivery.report.only.error`` is always on: `failures` lists ``(KafkaError, topic, partition, row)``
    of the records the broker refused, served by `poll` and `flush` (``row``: what ``rows`` said of
    it when it was produced, else its index in that call). Not thread-safe.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        lib = library()
        self.failures: list = []
        self._topics: dict[str, int] = {}
        self._partition_counts: dict[str, int] = {}  # from topic_error()
        self._rk: int | None = None
        self._on_delivery = _delivery_callback(self.failures)  # kept alive as long as the handle
        settings = {"delivery.report.only.error": True, **config}
        if not any(k in settings for k in ("debug", "log_level")):
            settings["log_level"] = 0  # errors reach the caller as exceptions and failures, not stderr
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        for name, value in settings.items():
            if lib.rd_kafka_conf_set(conf, name.encode(), _setting(value), errstr, len(errstr)) != 0:
                lib.rd_kafka_conf_destroy(conf)
                _raise_code(_ERR_INVALID_ARG, errstr.value.decode())
        lib.rd_kafka_conf_set_dr_msg_cb(conf, self._on_delivery)
        rk = lib.rd_kafka_new(_PRODUCER, conf, errstr, len(errstr))
        if not rk:
            lib.rd_kafka_conf_destroy(conf)
            _raise_code(_ERR_INVALID_ARG, errstr.value.decode())
        self._rk = rk

    def _topic(self, name: str) -> int:
        handle = self._topics.get(name)
        if handle is None:
            handle = library().rd_kafka_topic_new(self._rk, name.encode(), None)
            if not handle:
                _raise_code(_ERR_INVALID_ARG, f"invalid topic name {name!r}")
            self._topics[name] = handle
        return handle

    # -- producing ------------------------------------------------------------------------------
    def produce(self, topic: str, values: pa.Array, keys: pa.Array | None = None,
                partitions: np.ndarray | None = None, partition: int = _PARTITION_UA,
                rows: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Enqueue one record per row: values and keys binary arrays (null: none), partitions int32 (-1: any).

        ``partition`` ≥ 0 sends every record to that partition (``partitions`` must then be None):
        librdkafka looks it up once for the call instead of running its partitioner per record.
        Blocks while the local queue is full, serving delivery reports. Returns ``(index, error
        code)`` of each record librdkafka refused at once (over ``message.max.bytes``: code 10,
        MSG_SIZE_TOO_LARGE); the others are enqueued. Raises KafkaException for a partition the topic
        does not have, before anything is enqueued. A failed delivery names the record's ``rows``
        entry (default: its index in the call).
        """
        count = len(values)
        if not count:
            return []
        messages = np.zeros(count, _MESSAGE)
        messages["private"] = np.arange(count) if rows is None else rows
        messages["payload"], messages["len"] = _pointers(values)
        if keys is not None:
            messages["key"], messages["key_len"] = _pointers(keys)
        flags = _F_COPY
        if partitions is not None:
            if partition != _PARTITION_UA:
                raise ValueError("give either partitions (one per record) or partition (all records), not both")
            self._check_partitions(topic, partitions)
            messages["partition"] = partitions
            flags |= _F_PARTITION
        elif partition != _PARTITION_UA:
            self._check_partitions(topic, np.broadcast_to(np.int32(partition), (count,)))  # a view: no copy
        lib, rkt, done, refused = library(), self._topic(topic), 0, []
        address, stride, errors = messages.ctypes.data, _MESSAGE.itemsize, messages["err"]
        while done < count:
            # A record refused for itself (too large) is skipped and the call goes on; once the queue is
            # full, that record and every later one of the call are refused: the loop resumes there.
            lib.rd_kafka_produce_batch(rkt, partition, flags, address + done * stride, count - done)
            full = np.flatnonzero(errors[done:] == _ERR_QUEUE_FULL)
            stop = done + int(full[0]) if len(full) else count
            refused += [(done + int(i), int(errors[done + i])) for i in np.flatnonzero(errors[done:stop])]
            if stop == count:
                break
            done = stop
            # Back-pressure: room comes as the broker acknowledges.
            lib.rd_kafka_poll(self._rk, _QUEUE_FULL_WAIT_MS)
        return refused

    def produce_each(self, topic: str, values: pa.Array, keys: pa.Array | None, partitions: np.ndarray | None,
                     timestamps: np.ndarray | None, headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None,
                     rows: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Like `produce`, with per-record timestamps (ms since the epoch, 0: now) and headers: one call per record."""
        count = len(values)
        if partitions is not None:
            self._check_partitions(topic, partitions)
        lib, refused = library(), []
        vus = np.zeros((count, 8), _VU)
        vus["vtype"] = [_VT_RKT, _VT_PARTITION, _VT_VALUE, _VT_KEY, _VT_TIMESTAMP, _VT_HEADERS, _VT_MSGFLAGS,
                        _VT_OPAQUE]
        vus["a"][:, 0] = self._topic(topic)
        vus["a"][:, 1] = (partitions if partitions is not None else np.full(count, -1, np.int32)).astype(np.uint32)
        vus["a"][:, 2], vus["b"][:, 2] = _pointers(values)
        if keys is not None:
            vus["a"][:, 3], vus["b"][:, 3] = _pointers(keys)
        if timestamps is not None:
            vus["a"][:, 4] = np.asarray(timestamps, dtype=np.int64).astype(np.uint64)
        vus["a"][:, 6] = _F_COPY
        vus["a"][:, 7] = np.arange(count) if rows is None else rows
        address, stride = vus.ctypes.data, 8 * _VU.itemsize
        for i in range(count):
            row = headers[i] if headers is not None else None
            handle = self._headers(row) if row else None
            vus["a"][i, 5] = handle or 0
            while True:
                error = lib.rd_kafka_produceva(self._rk, address + i * stride, 8)
                if not error:
                    break  # librdkafka owns the headers now
                code = lib.rd_kafka_error_code(error)
                lib.rd_kafka_error_destroy(error)
                if code != _ERR_QUEUE_FULL:
                    if handle:
                        lib.rd_kafka_headers_destroy(handle)
                    refused.append((i, code))
                    break
                lib.rd_kafka_poll(self._rk, _QUEUE_FULL_WAIT_MS)
        return refused

    def _check_partitions(self, topic: str, partitions: np.ndarray) -> None:
        """Refuse a partition the topic does not have before anything is enqueued.

        (``rd_kafka_produce_batch`` would refuse it too, but keeps counting that record as queued:
        ``flush`` could then never finish.) Checked against the count `topic_error` last saw.
        """
        known = self._partition_counts.get(topic)
        beyond = np.flatnonzero(partitions >= known) if known is not None else ()
        if len(beyond):
            row = int(beyond[0])
            _raise_code(_ERR_UNKNOWN_PARTITION, f"topic '{topic}' has no partition {int(partitions[row])} (it has "
                        f"{known}; record {row} of {len(partitions)})")

    def partition_count(self, topic: str) -> int | None:
        """How many partitions ``topic`` had when `topic_error` last asked the cluster (None: never asked)."""
        return self._partition_counts.get(topic)

    @staticmethod
    def _headers(row: Sequence[tuple[str, bytes | None]]) -> int:
        lib = library()
        handle = lib.rd_kafka_headers_new(len(row))
        for name, value in row:
            lib.rd_kafka_header_add(handle, name.encode(), -1, value, -1 if value is None else len(value))
        return handle

    def poll(self, timeout_s: float = 0.0) -> int:
        """Serve delivery reports (failures only); returns how many events were served."""
        return library().rd_kafka_poll(self._rk, _ms(timeout_s))

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every record to be acknowledged or failed; returns how many are left."""
        library().rd_kafka_flush(self._rk, _ms(timeout_s))
        return len(self)

    def __len__(self) -> int:
        return library().rd_kafka_outq_len(self._rk)

    def purge(self) -> None:
        """Drop the records not yet acknowledged (they fail with ``_PURGE_*``)."""
        library().rd_kafka_purge(self._rk, _PURGE_QUEUE | _PURGE_INFLIGHT)

    def fatal_error(self):
        """The producer's fatal error (a `KafkaError`), if it has one: it cannot produce any more."""
        errstr = ctypes.create_string_buffer(512)
        code = library().rd_kafka_fatal_error(self._rk, errstr, len(errstr))
        return _kafka_error(code, errstr.value.decode(), fatal=True) if code else None

    # -- metadata -------------------------------------------------------------------------------
    def topic_error(self, topic: str, timeout_s: float) -> str | None:
        """Why ``topic`` cannot be written to (the broker's reason), or None if the cluster has it."""
        lib = library()
        metadata = POINTER(_Metadata)()
        _raise_code(lib.rd_kafka_metadata(self._rk, 0, self._topic(topic), ctypes.byref(metadata), _ms(timeout_s)))
        try:
            found = [metadata.contents.topics[i] for i in range(metadata.contents.topic_cnt)]
            for entry in found:
                if entry.topic.decode() == topic:
                    if entry.err:
                        return lib.rd_kafka_err2str(entry.err).decode()
                    self._partition_counts[topic] = entry.partition_cnt
                    return None
            return "not found"
        finally:
            lib.rd_kafka_metadata_destroy(metadata)

    # -- transactions ---------------------------------------------------------------------------
    def init_transactions(self, timeout_s: float) -> None:
        _raise_error(library().rd_kafka_init_transactions(self._rk, _ms(timeout_s)))

    def begin_transaction(self) -> None:
        _raise_error(library().rd_kafka_begin_transaction(self._rk))

    def send_offsets_to_transaction(self, topic: str, partition: int, offset: int, group_id: str,
                                    timeout_s: float, metadata: bytes = b"") -> None:
        """Commit ``offset`` with ``metadata`` on (topic, partition) for consumer group ``group_id`` with the
        transaction (a consumer reads the metadata back with the committed offset)."""
        lib = library()
        offsets = lib.rd_kafka_topic_partition_list_new(1)
        group = lib.rd_kafka_consumer_group_metadata_new(group_id.encode())
        entry = None
        # NUL-terminated, the terminator counted: librdkafka copies metadata_size bytes, and a copy without
        # a terminator was read past its end once (the stored metadata gained ".pri0").
        kept = ctypes.create_string_buffer(metadata)  # librdkafka copies it when it sends
        try:
            entry = lib.rd_kafka_topic_partition_list_add(offsets, topic.encode(), partition)
            lib.rd_kafka_topic_partition_list_set_offset(offsets, topic.encode(), partition, offset)
            if metadata:
                entry.contents.metadata = ctypes.cast(kept, c_void_p)
                entry.contents.metadata_size = len(metadata) + 1
            _raise_error(lib.rd_kafka_send_offsets_to_transaction(self._rk, offsets, group, _ms(timeout_s)))
        finally:
            if entry is not None:  # ours, not librdkafka's to free
                entry.contents.metadata, entry.contents.metadata_size = None, 0
            lib.rd_kafka_consumer_group_metadata_destroy(group)
            lib.rd_kafka_topic_partition_list_destroy(offsets)

    def commit_transaction(self, timeout_s: float) -> None:
        _raise_error(library().rd_kafka_commit_transaction(self._rk, _ms(timeout_s)))

    def abort_transaction(self, timeout_s: float) -> None:
        _raise_error(library().rd_kafka_abort_transaction(self._rk, _ms(timeout_s)))

    # -- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the handle (records still queued are dropped: flush first); idempotent."""
        rk, self._rk = self._rk, None
        if rk is None:
            return
        lib = library()
        for handle in self._topics.values():
            lib.rd_kafka_topic_destroy(handle)
        self._topics.clear()
        lib.rd_kafka_destroy(rk)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the library may be gone
            pass
