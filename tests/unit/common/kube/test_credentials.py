"""Credentials from kubeconfigs and in-cluster config, read without kubernetes_asyncio (except plugins)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.common.kube import credentials as creds
from kubetrain.common.kube.credentials import KubeconfigError, load_credentials

CA_PEM = "-----BEGIN CERTIFICATE-----\nnot-checked-here\n-----END CERTIFICATE-----\n"


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def kubeconfig(
    path: Path, *, users: dict[str, Any], current: str | None = "main", server: str = "https://k:6443"
) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": b64(CA_PEM)}}],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": name}} for name in users],
        "current-context": current,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(autouse=True)
def no_env_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(creds, "SERVICE_ACCOUNT_DIR", tmp_path / "no-service-account")


async def test_a_token_user(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "config", users={"main": {"token": "abc"}})
    got = await load_credentials(str(path))
    assert (got.host, got.ca_data, got.plugin) == ("https://k:6443", CA_PEM, None)
    assert await got.headers() == {"Authorization": "Bearer abc"}


async def test_a_token_file_is_read_again_when_rotated(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    got = await load_credentials(
        str(kubeconfig(tmp_path / "config", users={"main": {"tokenFile": str(token)}}))
    )
    assert await got.headers() == {"Authorization": "Bearer first"}
    token.write_text("second\n")
    os.utime(token, (time.time() + 5, time.time() + 5))
    assert await got.headers() == {"Authorization": "Bearer second"}


async def test_basic_auth_and_cluster_settings(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "config", users={"main": {"username": "u", "password": "p"}})
    config = yaml.safe_load(path.read_text())
    config["clusters"][0]["cluster"].update(
        {
            "insecure-skip-tls-verify": True,
            "tls-server-name": "api.internal",
            "proxy-url": "http://proxy:3128",
        }
    )
    path.write_text(yaml.safe_dump(config))
    got = await load_credentials(str(path))
    assert await got.headers() == {"Authorization": f"Basic {b64('u:p')}"}
    assert (got.insecure, got.tls_server_name, got.proxy) == (True, "api.internal", "http://proxy:3128")


async def test_kubeconfig_env_lists_files_first_one_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = kubeconfig(tmp_path / "a", users={"main": {"token": "from-a"}}, current=None)
    second = kubeconfig(tmp_path / "b", users={"main": {"token": "from-b"}, "other": {"token": "o"}})
    monkeypatch.setenv("KUBECONFIG", f"{first}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{second}")
    got = await load_credentials()
    assert await got.headers() == {"Authorization": "Bearer from-a"}  # user `main` from a; context from b
    other = await load_credentials(context="other")
    assert await other.headers() == {"Authorization": "Bearer o"}


async def test_in_cluster_when_no_kubeconfig_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token")
    (sa / "ca.crt").write_text(CA_PEM)
    monkeypatch.setattr(creds, "SERVICE_ACCOUNT_DIR", sa)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    got = await load_credentials()
    assert (got.host, got.ca_file) == ("https://[fd00::1]:443", str(sa / "ca.crt"))
    assert await got.headers() == {"Authorization": "Bearer sa-token"}


@pytest.mark.parametrize(
    ("users", "current", "message"),
    [
        ({"main": {"token": "x"}}, None, "sets no current-context; pass --context"),
        ({"main": {"token": "x"}}, "nope", "no context 'nope' in the kubeconfig (has: main)"),
        ({"main": {"client-certificate-data": "%%%"}}, "main", "client-certificate-data is not base64"),
    ],
)
async def test_unusable_kubeconfigs_say_why(
    tmp_path: Path, users: dict[str, Any], current: str | None, message: str
) -> None:
    with pytest.raises(KubeconfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await load_credentials(str(kubeconfig(tmp_path / "config", users=users, current=current)))


async def test_no_kubeconfig_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeconfigError, match=r"no kubeconfig found .* and not running in a cluster"):
        await load_credentials()


async def test_an_exec_plugin_user_is_handed_to_kubernetes_asyncio(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-plugin"},
    }
    plugin.write_text(f"import json\nprint(json.dumps({credential!r}))\n")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    got = await load_credentials(str(kubeconfig(tmp_path / "config", users={"main": user})))
    assert got.plugin is not None
    assert {k.lower(): v for k, v in (await got.headers()).items()} == {"authorization": "Bearer from-plugin"}


def test_importing_the_operator_does_not_load_kubernetes_asyncio_aiohttp_or_rich() -> None:
    """An operator with ordinary credentials never pays for kubernetes_asyncio (tens of MiB), nor for
    aiohttp (about 9 MiB): its HTTP client and server are kubetrain.common.kube.http and .httpserver. Nor
    for the CLI's terminal library (rich draws `get -w` and `wait` bars), though `kubetrain operator`
    builds the same parser that registers those commands."""
    probe = textwrap.dedent(
        """
        import sys
        import kubetrain.cli
        kubetrain.cli.build_parser()
        import kubetrain.cli.operator.app, kubetrain.common.kube.rest, kubetrain.common.manager
        heavy = {'kubernetes_asyncio', 'aiohttp', 'yarl', 'multidict', 'rich', 'tqdm'}
        print(sorted({m.split('.')[0] for m in sys.modules} & heavy))
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.replace("'", '"')) == []
