"""Self-signed serving certificates for the operator's HTTPS endpoints, made without `cryptography` in the
operator's process.

The metrics endpoint serves as controller-runtime's metrics server does: `tls.crt` and `tls.key` from a
certificate directory when one is given (a cert-manager Certificate's Secret mounted there, say), else a
self-signed certificate made at start and kept only in memory (`serving_context`). The self-signed one names
the pod, localhost, 127.0.0.1 and, in a cluster, the DNS names of the `kubetrain-operator-metrics` Service
(`service_names`: the namespace from `POD_NAMESPACE`, the cluster domain from the pod's DNS search list),
so a scraper that dials the Service and is given the certificate verifies it instead of skipping the
check. The training-progress endpoint makes its own self-signed CA certificate the same way
(`self_signed_pem`, used by `kubetrain.common.progress.tls`).

Each pair is made in a child Python process (`python -m kubetrain.common.servingcert`): `cryptography`
takes about 9 MiB once imported, and the operator stays under 50 MiB at rest (bench/operator_at_rest.py).
A pair reaches `ssl` through an anonymous in-memory file (`memfd_create`, `load_pem`), so no key is ever
written to a disk or a directory (the root filesystem is read-only in the shipped Deployment).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import ssl
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["METRICS_SERVICE", "load_pem", "self_signed_pem", "service_names", "serving_context"]

CERT_NAME = "tls.crt"
KEY_NAME = "tls.key"
METRICS_VALIDITY = datetime.timedelta(days=365)
METRICS_SERVICE = "kubetrain-operator-metrics"
"""The Service in front of the metrics listener (manifests/base/operator/service.yaml)."""
RESOLV_CONF = Path("/etc/resolv.conf")


def service_names(
    service: str, *, environ: Mapping[str, str] = os.environ, resolv_conf: Path = RESOLV_CONF
) -> list[str]:
    """The DNS names of `service` in the pod's namespace (`POD_NAMESPACE`): `<svc>`, `<svc>.<ns>`,
    `<svc>.<ns>.svc` and `<svc>.<ns>.svc.<domain>`, the domain read from the `svc.<domain>` entry of the
    pod's DNS search list (`cluster.local` without one). None outside a cluster (no `POD_NAMESPACE`)."""
    namespace = environ.get("POD_NAMESPACE", "").strip()
    if not namespace:
        return []
    names = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
    return [*names, f"{service}.{namespace}.svc.{_cluster_domain(resolv_conf)}"]


def _cluster_domain(resolv_conf: Path) -> str:
    try:
        lines = resolv_conf.read_text().splitlines()
    except OSError:
        return "cluster.local"
    for line in lines:
        fields = line.split()
        if fields[:1] == ["search"]:
            found = next((f.removeprefix("svc.") for f in fields[1:] if f.startswith("svc.")), None)
            if found:
                return found.rstrip(".")
    return "cluster.local"


async def serving_context(cert_dir: str | None) -> ssl.SSLContext:
    """A server-side context from `cert_dir`'s tls.crt/tls.key, or a new self-signed pair when None.

    ValueError naming the flag's value when the directory lacks the files."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir is not None:
        cert, key = Path(cert_dir) / CERT_NAME, Path(cert_dir) / KEY_NAME
        if not (cert.is_file() and key.is_file()):
            raise ValueError(f"--metrics-cert-path={cert_dir}: expected {CERT_NAME} and {KEY_NAME} in it")
        ctx.load_cert_chain(cert, key)
        return ctx
    hostname = socket.gethostname()
    pem = await self_signed_pem(
        [hostname, "localhost", "127.0.0.1", *service_names(METRICS_SERVICE)],
        common_name=f"kubetrain-metrics@{hostname}",
        valid=METRICS_VALIDITY,
    )
    load_pem(ctx, pem)
    return ctx


def load_pem(context: ssl.SSLContext, pem: bytes) -> None:
    """Make `context` serve `pem` (a certificate followed by its key) for new connections. `ssl` loads only
    from files: an anonymous in-memory one, closed at once."""
    fd = os.memfd_create("kubetrain-tls")
    try:
        os.write(fd, pem)
        context.load_cert_chain(f"/proc/self/fd/{fd}")  # the key follows the certificate in the same file
    finally:
        os.close(fd)


async def self_signed_pem(
    names: Sequence[str],
    *,
    common_name: str,
    valid: datetime.timedelta,
    ca: bool = False,
    now: datetime.datetime | None = None,
) -> bytes:
    """A new P-256 key and a self-signed certificate for `names` (DNS names or IP addresses), valid from 5
    minutes before `now` until `now + valid`, as PEM: the certificate, then the key. With `ca` it is also a
    CA (basic constraints, certificate signing), so a client can verify it with the certificate alone.
    Made in a child process (see the module docstring); RuntimeError with its stderr when that fails."""
    argv = [sys.executable, "-m", __name__, "--common-name", common_name]
    argv += ["--seconds", str(int(valid.total_seconds()))]
    argv += ["--now", (now or datetime.datetime.now(datetime.UTC)).isoformat()]
    argv += ["--ca"] if ca else []
    child = await asyncio.create_subprocess_exec(
        *argv, *names, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"cannot make a self-signed certificate: {err.decode(errors='replace')[-500:]}")
    return out


def generate(
    names: Sequence[str], *, common_name: str, valid: datetime.timedelta, ca: bool, now: datetime.datetime
) -> bytes:
    """`self_signed_pem`'s work, in this process: only the child (and tests) call it."""
    import ipaddress  # noqa: PLC0415  (only in the child process: see the module docstring)

    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: PLC0415

    def general_name(name: str) -> x509.GeneralName:
        try:
            return x509.IPAddress(ipaddress.ip_address(name))
        except ValueError:
            return x509.DNSName(name)

    key = ec.generate_private_key(ec.SECP256R1())
    key_id = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    # Each certificate has a subject of its own (the key's identifier beside the common name) and names its
    # key: a client that trusts a bundle of several (one per operator replica, all for the same names) finds
    # the one that signed the certificate it is served; with one subject for all, OpenSSL took the first.
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.SERIAL_NUMBER, key_id.digest.hex()),
        ]
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a peer's clock slightly behind still agrees
        .not_valid_after(now + valid)
        .add_extension(x509.SubjectAlternativeName([general_name(n) for n in dict.fromkeys(names)]), False)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(key_id, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(key_id), critical=False)
    )
    if ca:
        usage = x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=False, encipher_only=False, decipher_only=False,
        )  # fmt: skip
        builder = builder.add_extension(usage, critical=True)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
    cert = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM) + key_pem


def _main(argv: Sequence[str]) -> bytes:
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description="a self-signed pair as PEM")
    parser.add_argument("names", nargs="+")
    parser.add_argument("--common-name", required=True)
    parser.add_argument("--seconds", type=int, required=True)
    parser.add_argument("--now", type=datetime.datetime.fromisoformat, required=True)
    parser.add_argument("--ca", action="store_true")
    args = parser.parse_args(argv)
    valid = datetime.timedelta(seconds=args.seconds)
    return generate(args.names, common_name=args.common_name, valid=valid, ca=args.ca, now=args.now)


if __name__ == "__main__":
    sys.stdout.buffer.write(_main(sys.argv[1:]))
