"""The ctypes binding of librdkafka in `sinks.kafka.librdkafka`, without a broker: layouts, and a clear error early."""

from __future__ import annotations

import ctypes

import pytest

from connectors.errors import SinkError
from connectors.options import OptionReader
from sinks.kafka import librdkafka
from sinks.kafka.options import KafkaOptions
from sinks.kafka.sink import Columns, KafkaSink


def test_the_numpy_message_and_the_ctypes_message_agree():
    """`ArrowProducer.produce` fills rd_kafka_message_t through a numpy dtype; the delivery callback reads it
    through a ctypes Structure: both must be rdkafka.h's layout, field by field."""
    structure, dtype = librdkafka._Message, librdkafka._MESSAGE
    assert ctypes.sizeof(structure) == dtype.itemsize
    assert [name for name, _ in structure._fields_] == list(dtype.names)
    for name, _ in structure._fields_:
        assert getattr(structure, name).offset == dtype.fields[name][1], name
        assert getattr(structure, name).size == dtype.fields[name][0].itemsize, name


def test_a_missing_function_names_itself_and_the_supported_range(monkeypatch):
    monkeypatch.setitem(librdkafka._SIGNATURES, "rd_kafka_no_such_function", (None, []))
    librdkafka.library.cache_clear()
    try:
        with pytest.raises(librdkafka.UnsupportedLibrdkafka) as missing:
            librdkafka.library()
        sink = KafkaSink(KafkaOptions.read(OptionReader({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"},
                                                        name="kafka sink")), Columns(*[False] * 6))
        with pytest.raises(SinkError) as at_check:  # on the driver, before any task, with no broker
            sink.check()
    finally:
        librdkafka.library.cache_clear()
    for text in (str(missing.value), str(at_check.value)):
        assert "rd_kafka_no_such_function" in text and "confluent-kafka" in text
        assert f"pip install 'confluent-kafka{librdkafka.supported_range()}'" in text
    assert librdkafka.supported_range().startswith(("<", ">"))
