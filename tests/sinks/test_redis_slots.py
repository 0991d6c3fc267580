"""Hash slots of whole key arrays, the grouping by slot and the per-slot commit record keys (sinks/redis/slots.py)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from redis.crc import key_slot as redis_py_key_slot

from sinks.redis.slots import (
    SLOTS,
    check_commit_key_prefix,
    commit_record_key,
    commit_record_keys,
    crc16,
    group_by_slot,
    key_slot,
    key_slots,
    slot_tag,
    slot_tags,
)

EDGE_KEYS = [b"", b"{", b"}", b"{}", b"a{}b", b"a}{b", b"{{x}}", b"{a}{b}", b"x{a}y{b}z", b"}{x}", b"{x", b"x}",
             b"foo", b"{user1000}.following", b"{user1000}.followers", "é{ü}".encode(), "ключ".encode(),
             "{日本}語".encode(), b"\x00\xff{\x00}", b"{\xff\xfe}"]


def _random_keys(n: int, seed: int) -> list[bytes]:
    """Random keys of 0..40 bytes over every byte value, with braces sprinkled in often."""
    rng = np.random.default_rng(seed)
    keys = []
    for length in rng.integers(0, 41, n):
        raw = rng.integers(0, 256, length, dtype=np.uint8)
        braces = rng.random(length) < 0.15
        raw[braces] = rng.choice(np.frombuffer(b"{}", np.uint8), braces.sum())
        keys.append(raw.tobytes())
    return keys


def test_crc16_is_xmodem():
    assert crc16(b"123456789") == 0x31C3  # the CRC16-XMODEM check value (Redis cluster spec)
    assert crc16(b"") == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_key_slots_equal_redis_py_for_random_keys_with_hash_tags(seed):
    keys = _random_keys(5000, seed) + EDGE_KEYS
    assert sum(b"{" in k and b"}" in k for k in keys) > 1000, "the keys should exercise hash tags"
    expected = [redis_py_key_slot(key) for key in keys]
    assert key_slots(pa.array(keys, pa.binary())).tolist() == expected
    assert [key_slot(key) for key in keys] == expected


def test_key_slots_of_strings_are_those_of_their_utf8_bytes_whatever_the_array_type():
    texts = ["é{ü}", "{日本}語", "plain", "{}", "a{b}c", "ключ:{42}"] * 3
    expected = [redis_py_key_slot(t.encode()) for t in texts]
    for array in (pa.array(texts, pa.string()), pa.array(texts, pa.large_string()),
                  pa.chunked_array([texts[:5], texts[5:]]), pa.array(["x"] + texts, pa.string()).slice(1)):
        assert key_slots(array).tolist() == expected


def test_key_slots_of_nothing_and_refusals():
    assert key_slots(pa.array([], pa.binary())).tolist() == []
    with pytest.raises(ValueError, match="1 of 2 keys are null"):
        key_slots(pa.array([b"a", None]))
    with pytest.raises(TypeError, match="string or binary"):
        key_slots(pa.array([1, 2]))


@pytest.mark.integration
@pytest.mark.redis
def test_key_slots_equal_cluster_keyslot_of_a_real_cluster(redis_cluster):
    keys = _random_keys(2000, 7) + EDGE_KEYS
    node = redis_cluster.node_client(redis_cluster.url.removeprefix("redis://"))
    try:
        pipe = node.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("CLUSTER", "KEYSLOT", key)
        expected = [int(slot) for slot in pipe.execute()]
    finally:
        node.close()
    assert key_slots(pa.array(keys, pa.binary())).tolist() == expected


def test_slot_tags_map_to_their_slot_and_are_short_fixed_alphanumerics():
    tags = slot_tags()
    assert len(tags) == SLOTS
    assert key_slots(pa.array([f"{{{tag}}}" for tag in tags])).tolist() == list(range(SLOTS))
    assert [redis_py_key_slot(tag.encode()) for tag in tags] == list(range(SLOTS))
    assert all(tag.isascii() and tag.isalnum() and 1 <= len(tag) <= 3 for tag in tags)
    assert (slot_tag(0), slot_tag(SLOTS - 1)) == (tags[0], tags[-1])
    with pytest.raises(ValueError, match="not in 0..16383"):
        slot_tag(SLOTS)


def test_commit_record_keys_land_in_their_slot_whatever_the_commit_id():
    slots = np.array([0, 1, 8106, 12182, SLOTS - 1])
    for commit_id in ("q-1", "a{b}c", "{}", "é"):
        keys = commit_record_keys("impulse:commit:", commit_id, 3, slots)
        assert key_slots(keys).tolist() == slots.tolist()
        assert keys.to_pylist() == [commit_record_key("impulse:commit:", commit_id, 3, int(s)) for s in slots]
    assert commit_record_key("p:", "q", 7, 12182) == f"p:{{{slot_tag(12182)}}}q:7".encode()


def test_a_commit_key_prefix_with_a_brace_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"commitKeyPrefix 'x\{' contains '\{'.*without '\{'"):
        check_commit_key_prefix("x{")
    with pytest.raises(ValueError, match="commitKeyPrefix"):
        commit_record_keys("{app}:", "q", 0, np.array([1]))
    check_commit_key_prefix("app:}commit:")  # a lone '}' is harmless: the first '{' is the slot tag's


def test_group_by_slot_keeps_input_order_within_each_slot():
    rng = np.random.default_rng(5)
    slots = rng.integers(0, 40, 1000).astype(np.uint16)
    groups = group_by_slot(slots)
    assert groups.slots.tolist() == sorted(set(slots.tolist()))
    assert len(groups) == len(groups.slots) and groups.bounds[-1] == len(slots)
    for g, slot in enumerate(groups.slots):
        rows = groups.rows(g)
        assert rows.tolist() == np.flatnonzero(slots == slot).tolist()  # every row of the slot, in input order
    table = pa.table({"i": np.arange(1000)})
    assert groups.take(table, 0).column("i").to_pylist() == groups.rows(0).tolist()
    owners = np.arange(SLOTS) % 3
    by_node = groups.by_node(owners)
    assert sorted(np.concatenate(list(by_node.values())).tolist()) == list(range(len(groups)))
    assert all((owners[groups.slots[idx]] == node).all() for node, idx in by_node.items())
    assert len(group_by_slot(np.array([], np.uint16))) == 0
