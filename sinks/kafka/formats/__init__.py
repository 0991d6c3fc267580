"""Kafka record formats: raw, json, avro, protobuf and json-schema, with Confluent's Schema Registry wire format.

`schemas` maps a Spark schema to each format's schema; `encode` turns Arrow record batches into payloads on the
executors; `framing` adds the wire-format header; `registry` makes the registry calls on the driver. Imports of
fastavro, protobuf and confluent-kafka's schema registry happen only where a format runs.
"""

from .encode import (
                       FORMATS,
                       REGISTRY_FORMATS,
                       EncodingSpec,
                       RecordEncodeError,
                       encode_batch,
                       encode_payloads,
                       protobuf_message_class,
)
from .framing import frame, header, message_indexes, split_header
from .registry import (
                       RegistryError,
                       RegistryOptions,
                       derived_schema,
                       record_full_name,
                       registry_options,
                       resolve_encoding,
                       subject_name,
)
from .schemas import SchemaMappingError, avro_schema, json_schema, protobuf_descriptor

__all__ = ["FORMATS", "REGISTRY_FORMATS", "EncodingSpec", "RecordEncodeError", "RegistryError", "RegistryOptions", "SchemaMappingError",
           "avro_schema", "derived_schema", "encode_batch", "encode_payloads", "frame", "header", "json_schema",
           "message_indexes", "protobuf_descriptor", "protobuf_message_class", "record_full_name",
           "registry_options", "resolve_encoding", "split_header", "subject_name"]
