"""The endpoint's own certificate and its CA ConfigMaps: a self-signed pair for the Service's names that a
client verifies with the certificate alone, made in a child process so that the operator never loads
`cryptography`, and a `ca.crt` bundle that keeps each replica's certificate (expired ones and a replica's
rotated one leave it), written only when it changes."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import subprocess
import sys
import threading
from typing import Any

from cryptography import x509

from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import CONFIGMAPS
from kubetrain.common.progress.tls import (
    MAX_BUNDLE,
    VALIDITY,
    CaPublisher,
    ServingPair,
    bundle,
    load_into,
    self_signed,
)
from kubetrain.common.servingcert import generate

HOSTS = ("kubetrain-operator.kubetrain-system.svc", "127.0.0.1")


def pair_here(now: datetime.datetime | None = None) -> ServingPair:
    """A pair as `self_signed` makes it, but in this process (many certificates, quickly)."""
    now = now or datetime.datetime.now(datetime.UTC)
    pem = generate(HOSTS, common_name=HOSTS[0], valid=VALIDITY, ca=True, now=now)
    at = pem.index(b"-----BEGIN PRIVATE KEY-----")
    return ServingPair(pem[:at], pem[at:], now + VALIDITY)


async def test_the_pair_names_the_hosts_and_loads_into_a_server_context() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    pair = await self_signed(HOSTS, now=now)
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    assert cert.not_valid_after_utc == now + VALIDITY
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [HOSTS[0]]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == [HOSTS[1]]
    assert pair.not_after == now + VALIDITY
    assert pair.renew_in(now) == (VALIDITY * 2 / 3).total_seconds()
    load_into(ssl.create_default_context(ssl.Purpose.CLIENT_AUTH), pair)


def test_the_operator_makes_and_bundles_certificates_without_loading_cryptography() -> None:
    probe = (
        "import asyncio, sys\n"
        "from kubetrain.common.progress.tls import bundle, self_signed\n"
        "pairs = [asyncio.run(self_signed(['kubetrain-operator.x.svc'])) for _ in range(2)]\n"
        "text = bundle(pairs[0].cert_pem.decode(), pairs[1].cert_pem)\n"
        "print(text.count('BEGIN CERTIFICATE'), 'cryptography' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["2", "False"], done.stdout


def test_the_bundle_keeps_other_replicas_drops_expired_and_rotated_and_is_bounded() -> None:
    now = datetime.datetime.now(datetime.UTC)
    expired = pair_here(now - VALIDITY * 2).cert_pem.decode()
    others = [pair_here(now - datetime.timedelta(hours=i + 1)) for i in range(MAX_BUNDLE + 2)]
    old, ours = pair_here(), pair_here()
    existing = expired + old.cert_pem.decode() + "".join(o.cert_pem.decode() for o in others)
    got = x509.load_pem_x509_certificates(bundle(existing, ours.cert_pem, old.cert_pem).encode())
    assert len(got) == MAX_BUNDLE
    assert got[-1] == x509.load_pem_x509_certificate(ours.cert_pem)
    newest = {x509.load_pem_x509_certificate(o.cert_pem) for o in others[: MAX_BUNDLE - 1]}
    assert set(got[:-1]) == newest, "the other replicas' newest, none expired, not our previous one"
    assert bundle("not a certificate", ours.cert_pem) == ours.cert_pem.decode()


def _certs(*what: Any) -> set[x509.Certificate]:
    """The certificates of a stored ConfigMap, or of pairs."""
    if isinstance(what[0], dict):
        return set(x509.load_pem_x509_certificates(what[0]["data"]["ca.crt"].encode()))
    return {x509.load_pem_x509_certificate(pair.cert_pem) for pair in what}


HOME = "kubetrain-system"
CA = "kubetrain-progress-ca"


async def test_the_replicas_register_at_home_and_each_namespace_gets_the_bundle_whole() -> None:
    api = InMemoryApiClient()
    first, second = pair_here(), pair_here()
    one, two = CaPublisher(api, b"", home=HOME), CaPublisher(api, b"", home=HOME)
    await one.rotate(first.cert_pem)  # each replica's first certificate, at its start
    await two.rotate(second.cert_pem)
    await one.ensure("team-a")  # reads the home bundle: the other replica's certificate included
    stored = await api.get(CONFIGMAPS, "team-a", CA)
    assert _certs(stored) == _certs(first, second) == _certs(await api.get(CONFIGMAPS, HOME, CA))
    assert stored["metadata"]["labels"]["kubetrain.io/progress-ca"] == "true"
    await two.ensure("team-a")  # already there: nothing written
    again = await api.get(CONFIGMAPS, "team-a", CA)
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    third = pair_here()
    await one.rotate(third.cert_pem)
    stored = await api.get(CONFIGMAPS, "team-a", CA)
    assert _certs(stored) == _certs(second, third)
    assert one.namespaces == {"team-a"}


async def test_a_certificate_a_user_adds_is_not_kept_and_a_deleted_copy_is_written_again() -> None:
    """Defect 8: a namespace's copy is the home bundle, rewritten whole (never merged with what is there),
    and a copy changed or deleted is written again when the watch says so, with no restart."""
    api = InMemoryApiClient()
    ours, users = pair_here(), pair_here()
    publisher = CaPublisher(api, b"", home=HOME)
    await publisher.rotate(ours.cert_pem)
    await publisher.ensure("team-a")
    stored = await api.get(CONFIGMAPS, "team-a", CA)
    tampered = stored["data"]["ca.crt"] + users.cert_pem.decode()
    await api.patch(CONFIGMAPS, "team-a", CA, {"data": {"ca.crt": tampered, "extra.crt": "x"}})
    assert publisher.changed("team-a", await api.get(CONFIGMAPS, "team-a", CA))
    await publisher.ensure("team-a")
    stored = await api.get(CONFIGMAPS, "team-a", CA)
    assert _certs(stored) == _certs(ours) and set(stored["data"]) == {"ca.crt"}
    assert not publisher.changed("team-a", stored), "our own write is not a change"
    await api.delete(CONFIGMAPS, "team-a", CA)
    assert publisher.changed("team-a", None)
    await publisher.ensure("team-a")
    assert _certs(await api.get(CONFIGMAPS, "team-a", CA)) == _certs(ours)


async def test_a_namespace_asked_for_before_the_first_certificate_never_gets_an_empty_bundle() -> None:
    # At start the operator makes its certificate in a child process while the controllers already create
    # pods: a namespace asked for meanwhile waits for it (the pods mount what is published when they
    # start), and one asked for past the wait is published with it, never with an empty ca.crt.
    api, ours = InMemoryApiClient(), pair_here()
    publisher = CaPublisher(api, b"", home=HOME)
    waiting = asyncio.ensure_future(publisher.ensure("team-a"))
    gave_up = asyncio.ensure_future(publisher.ensure("team-b", wait=0.01))
    await gave_up  # its 0.01 s wait is over, and it wrote nothing
    assert not waiting.done()
    assert [cm for ns in ("team-a", "team-b") for cm in (await api.list(CONFIGMAPS, ns)).items] == []
    await publisher.rotate(ours.cert_pem)
    await waiting
    for namespace in ("team-a", "team-b"):
        assert _certs(await api.get(CONFIGMAPS, namespace, CA)) == _certs(ours)
    assert publisher.namespaces == {"team-a", "team-b"}


async def test_outside_a_cluster_the_bundle_is_this_processs_certificate_alone() -> None:
    api = InMemoryApiClient()
    ours, users = pair_here(), pair_here()
    await api.create(
        CONFIGMAPS, "team-a", {"metadata": {"name": CA}, "data": {"ca.crt": users.cert_pem.decode()}}
    )
    publisher = CaPublisher(api, b"")
    await publisher.rotate(ours.cert_pem)
    await publisher.ensure("team-a")
    assert _certs(await api.get(CONFIGMAPS, "team-a", CA)) == _certs(ours)


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> str:
    """A TLS handshake over a socket pair, the client checking `host`: "ok", or the client's error."""
    near, far = socket.socketpair()

    def serve() -> None:
        try:
            with server.wrap_socket(far, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(near, server_hostname=host):
            return "ok"
    except ssl.SSLCertVerificationError as err:
        return err.verify_message
    finally:
        near.close()
        thread.join(timeout=10)


def test_a_client_that_trusts_the_bundle_verifies_every_replicas_certificate_wherever_it_stands() -> None:
    # Every replica's certificate is for the same names. A client (OpenSSL, as Python's `ssl` and the
    # Kubeflow clients use it) looks its issuer up by subject: with one subject for all it took the first
    # of the bundle and refused every other ("self-signed certificate") -- the operator that rolled out
    # after another, whose certificate stands second, was refused by every pod.
    pairs = [pair_here() for _ in range(3)]
    text = ""
    for pair in pairs:
        text = bundle(text, pair.cert_pem)
    assert text.count("BEGIN CERTIFICATE") == 3
    client = ssl.create_default_context(cadata=text)
    for pair in pairs:
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        load_into(server, pair)
        assert _handshake(server, client, HOSTS[0]) == "ok"
    stranger = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_into(stranger, pair_here())
    assert _handshake(stranger, client, HOSTS[0]) == "self-signed certificate"
