"""The Redis sink's client side: redis-py through the gate that names the ``redis`` extra (`import_redis`), a
client of one node (`connect`), the settings of a connection to any node of the URL's cluster (`node_settings`),
and redis-py's errors translated into this project's (`mapped`, `security_error`, `redirect_error`)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from connectors.errors import DeliveryError, OptionError, SinkError, TransientError, map_errors
from connectors.redact import redact_url
from connectors.registry import import_extra

__all__ = ["import_redis", "connect", "mapped", "node_settings", "redirect_error", "security_error"]

#: Where redis-py's TLS settings go: the query of option ``url`` (``rediss://…?ssl_ca_certs=/path/ca.pem``).
CA_SETTING = "ssl_ca_certs"


def import_redis() -> ModuleType:
    """``redis`` (redis-py), through the gate that names the ``redis`` extra."""
    return import_extra("redis", "redis", "the redis sink", "redis-py")


def connect(url: str, timeout_s: float) -> Any:
    """A ``redis.Redis`` client of the node at `url` (it connects on first use), every call bounded by `timeout_s`."""
    redis = import_redis()
    # lib_version given: redis-py otherwise asks importlib.metadata for its own version on every new
    # connection, a scan of sys.path, which is long in a Spark Python worker (figures: bench/README.md).
    try:
        from redis.driver_info import DriverInfo  # noqa: PLC0415 - the redis extra; redis-py ≥ 7: lib_version alone is deprecated
        version = {"driver_info": DriverInfo(lib_version=redis.__version__)}
    except ImportError:
        version = {"lib_version": redis.__version__}
    return redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=min(timeout_s, 5.0), **version)


def node_settings(url: str) -> dict[str, Any]:
    """What a ``redis.connection.Connection`` to any node of `url`'s cluster takes from `url` besides the address:
    ``connection_class`` (``SSLConnection`` for ``rediss://``), the ACL user, password and the TLS settings of its
    query (``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``…), as redis-py parses them."""
    import_redis()
    from redis.connection import parse_url  # noqa: PLC0415 - the redis extra's client

    settings = parse_url(url)
    for key in ("host", "port", "db", "path"):
        settings.pop(key, None)
    return settings


def security_error(exc: BaseException, url: str) -> SinkError | None:
    """The error to raise for a TLS handshake the client refused (an untrusted certificate, one that does not name
    the host): an `OptionError` on ``url`` naming the setting that supplies the CA; None for any other error."""
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" not in text and "certificate verify failed" not in text:
        return None
    where = redact_url(url)
    if "mismatch" in text or "doesn't match" in text:
        return OptionError("url", where, f"the host name or address the server's TLS certificate names: Redis at "
                           f"{where} presented a certificate for another host ({text}); connect by a name the "
                           "certificate holds (its subject alternative names)")
    return OptionError("url", where, f"a server whose TLS certificate this client trusts: Redis at {where} presented "
                       f"a certificate signed by a CA the client does not know ({text}); give that CA in the url's "
                       f"query, ?{CA_SETTING}=/path/to/ca.pem (a PEM file), or add it to the system's trust store")


def redirect_error(exc: BaseException, where: str) -> SinkError | None:
    """The error to raise for a ``MOVED`` or ``ASK`` reply that reached the sink (a node of a Redis Cluster written to
    as a single node), naming the reply and the option that fixes it; None for any other error."""
    redis = import_redis()
    if not isinstance(exc, redis.exceptions.AskError):  # MovedError is an AskError
        return None
    kind = "MOVED" if isinstance(exc, redis.exceptions.MovedError) else "ASK"
    return SinkError(f"redis-sink: Redis at {where} answered {kind} {exc.slot_id} {exc.host}:{exc.port}: the node is "
                     f"in cluster mode, and the key's hash slot is served by {exc.host}:{exc.port}. The sink writes to "
                     "a Redis Cluster only in cluster mode: set option 'cluster' to 'auto' (the default, which asks "
                     "the node) or 'true'")


def mapped(url: str):
    """Translate redis-py errors into this project's: connection trouble is transient, the rest is not."""
    return map_errors(lambda exc: _translate(exc, redact_url(url)))


def _translate(exc: Exception, where: str) -> SinkError | None:
    redis = import_redis()
    known = security_error(exc, where) or redirect_error(exc, where)
    if known is not None:
        return known
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return SinkError(f"redis-sink: the ACL user of option 'url' may not run this at {where}: {exc} (NOPERM). Give "
                         "the user the keys of options 'keyPrefix' and 'commitKeyPrefix' (e.g. ~<keyPrefix>* "
                         "~<commitKeyPrefix>*) and the commands +@write +@read +@transaction +@scripting +info, or "
                         "write under prefixes it may touch")
    if isinstance(exc, redis.AuthenticationError):
        return SinkError(f"redis-sink: authentication failed at {where}: {exc}; check the user name and password "
                         "in option 'url' (redis[s]://user:password@host:port)")
    loading = isinstance(exc, redis.BusyLoadingError) or "LOADING" in str(exc)
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)) or loading:
        return TransientError(f"redis-sink: lost Redis at {where}: {exc}")
    if isinstance(exc, redis.ResponseError):
        return DeliveryError(f"redis-sink: Redis at {where} refused a command: {exc}")
    if isinstance(exc, redis.RedisError):
        return SinkError(f"redis-sink: Redis at {where}: {exc}")
    return None
