"""The progress endpoint's serving certificate, made by the operator itself, and its CA's ConfigMaps.

At start the operator makes a self-signed ECDSA P-256 certificate for the Service's DNS names
(`<service>`, `<service>.<ns>`, `<service>.<ns>.svc`, `<service>.<ns>.svc.<cluster-domain>`) and any
extra host of `--progress-url`, in a child process (`kubetrain.common.servingcert`: the operator itself never
loads `cryptography`, about 9 MiB), which hands the pair back through a pipe. It reads no Secret and writes
none: the key reaches no disk, `ssl` loads it from an in-memory file.
Rotation: a new certificate at each start, and again at 2/3 of its lifetime (`VALIDITY`, 90 days) by a
process that runs that long; the serving context loads the new pair for new connections.

The certificate is its own CA: it is published, as `ca.crt`, to the ConfigMap `kubetrain-progress-ca` of
each namespace whose pods report (`CaPublisher`), which the pods mount (`ProgressInjection`). Several
replicas (leader and standbys all serve the endpoint behind one Service) each register their certificate
in the same ConfigMap of the operator's own namespace (`home`), keeping the others' that have not expired
(a replica's previous one leaves it); the namespaces' ConfigMaps are copies of that bundle, rewritten whole,
so a certificate someone adds to a namespace's copy is never kept. The copies are watched (label
`kubetrain.io/progress-ca`): one changed or deleted is written again at once, with no restart. Outside a
cluster (no home namespace) the bundle is this process's certificate alone. After a rotation the ConfigMaps
are updated; the kubelet refreshes mounted ConfigMaps within a minute or so. A namespace asked for
before the process's first certificate is made waits for it (pods are created once their CA is
published): a bundle without it is never published. The bundle's certificates are
read by OpenSSL through `ssl`, not `cryptography`.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import logging
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubetrain.common.errors import AlreadyExists, ApiError, Conflict, NotFound
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import CONFIGMAPS, Obj
from kubetrain.common.servingcert import load_pem, self_signed_pem

__all__ = [
    "LABEL",
    "MAX_BUNDLE",
    "VALIDITY",
    "CaPublisher",
    "ServingPair",
    "bundle",
    "load_into",
    "self_signed",
]

log = logging.getLogger(__name__)

VALIDITY = datetime.timedelta(days=90)
CA_KEY = "ca.crt"
LABEL = "kubetrain.io/progress-ca"
"""Marks the CA ConfigMaps, which the operator watches (and nothing else of the namespaces' ConfigMaps)."""
LABELS = {"app.kubernetes.io/managed-by": "kubetrain", LABEL: "true"}
MAX_BUNDLE = 8
"""Certificates kept in a namespace's bundle: one per live operator replica, and some to spare."""
FIRST_CERTIFICATE_WAIT = 10.0
"""Seconds `ensure` waits, at start, for the process's first certificate (made in about a second)."""
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
    """Keeps the replicas' bundle in `ca.crt` of the ConfigMap `name` in `home` and in each namespace asked
    for (see the module docstring). Writes are read-modify-write with the resourceVersion as a
    precondition (Conflict: read again)."""

    def __init__(
        self, api: ApiClient, cert_pem: bytes, *, name: str = "kubetrain-progress-ca", home: str = ""
    ) -> None:
        self._api, self._name, self._home = api, name, home
        self._pem, self._old = cert_pem, b""
        self._text = cert_pem.decode()
        """The bundle the namespaces get: the home ConfigMap's, as last read or written."""
        self._done: set[str] = set()
        self._asked: set[str] = set()
        """Namespaces asked for before this process had its first certificate: published at `rotate`."""
        self._made = asyncio.Event()
        if cert_pem:
            self._made.set()

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset(self._done)

    @property
    def name(self) -> str:
        return self._name

    @property
    def text(self) -> str:
        return self._text

    async def ensure(self, namespace: str, *, wait: float = FIRST_CERTIFICATE_WAIT) -> None:
        """Publish to `namespace` once (a failure is logged, and retried at the next call). Before this
        process has its first certificate, waits up to `wait` seconds for it: a bundle without it is
        never written (pods would mount a CA that cannot verify the endpoint); past that, the namespace is
        published once the certificate is made."""
        if namespace in self._done:
            return
        if not self._made.is_set():
            self._asked.add(namespace)
            try:
                await asyncio.wait_for(self._made.wait(), wait)
            except TimeoutError:
                log.warning("no progress certificate yet: the CA goes to %s once it is made", namespace)
                return
        try:
            await self._read_home()
            await self._write(namespace, lambda current: self._text)
        except ApiError as err:
            log.warning("cannot publish the progress CA to %s/%s: %s", namespace, self._name, err)
            return
        self._done.add(namespace)

    def changed(self, namespace: str, config_map: Obj | None) -> bool:
        """The copy in `namespace` is now `config_map` (None: deleted): whether it must be written again
        (it is one published and no longer holds the bundle); if so, the next `ensure` writes it."""
        if namespace not in self._done or namespace == self._home:
            return False
        if config_map is not None and (config_map.get("data") or {}).get(CA_KEY) == self._text:
            return False
        self._done.discard(namespace)
        return True

    async def rotate(self, cert_pem: bytes) -> None:
        """A new certificate: register it in the home bundle, then update every namespace published so far
        (the old one leaves the bundle)."""
        self._pem, self._old = cert_pem, self._pem
        self._text = cert_pem.decode()
        if self._home:
            try:
                await self._write(self._home, self._registered)
            except ApiError as err:
                log.warning("cannot register the progress CA in %s/%s: %s", self._home, self._name, err)
        self._made.set()
        published, self._done, self._asked = self._done | self._asked, set(), set()
        for namespace in sorted(published):
            await self.ensure(namespace)

    def _registered(self, current: Obj | None) -> str:
        self._text = bundle((current or {}).get("data", {}).get(CA_KEY, ""), self._pem, self._old)
        return self._text

    async def _read_home(self) -> None:
        """The home bundle as it is now (another replica may have registered since)."""
        if not self._home:
            return
        try:
            current = await self._api.get(CONFIGMAPS, self._home, self._name)
        except NotFound:
            return
        text = (current.get("data") or {}).get(CA_KEY)
        if isinstance(text, str) and text.strip():
            self._text = text

    async def _write(self, namespace: str, content: Callable[[Obj | None], str], tries: int = 3) -> None:
        for attempt in range(tries):
            try:
                current = await self._api.get(CONFIGMAPS, namespace, self._name)
            except NotFound:
                current = None
            try:
                await self._put(namespace, current, content(current))
                return
            except (Conflict, AlreadyExists):
                if attempt == tries - 1:
                    raise

    async def _put(self, namespace: str, current: Obj | None, text: str) -> None:
        data = {CA_KEY: text}
        if current is None:
            body = {"metadata": {"name": self._name, "labels": LABELS}, "data": data}
            await self._api.create(CONFIGMAPS, namespace, body)
        elif current.get("data") != data or not LABELS.items() <= objects.labels(current).items():
            version = current["metadata"]["resourceVersion"]
            patch = {
                "metadata": {"resourceVersion": version, "labels": LABELS},
                "data": _whole(current, data),
            }
            await self._api.patch(CONFIGMAPS, namespace, self._name, patch)


def _whole(current: Obj, data: dict[str, str]) -> dict[str, str | None]:
    """A merge patch of `data` that also removes every other key someone added."""
    return {**dict.fromkeys(current.get("data") or {}), **data}


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
