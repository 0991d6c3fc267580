"""A throwaway certificate authority for the secured test servers (`ThrowawayCA`): a CA, the certificates it
issues for servers (named ``127.0.0.1`` and ``localhost``) and clients, as PEM files in one folder.

Made with ``cryptography`` (the test extra), imported when a CA is made. Keys are unencrypted PKCS#8 (what
redis-server, Kafka's PEM key stores and librdkafka all read); certificates are valid for a day, from an hour ago.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

__all__ = ["Issued", "ServerTls", "ThrowawayCA"]

_HOSTS = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files; `chain` holds the key then the certificate (Kafka's PEM key store)."""

    cert: Path
    key: Path
    chain: Path


class ThrowawayCA:
    """A self-signed CA in `directory` (``ca.pem``, its key kept in memory only) that issues certificates.

    ``ThrowawayCA(dir).issue("redis")`` → `Issued` for a server reachable at 127.0.0.1 and localhost;
    ``issue("alice", client=True)`` a client certificate (mutual TLS). Two CAs never trust each other's
    certificates: a second one is how a test shows an untrusted server.
    """

    def __init__(self, directory: Path, name: str = "impulse test CA") -> None:
        from cryptography import x509  # noqa: PLC0415 - the test extra's cryptography, only where a CA is made
        from cryptography.hazmat.primitives import hashes  # noqa: PLC0415 - the test extra, as above
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 - the test extra, as above
        from cryptography.x509.oid import NameOID  # noqa: PLC0415 - the test extra, as above

        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder().subject_name(self._name).issuer_name(self._name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(hours=1))
                      .not_valid_after(now + datetime.timedelta(days=1))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.ca = self.dir / "ca.pem"
        self.ca.write_bytes(_pem(self._cert))

    def issue(self, name: str, client: bool = False, hosts: Sequence[str] = _HOSTS, expired: bool = False) -> Issued:
        """A certificate signed by this CA, for a server at `hosts` or (`client`) a client named `name`; written as
        ``<name>.pem``, ``<name>.key`` and ``<name>-chain.pem``. `expired`: valid for a day that ended an hour ago."""
        from cryptography import x509  # noqa: PLC0415 - the test extra's cryptography, only where a CA is made
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415 - the test extra, as above
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 - the test extra, as above
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: PLC0415 - the test extra, as above

        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        names = [x509.IPAddress(ipaddress.ip_address(h)) if _is_ip(h) else x509.DNSName(h) for h in hosts]
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                   .issuer_name(self._name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1, days=expired))
                   .not_valid_after(now + (-datetime.timedelta(hours=1) if expired else datetime.timedelta(days=1)))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage, *([] if client else
                                                                  [ExtendedKeyUsageOID.CLIENT_AUTH])]), critical=False))
        if not client:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        issued = Issued(self.dir / f"{name}.pem", self.dir / f"{name}.key", self.dir / f"{name}-chain.pem")
        issued.cert.write_bytes(_pem(cert))
        issued.key.write_bytes(key_pem)
        issued.chain.write_bytes(key_pem + _pem(cert))
        for path in (issued.key, issued.chain):
            path.chmod(0o600)
        return issued

    def server_tls(self, name: str) -> "ServerTls":
        """`ServerTls` of a server certificate `name` issued now, with this CA."""
        return ServerTls(self.ca, self.issue(name))


def _pem(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - the test extra's cryptography

    return cert.public_bytes(serialization.Encoding.PEM)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class ServerTls:
    """What a TLS server needs: the CA its peers trust (`ca`, a PEM file) and its own certificate (`server`)."""

    ca: Path
    server: Issued
