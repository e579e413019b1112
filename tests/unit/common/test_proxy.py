"""proxy_from_environment: Go's httpproxy rules (the ones client-go applies) on a given environment."""

from __future__ import annotations

import pytest

from kubetrain.common.kube.proxy import Proxy, proxy_from_environment

P = Proxy("proxy", 3128)


@pytest.mark.parametrize(
    ("server", "env", "expected"),
    [
        ("https://api:6443", {"HTTPS_PROXY": "proxy:3128"}, P),
        ("https://api:6443", {"https_proxy": "http://proxy:3128"}, P),
        ("https://api:6443", {"HTTPS_PROXY": "http://proxy:3128", "https_proxy": "http://other:1"}, P),
        ("https://api:6443", {"HTTP_PROXY": "http://proxy:3128"}, None),
        ("http://api:8080", {"HTTP_PROXY": "http://proxy:3128"}, P),
        ("http://api:8080", {"HTTP_PROXY": "http://proxy:3128", "REQUEST_METHOD": "GET"}, None),
        ("https://api:6443", {"HTTPS_PROXY": "https://proxy"}, Proxy("proxy", 443, tls=True)),
        ("https://localhost:6443", {"HTTPS_PROXY": "proxy:3128"}, None),
        ("https://127.0.0.5:6443", {"HTTPS_PROXY": "proxy:3128"}, None),
        ("https://[::1]:6443", {"HTTPS_PROXY": "proxy:3128"}, None),
        ("https://api:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "*"}, None),
        ("https://api:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": " other , API "}, None),
        ("https://a.corp.io:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "corp.io"}, None),
        ("https://corp.io:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "corp.io"}, None),
        ("https://corp.io:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": ".corp.io"}, P),
        ("https://a.corp.io:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "*.corp.io"}, None),
        ("https://xcorp.io:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "corp.io"}, P),
        ("https://api:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "api:443"}, P),
        ("https://api:6443", {"HTTPS_PROXY": "proxy:3128", "no_proxy": "api:6443"}, None),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "10.1.2.3"}, None),
        ("https://10.1.2.4:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "10.1.2.3"}, P),
        ("https://[fd00::1]:6443", {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "fd00::/8"}, None),
    ],
)
def test_the_proxy_for_a_server(server: str, env: dict[str, str], expected: Proxy | None) -> None:
    assert proxy_from_environment(server, env) == expected


def test_credentials_in_the_proxy_url_become_basic_authorization() -> None:
    proxy = proxy_from_environment("https://api", {"HTTPS_PROXY": "http://user:p%40ss@proxy:3128"})
    assert proxy == Proxy("proxy", 3128, authorization="Basic dXNlcjpwQHNz")


def test_an_unsupported_proxy_is_refused_naming_the_variable() -> None:
    with pytest.raises(ValueError, match=r"HTTPS_PROXY 'socks5://p:1080'.*http://host:port"):
        proxy_from_environment("https://api", {"HTTPS_PROXY": "socks5://p:1080"})
