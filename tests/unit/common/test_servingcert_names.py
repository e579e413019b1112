"""The metrics listener's self-signed certificate names the `kubetrain-operator-metrics` Service's DNS names,
so a scraper that dials the Service can verify it: the namespace from POD_NAMESPACE, the cluster domain
from the pod's DNS search list."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from kubetrain.common import servingcert
from kubetrain.common.servingcert import METRICS_SERVICE, service_names


def test_the_service_names_follow_the_namespace_and_the_search_list(tmp_path: Path) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(
        "search kubetrain-system.svc.corp.local svc.corp.local corp.local\nnameserver 10.0.0.10\n"
    )
    names = service_names("metrics", environ={"POD_NAMESPACE": "kubetrain-system"}, resolv_conf=resolv)
    assert names == [
        "metrics",
        "metrics.kubetrain-system",
        "metrics.kubetrain-system.svc",
        "metrics.kubetrain-system.svc.corp.local",
    ]
    missing = tmp_path / "absent"
    assert (
        service_names("m", environ={"POD_NAMESPACE": "ns"}, resolv_conf=missing)[-1]
        == "m.ns.svc.cluster.local"
    )
    assert service_names("m", environ={}) == [], "outside a cluster: none"


async def test_the_metrics_certificate_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "kubetrain-system")
    seen: list[list[str]] = []
    real = servingcert.self_signed_pem

    async def spy(names: list[str], **kwargs: object) -> bytes:
        seen.append(list(names))
        return await real(names, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(servingcert, "self_signed_pem", spy)
    await servingcert.serving_context(None)
    (names,) = seen
    assert f"{METRICS_SERVICE}.kubetrain-system.svc" in names and "localhost" in names
    pem = await real(names, common_name="x", valid=servingcert.METRICS_VALIDITY)
    san = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert f"{METRICS_SERVICE}.kubetrain-system.svc" in san.value.get_values_for_type(x509.DNSName)
