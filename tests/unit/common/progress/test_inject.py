"""Defect 9 of the progress injection: what a pod's own spec says wins. No second volume or mount where the
template has one, no token under `automountServiceAccountToken: false`, and nothing of ours (least of all the
token path) in a container that reports to a status URL of its own."""

from __future__ import annotations

from typing import Any

from kubetrain.common.progress.inject import MOUNT_PATH, VOLUME, ProgressInjection, token_audience
from kubetrain.podcontract.progress import CA_CERT_ENV, TOKEN_ENV, URL_ENV

INJECTION = ProgressInjection("https://kubetrain-operator.kubetrain-system.svc:8443")
WHERE = {"api_version": "kubeflow.org/v1", "plural": "pytorchjobs", "namespace": "team-a", "name": "mnist"}


def _pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": list(containers), **spec}}


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or ()}


def test_each_job_gets_a_token_audience_of_its_own_in_kubeflows_shape() -> None:
    pod = INJECTION.apply(_pod({"name": "pytorch"}), **WHERE)
    (volume,) = pod["spec"]["volumes"]
    token = volume["projected"]["sources"][0]["serviceAccountToken"]
    assert (
        token["audience"] == "kubetrain-progress/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"
    )
    assert token["audience"] == token_audience("kubetrain-progress", **WHERE)
    other = token_audience("kubetrain-progress", **{**WHERE, "name": "other"})
    assert other != token["audience"]
    env = _env(pod["spec"]["containers"][0])
    assert env[URL_ENV].endswith("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status")
    assert (env[TOKEN_ENV], env[CA_CERT_ENV]) == (f"{MOUNT_PATH}/token", f"{MOUNT_PATH}/ca.crt")


def test_a_volume_or_mount_the_template_already_has_is_not_added_twice() -> None:
    mine = {"name": VOLUME, "emptyDir": {}}
    container = {"name": "pytorch", "volumeMounts": [{"name": "elsewhere", "mountPath": MOUNT_PATH}]}
    pod = INJECTION.apply(_pod(container, {"name": "sidecar"}, volumes=[mine]), **WHERE)
    assert pod["spec"]["volumes"] == [mine]
    first, second = pod["spec"]["containers"]
    assert [m["mountPath"] for m in first["volumeMounts"]] == [MOUNT_PATH]
    assert second["volumeMounts"] == [{"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}]


def test_a_pod_that_refuses_service_account_tokens_gets_no_token_and_nothing_else() -> None:
    template = _pod({"name": "pytorch"}, automountServiceAccountToken=False)
    pod = INJECTION.apply(template, **WHERE)
    assert pod == template
    assert pod is not template


def test_a_container_with_its_own_status_url_gets_neither_our_token_nor_our_ca() -> None:
    own = {"name": "pytorch", "env": [{"name": URL_ENV, "value": "https://tracker.example/status"}]}
    pod = INJECTION.apply(_pod(own, {"name": "sidecar"}), **WHERE)
    first, second = pod["spec"]["containers"]
    assert _env(first) == {URL_ENV: "https://tracker.example/status"}
    assert "volumeMounts" not in first
    assert TOKEN_ENV in _env(second), "the other container still reports to the operator"
    alone = INJECTION.apply(_pod(own), **WHERE)
    assert "volumes" not in alone["spec"] or not alone["spec"]["volumes"], (
        "no token for a pod that needs none"
    )
