"""The progress endpoint's serving certificate, made by the operator itself, and its CA's ConfigMaps.

At start the operator makes a self-signed ECDSA P-256 certificate for the Service's DNS names
(`<service>`, `<service>.<ns>`, `<service>.<ns>.svc`, `<service>.<ns>.svc.<cluster-domain>`) and any
extra host of `--progress-url`, in a child process (`kubetrain.common.servingcert`: the operator itself never
loads `cryptography`, about 9 MiB), which hands the pair back through a pipe. It reads no Secret and writes
none: the key reaches no disk, `ssl` loads it from an in-memory file.
Rotation: a new certificate at each start, and again at 2/3 of its lifetime (`VALIDITY`, 90 days) by a
process that runs that long; the serving context loads the new pair for new connections.

The certificate is its own CA: it is published, as `ca.crt`, to the ConfigMap `kubetrain-progress-ca` of
each namespace whose pods report (`CaPublisher`), which the pods mount (`ProgressInjection`). With several
replicas each adds its own certificate to the bundle (expired ones and a replica's previous one leave
it). After a rotation the ConfigMaps are updated; the kubelet refreshes mounted ConfigMaps within a minute
or so. The bundle's certificates are read by OpenSSL through `ssl`, not `cryptography`.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

from kubetrain.common.errors import AlreadyExists, ApiError, Conflict, NotFound
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import CONFIGMAPS, Obj
from kubetrain.common.servingcert import load_pem, self_signed_pem

__all__ = ["MAX_BUNDLE", "VALIDITY", "CaPublisher", "ServingPair", "bundle", "load_into", "self_signed"]

log = logging.getLogger(__name__)

VALIDITY = datetime.timedelta(days=90)
CA_KEY = "ca.crt"
MAX_BUNDLE = 8
"""Certificates kept in a namespace's bundle: one per live operator replica, and some to spare."""
_KEY_BEGIN = b"-----BEGIN PRIVATE KEY-----"


@dataclass(frozen=True)
class ServingPair:
    cert_pem: bytes
    key_pem: bytes
    not_after: datetime.datetime

    def renew_in(self, now: datetime.datetime) -> float:
        """Seconds from `now` until the pair should be replaced: at 2/3 of its lifetime."""
        due = self.not_after - VALIDITY / 3
        return max(0.0, (due - now).total_seconds())


async def self_signed(hosts: Iterable[str], *, now: datetime.datetime | None = None) -> ServingPair:
    """A new key and a self-signed serving certificate (also a CA, so that it verifies itself) for `hosts`,
    made in a child process (`kubetrain.common.servingcert`): the operator never loads `cryptography`."""
    names = list(dict.fromkeys(hosts))
    now = now or datetime.datetime.now(datetime.UTC)
    pem = await self_signed_pem(
        names, common_name=names[0] if names else "kubetrain-progress", valid=VALIDITY, ca=True, now=now
    )
    at = pem.index(_KEY_BEGIN)
    return ServingPair(pem[:at], pem[at:], now + VALIDITY)


def load_into(context: ssl.SSLContext, pair: ServingPair) -> None:
    """Make `context` serve `pair` (for new connections), from memory: the key touches no disk."""
    load_pem(context, pair.cert_pem + pair.key_pem)


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
    now = now or datetime.datetime.now(datetime.UTC)
    (mine,) = _certificates(ours.decode())
    drop = {mine.fingerprint, *(c.fingerprint for c in _certificates(old.decode()))}
    try:
        others = _certificates(existing)
    except ssl.SSLError:
        others = []  # not ours to keep: rewritten whole
    kept = [c for c in others if c.not_after > now and c.fingerprint not in drop]
    kept.sort(key=_age)
    chosen = sorted([*kept[len(kept) - MAX_BUNDLE + 1 :], mine], key=_age)
    return "".join(ssl.DER_cert_to_PEM_cert(c.der) for c in chosen)


@dataclass(frozen=True)
class _Certificate:
    der: bytes
    fingerprint: bytes
    not_before: datetime.datetime
    not_after: datetime.datetime


def _certificates(pem: str) -> list[_Certificate]:
    """The CA certificates of a PEM bundle, read by OpenSSL through `ssl` (so the operator needs no
    `cryptography`); ssl.SSLError when the text holds none. Only CA certificates are returned: every
    replica's certificate is one."""
    if not pem.strip():
        return []
    store = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    store.load_verify_locations(cadata=pem)
    found = []
    for der, info in zip(store.get_ca_certs(binary_form=True), store.get_ca_certs(), strict=True):
        found.append(
            _Certificate(der, hashlib.sha256(der).digest(), _time(info["notBefore"]), _time(info["notAfter"]))
        )
    return found


def _time(text: object) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ssl.cert_time_to_seconds(str(text)), datetime.UTC)


def _age(cert: _Certificate) -> tuple[datetime.datetime, bytes]:
    """Oldest first; the fingerprint breaks ties (certificates made within one second)."""
    return cert.not_before, cert.fingerprint
