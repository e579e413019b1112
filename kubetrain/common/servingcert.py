"""The TLS context an HTTPS endpoint of the operator serves with (the metrics endpoint).

As controller-runtime's metrics server: `tls.crt` and `tls.key` from a certificate directory when one is
given (a cert-manager Certificate's Secret mounted there, say), else a self-signed certificate made at
start and kept only in memory. Scrapers then skip verification (`insecureSkipVerify` in a
ServiceMonitor) or are given the directory's CA.

The self-signed pair is made in a child Python process: `cryptography` takes about 9 MiB once imported,
and the operator stays under 50 MiB at rest (bench/operator_at_rest.py). The pair reaches `ssl` through
an anonymous in-memory file (`memfd_create`), so nothing is written to disk (the root filesystem is
read-only in the shipped Deployment).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import sys
from pathlib import Path

__all__ = ["serving_context"]

CERT_NAME = "tls.crt"
KEY_NAME = "tls.key"


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
    pem = await _self_signed_pem()
    fd = os.memfd_create("kubetrain-metrics-tls")
    try:
        os.write(fd, pem)
        ctx.load_cert_chain(f"/proc/self/fd/{fd}")  # the key follows the certificate in the same file
    finally:
        os.close(fd)
    return ctx


async def _self_signed_pem() -> bytes:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", __name__, socket.gethostname(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"cannot make a self-signed certificate: {err.decode(errors='replace')[-500:]}")
    return out


def _generate(hostname: str) -> bytes:
    """A P-256 key and a certificate for `hostname` and localhost, valid a year, as PEM (cert, then key)."""
    import datetime  # noqa: PLC0415  (only in the child process: see the module docstring)
    import ipaddress  # noqa: PLC0415

    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"kubetrain-metrics@{hostname}")])
    now = datetime.datetime.now(datetime.UTC)
    names = [
        x509.DNSName(hostname),
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM) + key_pem


if __name__ == "__main__":
    sys.stdout.buffer.write(_generate(sys.argv[1] if len(sys.argv) > 1 else "localhost"))
