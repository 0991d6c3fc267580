"""The one place that hides secrets in what the project prints: URLs and option maps."""

from __future__ import annotations

import re
from typing import Mapping
from urllib.parse import urlsplit, urlunsplit

__all__ = ["redact_url", "redact_options", "is_secret", "SPARK_DEFAULT_REDACTION", "SPARK_REDACTION_REGEX"]

HIDDEN = "<hidden>"
_SECRET_KEY = re.compile(r"pass|secret|token|auth|credential|sasl\.|api[-_.]?key|ssl\.key", re.IGNORECASE)

#: Spark's own default of ``spark.redaction.regex`` (a Java regex)
SPARK_DEFAULT_REDACTION = r"(?i)secret|password|token|access[.]?key"
#: ``spark.redaction.regex`` hiding what Spark hides by default and every name `is_secret` hides: Spark hides the
#: value of a property, environment variable or data source option whose name *or value* it matches, in its UI,
#: event log, ``SET`` and the options its plans show (``spark.sql.redaction.options.regex`` adds to it). Spark's
#: default misses ``schema.registry.basic.auth.user.info``, a ``kafka.sasl.jaas.config`` without ``password=``,
#: ``kafka.sasl.oauthbearer.*``; the same text is a Python and a Java regex.
SPARK_REDACTION_REGEX = f"{SPARK_DEFAULT_REDACTION}|{_SECRET_KEY.pattern}"


def redact_url(url: str) -> str:
    """`url` without user info, query and fragment (where secrets hide), for messages and reports.

    A value that does not parse as a URL is hidden whole.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return HIDDEN
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def is_secret(key: str) -> bool:
    """Whether an option or client setting named `key` holds a secret (password, token, SASL, API key…)."""
    return bool(_SECRET_KEY.search(key))


def redact_options(options: Mapping[str, object]) -> dict[str, str]:
    """Options as they may be shown: secret-looking values hidden, URLs as `redact_url` gives them."""
    out = {}
    for key, value in options.items():
        text = str(value)
        out[key] = HIDDEN if is_secret(key) else redact_url(text) if "://" in text else text
    return out
