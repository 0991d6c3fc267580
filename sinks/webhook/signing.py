"""Standard Webhooks signatures: the HMAC keys of ``whsec_`` secrets and the headers that sign one request."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Sequence

__all__ = ["signing_keys", "signature_headers", "SECRETS_EXPECTED"]

_SECRET_PREFIX = "whsec_"
SECRETS_EXPECTED = "one or more space-separated Standard Webhooks secrets 'whsec_<base64>' (or ${ENV:NAME} holding them)"


def signing_keys(secrets: str) -> tuple[bytes, ...]:
    """The HMAC keys of space-separated ``whsec_<base64>`` secrets; ValueError for anything else."""
    keys = []
    for secret in secrets.split():
        if not secret.startswith(_SECRET_PREFIX):
            raise ValueError(f"a secret does not start with {_SECRET_PREFIX!r}")
        try:
            key = base64.b64decode(secret[len(_SECRET_PREFIX):] + "==", validate=False)
        except binascii.Error as exc:
            raise ValueError("a secret is not base64 after its prefix") from exc
        if not key:
            raise ValueError("a secret is empty")
        keys.append(key)
    if not keys:
        raise ValueError("no secret given")
    return tuple(keys)


def signature_headers(keys: Sequence[bytes], message_id: str, body: bytes, now_s: float) -> dict[str, str]:
    """The Standard Webhooks headers of one request: ``webhook-id``, ``webhook-timestamp`` (whole seconds) and
    ``webhook-signature``, one ``v1,<base64 HMAC-SHA256 of "id.timestamp.body">`` per key, space-separated."""
    timestamp = str(int(now_s))
    signed = f"{message_id}.{timestamp}.".encode() + body
    signatures = " ".join("v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
                          for key in keys)
    return {"webhook-id": message_id, "webhook-timestamp": timestamp, "webhook-signature": signatures}
