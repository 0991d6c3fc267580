"""Redis Cluster hash slots for whole Arrow arrays of keys, the grouping of a partition's rows by slot, and the
keys of per-slot commit records. Pure functions: no server, no redis-py.

Slots
-----
Redis Cluster puts key K in slot ``CRC16(K) mod 16384`` (CRC16-XMODEM: polynomial 0x1021, initial value 0, no
reflection), where K is replaced by its *hash tag* when it has one: the bytes between the first ``{`` and the
first ``}`` after it, if that is not empty. ``a{user1}b`` and ``{user1}`` share a slot; ``a{}b`` and ``a}{b``
hash whole; ``{{x}}`` hashes ``{x``. `key_slots` computes this for a binary/string array with numpy: a table
lookup per byte position over all rows at once (the loop runs over the longest hashed length, never over rows).

Exactly once across slots: the layout of commit records
-------------------------------------------------------
On one node the sink writes a Spark partition's rows and its commit record ``<commitKeyPrefix><Q>:<P>`` in one
MULTI/EXEC under WATCH of that record (``Q`` the commit id, ``P`` the partition, the record ``"<batch>
<fingerprint>"``). A cluster runs a MULTI/EXEC (or a script) only when every key it touches is in one slot, so
in cluster mode a partition is written as one transaction **per slot group**: `group_by_slot` splits the
partition's rows by the slot of their key, and each group gets its own record *in its own slot*::

    <commitKeyPrefix>{<slot tag>}<Q>:<P>            = "<batch> <fingerprint of the partition's input>"

where ``<slot tag>`` is `slot_tag(slot)`: a short fixed string whose CRC16 is that slot (a table of one tag per
slot 0..16383, `slot_tags`), so the record hashes to the group's slot whatever the user's keys look like (hash
tags or not). `commit_record_key` builds it; `commit_record_keys` builds those of many slots at once.
``commitKeyPrefix`` must then contain no ``{``: the record's first ``{`` must be the slot tag's
(`check_commit_key_prefix`; an `OptionError` in the sink at start).

A group's transaction (the slot's node; `sinks.redis.cluster`): one script that reads the record and, unless it
holds this batch or a later one (the group is then skipped, as a partition is on one node), runs the group's
commands and sets the record, atomically. A replayed batch therefore skips exactly the groups that were applied,
whatever crashed between two of them; a concurrent attempt of the same partition cannot apply a group twice (the
check and the write are one script). A reply that was lost (connection dropped after the script was sent) is
resolved by running the group again on the slot's current owner, which reads the record first; MOVED/ASK/TRYAGAIN
mean nothing of the group ran, so the group is sent again where the slot map points.

The partition-wide records stay where they are, each a single key in its own slot: ``<commitKeyPrefix><Q>:batch``
(the driver's record); ``<commitKeyPrefix><Q>:partitions`` (SADD of P) and the single-node record
``<commitKeyPrefix><Q>:<P>``, which is the partition's *summary*, both written once every group is applied (and
WAITed for): a replay that finds the summary at this batch skips the partition with one GET, and only a partition
cut between two groups reads its groups' records; `Sink.committed_beyond` reads the summaries (a partition cut
before its summary is then not seen there, one more case of what the protocol's docstring says it does not catch).

What else goes into a group, so that it stays in one slot: the per-key commands of a record batch (``LTRIM``,
``ZREMRANGEBYRANK``, ``EXPIRE`` of each distinct key) join their key's group after its rows (the row keys followed
by the distinct keys: the stable grouping keeps them last); the dead letters (``XADD <deadLetterKey>``) join the
group of ``deadLetterKey``'s slot (made for them if no row key is there); the key-type check before queueing runs
per slot, on the slot's primary. The group's script does not check the types again as the single-node record
script does, so a type another client changes between the check and the script fails the task (Redis applied
the group in part) and a replay skips that group.

Row order: a group keeps its rows in their input order (`group_by_slot` is a stable sort), so a list, a stream or a
changelog (``opColumn``) sees a key's rows in order; rows of different keys in different slots have no order
between them in a cluster anyway.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "SLOTS",
    "SlotGroups",
    "check_commit_key_prefix",
    "commit_record_key",
    "commit_record_keys",
    "crc16",
    "group_by_slot",
    "hashed_ranges",
    "key_slot",
    "key_slots",
    "slot_tag",
    "slot_tags",
]

SLOTS = 16384  #: hash slots of a Redis Cluster


def _crc_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint16)
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table[byte] = crc & 0xFFFF
    return table


_TABLE = _crc_table()


def crc16(data: bytes) -> int:
    """CRC16-XMODEM of `data` (the checksum Redis Cluster hashes keys with), 0..65535."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ int(_TABLE[((crc >> 8) ^ byte) & 0xFF])
    return crc


def _hashed(key: bytes) -> bytes:
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1:end]
    return key


def key_slot(key: bytes | str) -> int:
    """The slot (0..16383) of one key, hash tag included; str keys are UTF-8 encoded. For a few keys (a commit
    record, a dead-letter stream); use `key_slots` for a column."""
    if isinstance(key, str):
        key = key.encode()
    return crc16(_hashed(key)) % SLOTS


def _as_binary(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        keys = pa.concat_arrays(keys.chunks) if keys.num_chunks != 1 else keys.chunk(0)
    if keys.null_count:
        raise ValueError(f"{keys.null_count} of {len(keys)} keys are null: a Redis key needs a value")
    if pa.types.is_large_string(keys.type) or pa.types.is_large_binary(keys.type):
        keys = keys.cast(pa.large_binary())
    elif pa.types.is_string(keys.type) or pa.types.is_binary(keys.type):
        keys = keys.cast(pa.binary())
    else:
        raise TypeError(f"keys must be a string or binary array, not {keys.type}")
    return keys


def _offsets_and_data(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    offset_type = np.int64 if pa.types.is_large_binary(keys.type) else np.int32
    offsets = np.frombuffer(keys.buffers()[1], dtype=offset_type)[keys.offset:keys.offset + len(keys) + 1]
    data_buffer = keys.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def hashed_ranges(keys: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each key, where its hashed bytes are: ``(data, start, end)`` with `data` the array's value buffer
    (uint8) and ``data[start[i]:end[i]]`` the bytes Redis hashes for key i (its hash tag, or the whole key)."""
    keys = _as_binary(keys)
    offsets, data = _offsets_and_data(keys)
    start, end = offsets[:-1].copy(), offsets[1:].copy()
    opens = np.flatnonzero(data == ord("{"))
    closes = np.flatnonzero(data == ord("}"))
    if len(opens) and len(closes) and len(keys):
        first_open = np.searchsorted(opens, start)  # index of the first '{' at or after each key's start
        open_at = np.append(opens, len(data))[first_open]
        has_open = open_at < end
        first_close = np.searchsorted(closes, open_at + 1)
        close_at = np.append(closes, len(data))[first_close]
        tagged = has_open & (close_at < end) & (close_at > open_at + 1)
        start = np.where(tagged, open_at + 1, start)
        end = np.where(tagged, close_at, end)
    return data, start, end


def key_slots(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The slot (0..16383, ``uint16``) of every key of a string or binary array (strings hash as UTF-8), hash
    tags included — what ``CLUSTER KEYSLOT`` answers for each. Deterministic; null keys raise `ValueError`.

    Vectorised: rows are ordered by hashed length once, then each byte position is one numpy table lookup over
    the rows at least that long.
    """
    data, start, end = hashed_ranges(keys)
    lengths = end - start
    order = np.argsort(-lengths, kind="stable")  # longest first: the rows still hashing are a prefix
    sorted_start, sorted_len = start[order], lengths[order]
    crc = np.zeros(len(order), dtype=np.uint16)
    longest = int(sorted_len[0]) if len(order) else 0
    # how many rows are longer than j, for j = 0..longest-1 (sorted_len is non-increasing)
    active = np.searchsorted(-sorted_len, -np.arange(longest), side="left") if longest else np.zeros(0, np.int64)
    for j in range(longest):
        n = int(active[j])
        byte = data[sorted_start[:n] + j]
        head = crc[:n]
        crc[:n] = (head << 8) ^ _TABLE[((head >> 8) ^ byte) & 0xFF]
    slots = np.empty(len(order), dtype=np.uint16)
    slots[order] = crc & (SLOTS - 1)
    return slots


@functools.cache
def slot_tags() -> tuple[str, ...]:
    """One tag per slot: ``slot_tags()[s]`` is the shortest (then alphabetically first) string of ``[0-9A-Za-z]``
    whose CRC16 is slot s, so ``{<tag>}`` puts any key in slot s. Fixed for good: commit records are named
    with it (changing it would orphan every record)."""
    alphabet = np.frombuffer(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    tags: list[str | None] = [None] * SLOTS
    missing = SLOTS
    for length in (1, 2, 3, 4):
        grid = np.stack(np.meshgrid(*([alphabet] * length), indexing="ij"), axis=-1).reshape(-1, length)
        crc = np.zeros(len(grid), dtype=np.uint16)
        for j in range(length):
            crc = (crc << 8) ^ _TABLE[((crc >> 8) ^ grid[:, j]) & 0xFF]
        slots = crc & (SLOTS - 1)
        # grid is in alphabetical order (the alphabet is ASCII-sorted): the first candidate of each slot wins
        found, first = np.unique(slots, return_index=True)
        for slot, row in zip(found.tolist(), first.tolist()):
            if tags[slot] is None:
                tags[slot] = grid[row].tobytes().decode()
                missing -= 1
        if not missing:
            return tuple(tags)  # type: ignore[arg-type]
    raise AssertionError("no tag of up to 4 alphanumerics for some slot")  # pragma: no cover - checked by the tests


def slot_tag(slot: int) -> str:
    """The tag of `slot` (0..16383) from `slot_tags`."""
    if not 0 <= slot < SLOTS:
        raise ValueError(f"slot {slot} is not in 0..{SLOTS - 1}")
    return slot_tags()[slot]


def check_commit_key_prefix(prefix: str) -> None:
    """Raise `ValueError` when `prefix` cannot prefix per-slot commit records: a ``{`` in it would make the
    record's hash tag something else than the slot tag."""
    if "{" in prefix:
        raise ValueError(f"commitKeyPrefix {prefix!r} contains '{{': in cluster mode the commit records are "
                         "'<commitKeyPrefix>{<slot tag>}<commit id>:<partition>' and need their first '{' to be "
                         "the slot tag's; choose a prefix without '{'")


def commit_record_key(prefix: str, commit_id: str, partition: int, slot: int) -> bytes:
    """The commit record of (commit id, partition) for its rows in `slot`:
    ``<prefix>{<slot tag>}<commit id>:<partition>``, a key in `slot` (`check_commit_key_prefix` first)."""
    check_commit_key_prefix(prefix)
    return f"{prefix}{{{slot_tag(slot)}}}{commit_id}:{partition}".encode()


def commit_record_keys(prefix: str, commit_id: str, partition: int, slots: np.ndarray) -> pa.Array:
    """`commit_record_key` for each slot of `slots`, as a binary array (in the order of `slots`)."""
    check_commit_key_prefix(prefix)
    tags = pa.array(slot_tags(), pa.binary()).take(pa.array(np.asarray(slots, dtype=np.int64)))
    return pc.binary_join_element_wise(pa.scalar(f"{prefix}{{".encode(), pa.binary()), tags,
                                       pa.scalar(f"}}{commit_id}:{partition}".encode(), pa.binary()),
                                       pa.scalar(b"", pa.binary()))


@dataclass(frozen=True)
class SlotGroups:
    """A partition's rows grouped by slot: group g is slot ``slots[g]``, its rows are
    ``order[bounds[g]:bounds[g + 1]]`` (row indexes of the input, in input order)."""

    slots: np.ndarray   #: uint16, ascending, distinct
    order: np.ndarray   #: int64 row indexes, grouped by slot, input order within a group
    bounds: np.ndarray  #: int64, len(slots) + 1

    def __len__(self) -> int:
        return len(self.slots)

    def rows(self, group: int) -> np.ndarray:
        """Row indexes of group `group`, in input order."""
        return self.order[self.bounds[group]:self.bounds[group + 1]]

    def take(self, table: pa.RecordBatch | pa.Table | pa.Array, group: int):
        """The rows of group `group` of `table` (zero-copy when they are contiguous)."""
        return table.take(pa.array(self.rows(group)))

    def by_node(self, owners: np.ndarray) -> dict[int, np.ndarray]:
        """Group indexes by node: `owners` maps each slot (0..16383) to a node number (`owners[slot]`, e.g. built
        from ``CLUSTER SLOTS``); returns node → indexes of its groups."""
        nodes = np.asarray(owners)[self.slots]
        return {int(node): np.flatnonzero(nodes == node) for node in np.unique(nodes)}


def group_by_slot(slots: np.ndarray) -> SlotGroups:
    """Group rows by their slot (from `key_slots`): a stable sort, so each group keeps input order."""
    slots = np.asarray(slots)
    order = np.argsort(slots, kind="stable").astype(np.int64)
    ordered = slots[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    starts = np.concatenate(([0], cuts)).astype(np.int64) if len(ordered) else np.zeros(0, np.int64)
    return SlotGroups(slots=ordered[starts].astype(np.uint16), order=order,
                      bounds=np.append(starts, len(ordered)).astype(np.int64))
