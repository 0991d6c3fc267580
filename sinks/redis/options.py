"""The Redis sink's options: what each option means, its default, and the combinations refused on the driver."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from connectors.errors import OptionError
from connectors.options import OptionReader
from connectors.redact import redact_url

__all__ = ["RedisOptions", "TARGETS", "DELETES", "parse_address_map"]

TARGETS = ("string", "list", "hash", "stream", "set", "zset")

#: With ``opColumn``, what a row whose op is ``delete`` becomes, by target: the key's or the field's removal.
DELETES = {"string": b"DEL", "hash": b"HDEL"}


@dataclass(frozen=True)
class RedisOptions:
    """The options of the Redis sink (see `RedisSinkDataSource`)."""

    url: str
    target: str
    key_prefix: str
    key_column: str | None
    field_column: str | None
    value_column: str | None
    op_column: str | None
    ttl_s: int | None
    list_operation: str
    max_length: int | None
    commit_key_prefix: str
    timeout_s: float
    dead_letter_key: str | None = None
    score_column: str | None = None
    cluster: str = "auto"  #: ``auto`` (ask the node at `url` once, on the driver), ``true`` or ``false``
    min_replicas: int = 0  #: cluster mode: replicas that must acknowledge each node's writes (``WAIT``)
    #: cluster mode: ``((announced host, port), (reachable host, port))`` pairs: where to connect for a node the
    #: cluster announces at another address (port forwarding, NAT, a proxy)
    address_map: tuple[tuple[tuple[str, int], tuple[str, int]], ...] = ()

    @classmethod
    def read(cls, reader: OptionReader) -> "RedisOptions":
        url = reader.string("url", required=True)
        if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise OptionError("url", redact_url(url), "a redis://, rediss:// or unix:// URL, e.g. redis://localhost:6379/0")
        opts = cls(
            url=url,
            target=reader.choice("target", TARGETS, "string"),
            key_prefix=reader.string("keyPrefix", "") or "",
            key_column=reader.string("keyColumn"),
            field_column=reader.string("fieldColumn"),
            value_column=reader.string("valueColumn"),
            op_column=reader.string("opColumn"),
            ttl_s=reader.integer("ttl", minimum=1),
            list_operation=reader.choice("listOperation", ("append", "prepend"), "append"),
            max_length=reader.integer("maxLength", minimum=1),
            commit_key_prefix=reader.string("commitKeyPrefix", "impulse:commit:"),
            timeout_s=reader.duration_us("timeout", 10_000_000) / 1e6,
            dead_letter_key=reader.string("deadLetterKey") or None,
            score_column=reader.string("scoreColumn"),
            cluster=reader.choice("cluster", ("auto", "true", "false"), "auto"),
            min_replicas=reader.integer("minReplicas", 0, minimum=0),
            address_map=parse_address_map(reader.string("addressMap") or ""),
        )
        if opts.target != "string" and not (opts.key_prefix or opts.key_column):
            raise OptionError("keyPrefix", "", f"a key (keyPrefix, keyColumn or both) for target '{opts.target}': "
                                               "it names the key the rows go to")
        if opts.op_column is not None and opts.target not in DELETES:
            raise OptionError("opColumn", opts.op_column, f"no value for target '{opts.target}': a changelog's deletes "
                                                           "apply to target string (DEL) or hash (HDEL)")
        if opts.max_length is not None and opts.target not in ("list", "stream", "zset"):
            raise OptionError("maxLength", opts.max_length, "no value: maxLength applies to target list, stream "
                                                            "or zset (a set keeps no order to trim by)")
        if (opts.score_column is None) == (opts.target == "zset"):
            raise OptionError("scoreColumn", opts.score_column,
                              "a numeric column for target 'zset' (each member's score)" if opts.target == "zset"
                              else f"no value for target '{opts.target}': scoreColumn applies to target zset")
        opts._check_dead_letter_key()
        if opts.address_map and opts.cluster == "false":
            raise OptionError("addressMap", reader.string("addressMap"), "no value with cluster=false (it maps the "
                                                                         "addresses a cluster announces)")
        if opts.min_replicas and opts.cluster == "false":
            raise OptionError("minReplicas", opts.min_replicas, "0 with cluster=false (WAIT for replicas is done in "
                                                                "cluster mode)")
        return opts

    def _check_dead_letter_key(self) -> None:
        """Refuse a ``deadLetterKey`` that rows or commit records could be written to as well.

        Checked from the options alone: the key rows go to without ``keyColumn``, a name under a non-empty
        ``keyPrefix`` when ``keyColumn`` is set (a row's key could be it), and a name under ``commitKeyPrefix``.
        With an empty ``keyPrefix`` and a ``keyColumn`` any name could be a row's key: that is not checked.
        """
        key = self.dead_letter_key
        if key is None:
            return
        fixed = self.target != "string" and self.key_column is None  # every row goes to the key keyPrefix
        if key == self.key_prefix if fixed else (self.key_prefix and key.startswith(self.key_prefix)):
            rows_go_to = f"the key '{self.key_prefix}'" if fixed else f"keys starting with '{self.key_prefix}'"
            raise OptionError("deadLetterKey", key, f"a key the rows are not written to (they go to {rows_go_to})")
        if key.startswith(self.commit_key_prefix):
            raise OptionError("deadLetterKey", key, f"a key outside commitKeyPrefix '{self.commit_key_prefix}'")


def parse_address_map(text: str) -> tuple[tuple[tuple[str, int], tuple[str, int]], ...]:
    """Option ``addressMap``: comma-separated ``ANNOUNCED=REACHABLE`` pairs of ``host:port`` (spaces ignored), e.g.
    ``10.0.0.5:6379=127.0.0.1:16379``; empty: none. `OptionError` names the option and the pair it cannot read."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        announced, sep, reachable = item.partition("=")
        try:
            if not sep:
                raise ValueError
            pairs.append((_host_port(announced), _host_port(reachable)))
        except ValueError:
            raise OptionError("addressMap", item, "ANNOUNCED=REACHABLE pairs of host:port separated by commas, e.g. "
                                                  "10.0.0.5:6379=127.0.0.1:16379") from None
    announced = [a for a, _ in pairs]
    if len(set(announced)) != len(announced):
        raise OptionError("addressMap", text, "each announced host:port once")
    return tuple(pairs)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(text)
    return host.strip("[]"), int(port)
