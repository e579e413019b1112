"""The progress endpoint's serving certificate, made by the operator itself, and its CA's ConfigMaps.

At start the operator makes a self-signed ECDSA P-256 certificate in memory, for the Service's DNS names
(`<service>`, `<service>.<ns>`, `<service>.<ns>.svc`, `<service>.<ns>.svc.<cluster-domain>`) and any
extra host of `--progress-url`. It reads no Secret and writes none: the key never leaves the process.
Rotation: a new certificate at each start, and again at 2/3 of its lifetime (`VALIDITY`, 90 days) by a
process that runs that long; the serving context loads the new pair for new connections.

The certificate is its own CA: it is published, as `ca.crt`, to the ConfigMap `kubetrain-progress-ca` of
each namespace whose pods report (`CaPublisher`), which the pods mount (`ProgressInjection`). With several
replicas each adds its own certificate to the bundle (expired ones and a replica's previous one leave
it). After a rotation the ConfigMaps are updated; the kubelet refreshes mounted ConfigMaps within a minute
or so.
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
from typing import TYPE_CHECKING

from kubetrain.common.errors import AlreadyExists, ApiError, Conflict, NotFound
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import CONFIGMAPS, Obj

if TYPE_CHECKING:  # cryptography costs ~8 MiB once imported: loaded when a certificate is first made
    from cryptography import x509

__all__ = ["MAX_BUNDLE", "VALIDITY", "CaPublisher", "ServingPair", "bundle", "load_into", "self_signed"]

log = logging.getLogger(__name__)

VALIDITY = datetime.timedelta(days=90)
CA_KEY = "ca.crt"
MAX_BUNDLE = 8
"""Certificates kept in a namespace's bundle: one per live operator replica, and some to spare."""


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
    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

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
    from cryptography import x509  # noqa: PLC0415

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _usage() -> x509.KeyUsage:
    from cryptography import x509  # noqa: PLC0415

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
    """Keeps this process's certificate in `ca.crt` of the ConfigMap `name` in each namespace asked for.

    `ca.crt` is a bundle: each operator replica (leader and standbys all serve the endpoint behind one
    Service) adds its own certificate and keeps the others' that have not expired, at most `MAX_BUNDLE`,
    the newest, so a pod trusts whichever replica answers. Writes are read-modify-write with the
    resourceVersion as a precondition (Conflict: read again)."""

    def __init__(self, api: ApiClient, cert_pem: bytes, *, name: str = "kubetrain-progress-ca") -> None:
        self._api, self._name = api, name
        self._pem, self._old = cert_pem, b""
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
        """A new certificate: update every namespace published so far (the old one leaves the bundle)."""
        self._pem, self._old = cert_pem, self._pem
        published, self._done = self._done, set()
        for namespace in sorted(published):
            await self.ensure(namespace)

    async def _write(self, namespace: str, tries: int = 3) -> None:
        for attempt in range(tries):
            try:
                current = await self._api.get(CONFIGMAPS, namespace, self._name)
            except NotFound:
                current = None
            try:
                await self._put(namespace, current)
                return
            except (Conflict, AlreadyExists):
                if attempt == tries - 1:
                    raise

    async def _put(self, namespace: str, current: Obj | None) -> None:
        data = {CA_KEY: bundle((current or {}).get("data", {}).get(CA_KEY, ""), self._pem, self._old)}
        if current is None:
            labels = {"app.kubernetes.io/managed-by": "kubetrain"}
            await self._api.create(
                CONFIGMAPS, namespace, {"metadata": {"name": self._name, "labels": labels}, "data": data}
            )
        elif current.get("data", {}).get(CA_KEY) != data[CA_KEY]:
            patch = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}, "data": data}
            await self._api.patch(CONFIGMAPS, namespace, self._name, patch)


def bundle(existing: str, ours: bytes, old: bytes = b"", *, now: datetime.datetime | None = None) -> str:
    """`ours` and the newest of the `existing` certificates that are still valid (not `old`), at most
    `MAX_BUNDLE` in all, oldest first (so publishing the same set again changes nothing)."""
    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415

    now = now or datetime.datetime.now(datetime.UTC)
    mine = x509.load_pem_x509_certificate(ours)
    drop = {mine.fingerprint(hashes.SHA256())}
    if old:
        drop.add(x509.load_pem_x509_certificate(old).fingerprint(hashes.SHA256()))
    try:
        others = x509.load_pem_x509_certificates(existing.encode()) if existing.strip() else []
    except ValueError:
        others = []  # not ours to keep: rewritten whole
    kept = [c for c in others if c.not_valid_after_utc > now and c.fingerprint(hashes.SHA256()) not in drop]
    kept.sort(key=_age)
    chosen = sorted([*kept[len(kept) - MAX_BUNDLE + 1 :], mine], key=_age)
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in chosen)


def _age(cert: x509.Certificate) -> tuple[datetime.datetime, bytes]:
    """Oldest first; the fingerprint breaks ties (certificates made within one second)."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415

    return cert.not_valid_before_utc, cert.fingerprint(hashes.SHA256())
