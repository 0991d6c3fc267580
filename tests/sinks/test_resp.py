import pyarrow as pa
from redis.connection import PythonRespSerializer

from sinks.redis.resp import command, command_over, commands, packed


def _reference(*args) -> bytes:
    return b"".join(PythonRespSerializer(6000, lambda value: value).pack(*args))


def test_commands_match_redis_py_encoding():
    keys = pa.array(["k1", "kéy", ""]).slice(0)
    values = pa.array([b"v\r\n1", b"", b"x" * 300])
    encoded = commands(b"SET", keys, values, b"EX", b"60")
    expected = [_reference(b"SET", k.encode(), v, b"EX", b"60") for k, v in zip(keys.to_pylist(), values.to_pylist())]
    assert encoded.to_pylist() == expected
    assert bytes(packed(encoded.slice(1))) == b"".join(expected[1:])
    assert command(b"MULTI") == _reference(b"MULTI")
    assert bytes(packed(pa.array([], pa.binary()))) == b""


def test_command_over_an_array_matches_redis_py_encoding():
    keys = pa.array(["k1", "kéy", ""]).slice(1)
    encoded = command_over((b"EVAL", b"return 1", b"2"), keys, (b"tail",))
    assert encoded == _reference(b"EVAL", b"return 1", b"2", *(k.encode() for k in keys.to_pylist()), b"tail")
    assert command_over((b"PING",), pa.array([], pa.binary())) == _reference(b"PING")
