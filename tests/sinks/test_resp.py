import pyarrow as pa
from redis.connection import PythonRespSerializer

from sinks.resp import command, commands, packed


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
