"""The progress endpoint's serving certificate, made by the operator itself, and its CA's ConfigMaps.

At start the operator makes a self-signed ECDSA P-256 certificate in memory, for the Service's DNS names
(`<service>`, `<service>.<ns>`, `<service>.<ns>.svc`, `<service>.<ns>.svc.<cluster-domain>`) and any
extra host of `--progress-url`. It reads no Secret and writes none: the key never leaves the process.
Rotation: a new certificate at each start, and again at 2/3 of its lifetime (`VALIDITY`, 90 days) by a
process that runs that long; the serving context loads the new pair for new connections.

The certificate is its own CA: it is published, as `ca.crt`, to the ConfigMap `kubetrain-progress-ca` of
each namespace whose pods report (`CaPublisher`), which the pods mount (`ProgressInjection`). After a
rotation the ConfigMaps are updated; the kubelet refreshes mounted ConfigMaps within a minute or so, and
the pods' helper reads the CA file afresh for each connection.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubetrain.common.errors import AlreadyExists, ApiError
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import CONFIGMAPS

__all__ = ["VALIDITY", "CaPublisher", "ServingPair", "load_into", "self_signed"]

log = logging.getLogger(__name__)

VALIDITY = datetime.timedelta(days=90)
CA_KEY = "ca.crt"


@dataclass(frozen=True)
class ServingPair:
    cert_pem: bytes
    key_pem: bytes
    not_after: datetime.datetime

    def renew_in(self, now: datetime.datetime) -> float:
        """Seconds from `now` until the pair should be replaced: at 2/3 of its lifetime."""
        due = self.not_after - VALIDITY / 3
        return max(0.0, (due - now).total_seconds())


def self_signed(hosts: Iterable[str], *, now: datetime.datetime | None = None) -> ServingPair:
    """A new key and a self-signed serving certificate (also a CA, so that it verifies itself) for `hosts`."""
    names = list(dict.fromkeys(hosts))
    now = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else "kubetrain-progress")]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a node clock slightly behind still agrees
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName([_san(name) for name in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ServingPair(cert.public_bytes(serialization.Encoding.PEM), key_pem, now + VALIDITY)


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
        key_agreement=False, key_cert_sign=True, crl_sign=False, encipher_only=False, decipher_only=False,
    )  # fmt: skip


def load_into(context: ssl.SSLContext, pair: ServingPair) -> None:
    """Make `context` serve `pair` (for new connections). `ssl` loads only from files: the pair is written
    to a private temporary directory (0700) and removed at once."""
    with tempfile.TemporaryDirectory(prefix="kubetrain-progress-") as directory:
        crt, key = Path(directory, "tls.crt"), Path(directory, "tls.key")
        crt.write_bytes(pair.cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pair.key_pem)
        context.load_cert_chain(crt, key)


class CaPublisher:
    """Keeps `ca.crt` of the ConfigMap `name` in each namespace asked for equal to the current certificate."""

    def __init__(self, api: ApiClient, cert_pem: bytes, *, name: str = "kubetrain-progress-ca") -> None:
        self._api, self._name = api, name
        self._pem = cert_pem.decode()
        self._done: set[str] = set()

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset(self._done)

    async def ensure(self, namespace: str) -> None:
        """Publish to `namespace` once (a failure is logged, and retried at the next call)."""
        if namespace in self._done:
            return
        try:
            await self._write(namespace)
        except ApiError as err:
            log.warning("cannot publish the progress CA to %s/%s: %s", namespace, self._name, err)
            return
        self._done.add(namespace)

    async def rotate(self, cert_pem: bytes) -> None:
        """A new certificate: update every namespace published so far."""
        self._pem = cert_pem.decode()
        published, self._done = self._done, set()
        for namespace in sorted(published):
            await self.ensure(namespace)

    async def _write(self, namespace: str) -> None:
        body = {
            "metadata": {"name": self._name, "labels": {"app.kubernetes.io/managed-by": "kubetrain"}},
            "data": {CA_KEY: self._pem},
        }
        try:
            await self._api.create(CONFIGMAPS, namespace, body)
        except AlreadyExists:
            await self._api.patch(CONFIGMAPS, namespace, self._name, {"data": {CA_KEY: self._pem}})
