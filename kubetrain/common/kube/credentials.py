"""Where the API server is and how to prove who we are: in-cluster config and kubeconfig files, read here.

Why not kubernetes_asyncio's loader for everything: importing it costs about 60 MiB of resident memory
(its generated API, over a thousand modules), most of an idle operator's footprint, for what is a few
dozen lines of YAML reading in the common cases. So this module reads what operators meet in practice:
the in-cluster ServiceAccount (its token file re-read when the kubelet rotates it), and kubeconfig users
with a token, a token file, a client certificate and key (files or `-data`), or basic auth; clusters with
a CA (file or data), `insecure-skip-tls-verify`, `tls-server-name` and `proxy-url`. Users whose
credentials come from a plugin (`exec`, `auth-provider`: cloud logins) are handed to kubernetes_asyncio,
imported only then, which also refreshes those tokens.

`$KUBECONFIG` may list several files, as for kubectl: the first file that defines a name wins, and the
current context is the first one set.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Credentials", "KubeconfigError", "load_credentials"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeconfigError(ValueError):
    """No usable credentials: the message says which file or setting and what is wrong."""


@dataclass(frozen=True)
class Credentials:
    """What `KubeApiClient` needs to reach and authenticate to an API server."""

    host: str
    ca_file: str | None = None
    ca_data: str | None = None
    """PEM text of the CA bundle (a kubeconfig's certificate-authority-data, decoded)."""
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    """Read again whenever it changes: bound ServiceAccount tokens are rotated by the kubelet."""
    username: str | None = None
    password: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy: str | None = None
    plugin: Any = None
    """For exec/auth-provider users: the kubernetes_asyncio Configuration that produces their tokens."""
    _token_cache: dict[str, tuple[float, str]] = field(default_factory=dict, compare=False, repr=False)

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_pem is not None and self.key_pem is not None:
            _load_chain_from_memory(ctx, self.cert_pem, self.key_pem)
        elif self.cert_file:
            ctx.load_cert_chain(self.cert_file, keyfile=self.key_file)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    async def headers(self) -> dict[str, str]:
        """The Authorization header of the next request (empty for client-certificate users)."""
        if self.plugin is not None:
            settings = await self.plugin.auth_settings()
            return {
                a["key"]: a["value"] for a in settings.values() if a.get("in") == "header" and a.get("value")
            }
        token = self._current_token()
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self.username or self.password:
            pair = f"{self.username or ''}:{self.password or ''}".encode()
            return {"Authorization": f"Basic {base64.b64encode(pair).decode()}"}
        return {}

    def _current_token(self) -> str | None:
        if self.token_file is None:
            return self.token
        mtime = os.stat(self.token_file).st_mtime
        cached = self._token_cache.get(self.token_file)
        if cached is None or cached[0] != mtime:
            cached = (mtime, Path(self.token_file).read_text().strip())
            self._token_cache[self.token_file] = cached
        return cached[1]


async def load_credentials(kubeconfig: str | None = None, *, context: str | None = None) -> Credentials:
    """In client-go's order: `kubeconfig` if given; else $KUBECONFIG; else in-cluster; else ~/.kube/config."""
    if kubeconfig is None and context is None and not os.environ.get("KUBECONFIG"):
        in_cluster = _in_cluster()
        if in_cluster is not None:
            return in_cluster
    paths = [Path(kubeconfig)] if kubeconfig else _default_paths()
    merged = _merge([_read(p) for p in paths if kubeconfig or p.exists()], paths)
    return await _from_kubeconfig(merged, context, kubeconfig)


def _in_cluster() -> Credentials | None:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    token = SERVICE_ACCOUNT_DIR / "token"
    if not host or not port or not token.exists():
        return None
    host = f"[{host}]" if ":" in host else host
    ca = SERVICE_ACCOUNT_DIR / "ca.crt"
    return Credentials(
        f"https://{host}:{port}", ca_file=str(ca) if ca.exists() else None, token_file=str(token)
    )


def _default_paths() -> list[Path]:
    listed = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [Path.home() / ".kube" / "config"]


def _read(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as err:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML: {err}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a mapping")
    return loaded


def _merge(configs: list[dict[str, Any]], paths: list[Path]) -> dict[str, Any]:
    if not configs:
        raise KubeconfigError(
            f"no kubeconfig found (looked at {', '.join(map(str, paths))}) and not running in a cluster"
        )
    merged: dict[str, Any] = {"clusters": {}, "users": {}, "contexts": {}, "current-context": None}
    for config in configs:
        for section in ("clusters", "users", "contexts"):
            for entry in config.get(section) or ():
                if isinstance(entry, dict) and entry.get("name") is not None:
                    merged[section].setdefault(entry["name"], entry.get(section[:-1]) or {})
        merged["current-context"] = merged["current-context"] or config.get("current-context")
    return merged


async def _from_kubeconfig(merged: dict[str, Any], context: str | None, path: str | None) -> Credentials:
    name = context or merged["current-context"]
    if not name:
        raise KubeconfigError("the kubeconfig sets no current-context; pass --context")
    ctx = merged["contexts"].get(name)
    if ctx is None:
        raise KubeconfigError(f"no context {name!r} in the kubeconfig (has: {', '.join(merged['contexts'])})")
    cluster = merged["clusters"].get(ctx.get("cluster"))
    if not cluster or not cluster.get("server"):
        raise KubeconfigError(f"context {name!r} names cluster {ctx.get('cluster')!r}, which has no server")
    user: Mapping[str, Any] = merged["users"].get(ctx.get("user")) or {}
    if "exec" in user or "auth-provider" in user:
        return await _with_plugin(path, name)
    return Credentials(
        host=str(cluster["server"]).rstrip("/"),
        ca_file=cluster.get("certificate-authority"),
        ca_data=_decoded(cluster.get("certificate-authority-data"), "certificate-authority-data"),
        cert_pem=_raw(user.get("client-certificate-data"), "client-certificate-data"),
        key_pem=_raw(user.get("client-key-data"), "client-key-data"),
        cert_file=user.get("client-certificate"),
        key_file=user.get("client-key"),
        token=user.get("token"),
        token_file=user.get("tokenFile"),
        username=user.get("username"),
        password=user.get("password"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name"),
        proxy=cluster.get("proxy-url"),
    )


async def _with_plugin(path: str | None, context: str) -> Credentials:
    """An exec/auth-provider user: kubernetes_asyncio runs the plugin (imported only here: ~60 MiB)."""
    from kubernetes_asyncio import config as kube_config  # noqa: PLC0415
    from kubernetes_asyncio.client import Configuration  # noqa: PLC0415

    cfg = Configuration()
    await kube_config.load_kube_config(
        config_file=path, context=context, client_configuration=cfg, persist_config=False
    )
    return Credentials(
        host=str(cfg.host).rstrip("/"),
        ca_file=cfg.ssl_ca_cert,
        cert_file=cfg.cert_file,
        key_file=cfg.key_file,
        insecure=not cfg.verify_ssl,
        tls_server_name=cfg.tls_server_name,
        proxy=cfg.proxy,
        plugin=cfg,
    )


def _raw(value: object, what: str) -> bytes | None:
    if value is None:
        return None
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:
        raise KubeconfigError(f"the kubeconfig's {what} is not base64") from None


def _decoded(value: object, what: str) -> str | None:
    raw = _raw(value, what)
    return None if raw is None else raw.decode()


def _load_chain_from_memory(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl loads a client certificate only from files: write both to a private directory for the call."""
    with tempfile.TemporaryDirectory(prefix="kubetrain-tls-") as tmp:
        cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        ctx.load_cert_chain(str(cert_path), keyfile=str(key_path))
