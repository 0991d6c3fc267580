"""The Schema Registry calls, made on the driver once per query start: the subject, register or look up, the
subject's compatibility rule; the result is an `EncodingSpec` (format, schema text, id) for the executors.

Options (`registry_options`), for side ``value`` (or ``key``):
``schema.registry.url`` (required), ``schema.registry.<name>`` (passed to confluent-kafka's
``SchemaRegistryClient``: ``basic.auth.user.info``, ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``...; ``${ENV:NAME}`` is read from the driver's environment), ``<side>.subject.name.strategy``
= ``topic`` (default, ``<topic>-<side>``) | ``record`` (the record's full name) | ``topic_record``
(``<topic>-<full name>``), ``auto.register.schemas`` (default true), ``use.latest.version`` (default false),
``<side>.schema`` (a schema text used instead of the one derived from the Spark schema).
Needs confluent-kafka's schema-registry extra (imported when `resolve_encoding` runs).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from google.protobuf import descriptor_pb2
from pyspark.sql.types import StructType

from connectors.env import resolve_env
from connectors.errors import OptionError, SinkError

from .encode import REGISTRY_FORMATS, EncodingSpec
from .schemas import avro_schema, json_schema, protobuf_descriptor

__all__ = ["RegistryError", "RegistryOptions", "STRATEGIES", "derived_schema", "record_full_name",
           "registry_options", "resolve_encoding", "subject_name"]

STRATEGIES = ("topic", "record", "topic_record")
_PREFIX = "schema.registry."
_SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json-schema": "JSON"}
_SINK = "kafka-sink"


class RegistryError(SinkError):
    """The registry refused or could not be reached; the message names the subject (or the option) and quotes
    the registry's reason."""


@dataclass(frozen=True)
class RegistryOptions:
    """The registry options of one side (``value`` or ``key``), validated. `client_conf` is what
    ``SchemaRegistryClient`` gets (``url`` included), secrets already resolved."""

    side: str
    client_conf: dict[str, Any] = field(hash=False)
    strategy: str = "topic"
    auto_register: bool = True
    use_latest: bool = False
    schema: str | None = None


def _boolean(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(name, text, "true or false")
    return text.strip().lower() == "true"


def registry_options(options: Mapping[str, str], side: str = "value") -> RegistryOptions:
    """Validate the registry options of `side` from the sink's `options` (names as given; Spark lowercases them,
    and so does this). ``OptionError`` naming the option for a missing URL, an unknown strategy, a bad boolean."""
    options = {key.lower(): value for key, value in options.items()}
    url = options.get(_PREFIX + "url")
    if not url:
        raise OptionError(_PREFIX + "url", url, "the Schema Registry's URL (http[s]://host:port[/path]), required "
                                                "by the avro, protobuf and json-schema formats")
    conf: dict[str, Any] = {}
    for key, value in options.items():
        if key.startswith(_PREFIX):
            conf[key[len(_PREFIX):]] = resolve_env(value, sink=_SINK, what=f"option '{key}'", where="the driver")
    strategy_option = f"{side}.subject.name.strategy"
    strategy = options.get(strategy_option, "topic").strip().lower()
    if strategy not in STRATEGIES:
        raise OptionError(strategy_option, options[strategy_option], " | ".join(STRATEGIES))
    return RegistryOptions(side=side, client_conf=conf, strategy=strategy,
                           auto_register=_boolean(options, "auto.register.schemas", True),
                           use_latest=_boolean(options, "use.latest.version", False),
                           schema=options.get(f"{side}.schema"))


def derived_schema(fmt: str, struct: StructType, name: str = "Record", namespace: str = "impulse") -> str:
    """The schema text of `struct` in `fmt` as the registry takes it: Avro JSON, base64 of a serialized
    ``FileDescriptorProto`` (package `namespace`), or a JSON Schema titled ``<namespace>.<name>``."""
    if fmt == "avro":
        return json.dumps(avro_schema(struct, name, namespace), separators=(",", ":"))
    if fmt == "protobuf":
        return base64.b64encode(protobuf_descriptor(struct, name, namespace).SerializeToString()).decode()
    if fmt == "json-schema":
        return json.dumps(json_schema(struct, f"{namespace}.{name}" if namespace else name), separators=(",", ":"))
    raise ValueError(f"format {fmt!r} has no registry schema; expected one of {', '.join(REGISTRY_FORMATS)}")


def record_full_name(fmt: str, schema: str) -> str:
    """The record name the ``record`` strategies use: Avro's ``namespace.name``, Protobuf's first message
    ``package.Message``, JSON Schema's ``title``. ``ValueError`` if the schema has none."""
    if fmt == "avro":
        parsed = json.loads(schema)
        name = parsed.get("name", "")
        namespace = parsed.get("namespace")
        return name if ("." in name or not namespace) else f"{namespace}.{name}"
    if fmt == "protobuf":
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema))
        return ".".join(p for p in (fdp.package, fdp.message_type[0].name) if p)
    title = json.loads(schema).get("title")
    if not title:
        raise ValueError("the JSON Schema has no 'title': the record subject strategies need one")
    return title


def _record_name(fmt: str, text: str, strategy: str) -> str:
    """The record's full name when `strategy` needs one; else only checks that `text` parses."""
    if strategy != "topic":
        return record_full_name(fmt, text)
    if fmt == "protobuf":
        if not descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True)).message_type:
            raise ValueError("the file descriptor has no message")
    elif not isinstance(json.loads(text), dict):
        raise ValueError("a schema is a JSON object")
    return ""


def subject_name(strategy: str, topic: str, side: str, record_name: str) -> str:
    """The subject of `topic`'s `side` (``value``/``key``) under `strategy` (``topic``, ``record``,
    ``topic_record``), as Confluent's TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy name it."""
    if strategy == "topic":
        return f"{topic}-{side}"
    if strategy == "record":
        return record_name
    if strategy == "topic_record":
        return f"{topic}-{record_name}"
    raise ValueError(f"subject name strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}")


def resolve_encoding(fmt: str, struct: StructType, topic: str, options: RegistryOptions,
                     name: str | None = None, namespace: str = "impulse") -> EncodingSpec:
    """Register or look up the schema of `topic`'s records in format `fmt` and return the executors' spec.

    The schema is `options.schema` if given, else derived from `struct` (record `name`, default ``Value`` or
    ``Key``, in `namespace`). With `use_latest`, the subject's latest version is used (its text and id) instead;
    else with `auto_register` the schema is registered (the subject's compatibility rule applies: a refused
    schema is a `RegistryError` quoting the registry), else it must already be registered under the subject.
    One call or two to the registry; nothing is cached across calls.
    """
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: PLC0415 - confluent-kafka's registry client (avro, protobuf, jsonschema extras)
    from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: PLC0415 - confluent-kafka's registry client (avro, protobuf, jsonschema extras)

    if fmt not in REGISTRY_FORMATS:
        raise ValueError(f"format {fmt!r} has no registry; expected one of {', '.join(REGISTRY_FORMATS)}")
    side = options.side
    text = options.schema or derived_schema(fmt, struct, name or side.capitalize(), namespace)
    schema_option = f"{side}.schema"
    try:
        record = _record_name(fmt, text, options.strategy)
    except Exception as exc:  # JSON, base64 or protobuf's DecodeError: the text is not a schema of this format
        expected = ("a base64 serialized FileDescriptorProto" if fmt == "protobuf" else f"a valid {fmt} schema")
        raise OptionError(schema_option, text[:200], f"{expected} ({type(exc).__name__}: {exc})") from exc
    subject = subject_name(options.strategy, topic, side, record)
    schema = Schema(text, _SCHEMA_TYPES[fmt])
    url = options.client_conf.get("url")
    try:
        client = SchemaRegistryClient(dict(options.client_conf))
    except Exception as exc:  # confluent-kafka validates the configuration here
        raise OptionError(_PREFIX + "*", sorted(options.client_conf), f"options SchemaRegistryClient accepts ({exc})") \
            from exc
    try:
        if options.use_latest:
            latest = client.get_latest_version(subject)
            schema_id = latest.schema_id
            text = (client.get_schema(schema_id, fmt="serialized").schema_str if fmt == "protobuf"
                    else latest.schema.schema_str)
        elif options.auto_register:
            schema_id = client.register_schema(subject, schema)
        else:
            schema_id = client.lookup_schema(subject, schema).schema_id
    except SchemaRegistryError as exc:
        action = ("reading the latest version of" if options.use_latest else
                  "registering the schema under" if options.auto_register else "looking up the schema under")
        hint = {409: " (the subject's compatibility rule refuses this schema: make the change compatible, or "
                     "change the rule)",
                404: (" (nothing registered: register it, or set auto.register.schemas=true)"
                      if not options.auto_register or options.use_latest else ""),
                401: " (check option 'schema.registry.basic.auth.user.info', USER:PASSWORD)", 403: " (check the credentials' rights)"}
        raise RegistryError(f"{_SINK}: Schema Registry at {url} refused {action} subject '{subject}': HTTP "
                            f"{exc.http_status_code} error {exc.error_code}: {exc.error_message}"
                            f"{hint.get(exc.http_status_code, '')}") from exc
    except Exception as exc:  # connection refused, TLS, timeouts (httpx's errors)
        if "CERTIFICATE_VERIFY_FAILED" in str(exc) and "mismatch" in str(exc):
            raise OptionError(_PREFIX + "url", url, f"a URL whose host the Schema Registry's TLS certificate names "
                              f"({type(exc).__name__}: {exc})") from exc
        if "CERTIFICATE_VERIFY_FAILED" in str(exc) or "certificate verify failed" in str(exc):
            option = _PREFIX + "ssl.ca.location"
            raise OptionError(option, options.client_conf.get("ssl.ca.location", "(not set)"),
                              f"the CA (a PEM file) that signed the TLS certificate of the Schema Registry at {url}: "
                              f"the client does not trust it ({type(exc).__name__}: {exc}); set '{option}' to that "
                              "CA's file") from exc
        raise RegistryError(f"{_SINK}: cannot reach the Schema Registry at {url} (option 'schema.registry.url') "
                            f"for subject '{subject}': {type(exc).__name__}: {exc}") from exc
    return EncodingSpec(fmt, text, schema_id)
