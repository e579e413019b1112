"""Throw-away certificates for one control plane, made with the `openssl` command line tool.

One ECDSA CA signs the API server's serving certificate (SANs 127.0.0.1 and localhost) and the admin
client certificate (CN=kubetrain-admin, O=system:masters: the x509 authenticator takes the user name from
CN and the groups from O). A separate key pair signs ServiceAccount tokens. Everything is valid for two
days and lives in the plane's temporary directory, so nothing outlives a test session.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Pki", "ServingTls", "make_pki", "make_serving_tls", "sign_serving"]

_DAYS = "2"
_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


@dataclass(frozen=True)
class Pki:
    """Paths of the files one control plane needs."""

    ca_crt: Path
    ca_key: Path
    serving_crt: Path
    serving_key: Path
    admin_crt: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed ({result.returncode}): {result.stderr.strip()}")


def _signed(directory: Path, name: str, subject: str, extensions: str) -> tuple[Path, Path]:
    """A key and a certificate for `subject`, signed by the CA in `directory`."""
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "req", "-new", *_EC, "-keyout", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=directory
    )
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", _DAYS, "-extfile", f"{name}.ext", "-out", f"{name}.crt",
        cwd=directory,
    )  # fmt: skip
    return directory / f"{name}.crt", directory / f"{name}.key"


def _make_ca(directory: Path, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-new", *_EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", _DAYS,
        "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip


@dataclass(frozen=True)
class ServingTls:
    """A CA of its own and a serving pair for 127.0.0.1, named as controller-runtime's webhook server
    expects them in its certificate directory (`tls.crt`, `tls.key`)."""

    ca_crt: Path
    crt: Path
    key: Path

    @property
    def directory(self) -> Path:
        return self.crt.parent


def make_serving_tls(directory: Path, name: str) -> ServingTls:
    """A new CA (`name`-ca) and a certificate for a server of ours on 127.0.0.1 (e.g. a webhook server the
    API server calls): the CA goes into the registration's caBundle."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the `openssl` command is needed to make test certificates")
    _make_ca(directory, f"{name}-ca")
    crt, key = _signed(
        directory,
        "tls",
        f"/CN={name}",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n",
    )
    return ServingTls(ca_crt=directory / "ca.crt", crt=crt, key=key)


def _serving_extensions(ips: tuple[str, ...], dns: tuple[str, ...]) -> str:
    names = ",".join([*(f"IP:{ip}" for ip in ips), *(f"DNS:{name}" for name in dns)])
    usage = "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    return f"subjectAltName={names}\n{usage}"


def sign_serving(directory: Path, name: str, ips: tuple[str, ...]) -> tuple[Path, Path]:
    """A serving certificate and key (`name`.crt, `name`.key) for `ips`, signed by the plane's CA in
    `directory` (e.g. a real kubelet's, whose certificate the API server checks)."""
    return _signed(directory, name, f"/CN={name}", _serving_extensions(ips, ()))


_APISERVER_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")


def make_pki(directory: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    """Create the CA, serving, admin and ServiceAccount-signing material in `directory`. `extra_ips`: more
    addresses the API server is reached at (the real node's bridge, the `kubernetes` Service)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the `openssl` command is needed to make the test control plane's certificates")
    _make_ca(directory, "kubetrain-test-ca")
    serving_crt, serving_key = _signed(
        directory,
        "apiserver",
        "/CN=kube-apiserver",
        _serving_extensions(("127.0.0.1", *extra_ips), _APISERVER_DNS if extra_ips else ("localhost",)),
    )
    admin_crt, admin_key = _signed(
        directory,
        "admin",
        "/O=system:masters/CN=kubetrain-admin",
        "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n",
    )
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=directory)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
    return Pki(
        ca_crt=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_crt=serving_crt,
        serving_key=serving_key,
        admin_crt=admin_crt,
        admin_key=admin_key,
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
