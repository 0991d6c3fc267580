"""The webhook sink's options: what each option means, its default, and ``${ENV:NAME}`` references resolved
where requests start."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from connectors.env import ENV_REF
from connectors.env import resolve_env as resolve_env_of
from connectors.errors import OptionError, TransientError
from connectors.options import OptionReader
from connectors.redact import redact_url
from connectors.retry import Backoff, Retry
from sinks.webhook.signing import SECRETS_EXPECTED, signing_keys

__all__ = ["WebhookOptions", "resolve_env", "METHODS", "FORMATS", "CONTENT_TYPES", "DEFAULT_RETRY_ON"]

METHODS = ("POST", "PUT", "PATCH")
FORMATS = ("json", "ndjson")
CONTENT_TYPES = {"json": "application/json", "ndjson": "application/x-ndjson"}
DEFAULT_RETRY_ON = "408,429,5xx"
_STATUS_MASK = re.compile(r"^[1-5][0-9x][0-9x]$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def resolve_env(value: str, *, what: str, where: str = "this executor") -> str:
    """Replace every ``${ENV:NAME}`` in `value` by the environment variable NAME (read now, here)."""
    return resolve_env_of(value, sink="webhook-sink", what=what, where=where)


def _canonical_header(name: str) -> str:
    """``x-api-key`` → ``X-Api-Key`` (Spark lowercases option names; HTTP header names are case-insensitive)."""
    return "-".join(word[:1].upper() + word[1:] for word in name.split("-"))


def _parse_retry_on(text: str) -> tuple[str, ...]:
    masks = tuple(token.strip().lower() for token in text.split(",") if token.strip())
    if not masks or not all(_STATUS_MASK.match(m) for m in masks):
        raise OptionError("retryOn", text, "comma-separated status codes or masks, e.g. '5xx,429' or '502,503,504'")
    return masks


def _signing_secret(reader: OptionReader) -> str | None:
    """The ``signingSecret`` option, checked now unless it names environment variables (read where requests start)."""
    secret = reader.string("signingSecret")
    if secret is not None and not ENV_REF.search(secret):
        try:
            signing_keys(secret)
        except ValueError as exc:
            raise OptionError("signingSecret", "<hidden>", f"{SECRETS_EXPECTED}: {exc}") from None
    return secret


def _verify(text: str) -> bool | str:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    return text  # a CA bundle file or directory, read where the request is made


def _http_url(reader: OptionReader, option: str, *, required: bool = False) -> str | None:
    url = reader.string(option, required=required)
    if url is None:
        return None
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - reading .port validates it (ValueError)
    except ValueError:
        raise OptionError(option, redact_url(url), "an http:// or https:// URL with a valid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(option, redact_url(url), "an http:// or https:// URL, e.g. https://example.com/events")
    return url


def _one_credential(urls: Mapping[str, str | None], headers: Mapping[str, str]) -> None:
    """Refuse user info in a URL together with ``header.Authorization``: both are credentials for the same
    header, and sending either one silently would authenticate as someone the user may not expect."""
    if "Authorization" not in headers:
        return
    for option, url in urls.items():
        if url is not None and "@" in (urlsplit(url).netloc or ""):
            raise OptionError(option, redact_url(url), "a URL without user info when header.Authorization is set: "
                              "both are credentials for the Authorization header; keep one (user info is sent as "
                              "'Basic', the header as given)")


@dataclass(frozen=True)
class WebhookOptions:
    """The options of the webhook sink (see `WebhookSinkDataSource`). Secrets stay ``${ENV:…}`` references."""

    url: str
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()
    batch_size: int = 100
    format: str = "json"
    max_in_flight: int = 4
    timeout_s: float = 10.0
    max_retries: int = 5
    backoff: Backoff = Backoff(0.2, 10.0)
    retry_on: tuple[str, ...] = ("408", "429", "5xx")
    verify: bool | str = True
    idempotency_header: str = "Idempotency-Key"
    commit_url: str | None = None
    abort_url: str | None = None
    dead_letter_url: str | None = None
    signing_secret: str | None = None  # Standard Webhooks secrets, space-separated; may hold ${ENV:NAME}
    max_requests_per_second: float | None = None  # per task; None: unpaced
    client_cert: str | None = None  # a PEM file on the executors: the certificate (and its key, without client_key)
    client_key: str | None = None

    @classmethod
    def read(cls, reader: OptionReader) -> "WebhookOptions":
        headers = []
        for name, value in sorted(reader.prefixed("header.").items()):
            if not _HEADER_NAME.match(name):
                raise OptionError(f"header.{name}", value, "a header name made of letters, digits and -_.!#$%&'*+^`|~")
            if "\r" in value or "\n" in value:
                raise OptionError(f"header.{name}", "<hidden>", "a value without line breaks")
            headers.append((_canonical_header(name), value))
        urls = {option: _http_url(reader, option, required=option == "url")
                for option in ("url", "commitUrl", "abortUrl", "deadLetterUrl")}
        _one_credential(urls, dict(headers))
        idempotency = reader.string("idempotencyHeader", "Idempotency-Key")
        if not _HEADER_NAME.match(idempotency):
            raise OptionError("idempotencyHeader", idempotency, "a header name, e.g. 'Idempotency-Key'")
        client_cert, client_key = reader.string("clientCert"), reader.string("clientKey")
        if client_key and not client_cert:
            raise OptionError("clientCert", None, "the client certificate's PEM file when 'clientKey' is given")
        base = reader.duration_us("retryBackoff", 200_000)
        cap = reader.duration_us("retryBackoffMax", 10_000_000)
        return cls(
            url=urls["url"],
            method=reader.choice("method", METHODS, "POST"),
            headers=tuple(headers),
            batch_size=reader.integer("batchSize", 100, minimum=1, maximum=1_000_000),
            format=reader.choice("format", FORMATS, "json"),
            max_in_flight=reader.integer("maxInFlight", 4, minimum=1, maximum=256),
            timeout_s=reader.duration_us("timeout", 10_000_000) / 1e6,
            max_retries=reader.integer("maxRetries", 5, minimum=0, maximum=1000),
            backoff=Backoff(base / 1e6, max(base, cap) / 1e6),
            retry_on=_parse_retry_on(reader.string("retryOn", DEFAULT_RETRY_ON)),
            verify=_verify(reader.string("verify", "true")),
            idempotency_header=idempotency,
            commit_url=urls["commitUrl"],
            abort_url=urls["abortUrl"],
            dead_letter_url=urls["deadLetterUrl"],
            signing_secret=_signing_secret(reader),
            max_requests_per_second=reader.number("maxRequestsPerSecond", None, above=0),
            client_cert=client_cert,
            client_key=client_key,
        )

    def retryable(self, status: int) -> bool:
        code = str(status)
        return any(all(m in ("x", c) for m, c in zip(mask, code)) for mask in self.retry_on)

    @property
    def retry(self) -> Retry:
        return Retry(self.max_retries + 1, self.backoff, (TransientError,))

    def resolved_headers(self, where: str) -> dict[str, str]:
        """The headers with ``${ENV:NAME}`` references replaced, read from the environment of `where`."""
        out = {"Content-Type": CONTENT_TYPES[self.format]}
        for name, value in self.headers:
            out[name] = resolve_env(value, what=f"header.{name}", where=where)
        return out
