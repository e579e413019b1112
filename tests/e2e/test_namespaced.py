"""The single-namespace install (manifests/overlays/namespaced), end to end, in a namespace of the user's
choice: the operator serves jobs there and cannot touch any other namespace.

Installed the way its README says to pick another namespace (a kustomization of one's own with
`namespace:` and the overlay as its resource), run as its Deployment would run it (`--namespace` from
the pod's namespace, the ServiceAccount's token, only Roles bound). A job in another namespace is never
acted on; the ServiceAccount is refused there by the API server; and started without `--namespace`, the
operator refuses to start rather than limp on with a cache it may not fill.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.testing import ControlPlane
from kubetrain.testing.operator_process import OperatorProcess

from .shipped import (
    MANIFESTS,
    OPERATOR,
    Obj,
    example_jobs,
    install,
    kustomization,
    operator_container,
    phases,
    rbac_denials,
    run_to_success,
    start_operator,
    submit,
)

pytestmark = pytest.mark.e2e

QUESTIONS = (
    ("create", "pods"),
    ("list", "pods"),
    ("patch", "tfjobs.kubeflow.org", "--subresource=status"),
    ("create", "events"),
    ("create", "secrets"),
)
"""`kubectl auth can-i` questions: yes in the operator's namespace, no anywhere else."""


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Obj]]:
    own = f"kt-team-{secrets.token_hex(3)}"
    directory = kustomization(
        MANIFESTS / "overlays" / "namespaced", namespace=own, workdir=tmp_path_factory.mktemp("kustomize")
    )
    objects = install(control_plane, directory)
    assert operator_container(objects)[0] == own
    yield objects
    control_plane.delete_namespace(own)


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, installed: list[Obj], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = start_operator(control_plane, installed, tmp_path_factory.mktemp("operator"))
    try:
        op.wait_ready()
        yield op
        assert rbac_denials(op, operator_container(installed)[0]) == []
        assert op.terminate() == 0, op.process.log_tail()
    finally:
        op.stop()


def test_the_operator_serves_its_own_namespace_and_ignores_others(
    control_plane: ControlPlane, installed: list[Obj], operator: OperatorProcess, namespace: str
) -> None:
    own = operator_container(installed)[0]
    jobs = example_jobs()
    mine, theirs = jobs["tf-ps-workers.yaml"], jobs["mpi-mpich.yaml"]
    submit(control_plane, theirs, namespace)  # first, so that it has had every chance to be picked up
    submit(control_plane, mine, own)
    run_to_success(control_plane, own, [mine], operator)

    assert phases(control_plane, namespace) == {}, "no pod was created in another namespace"
    status = control_plane.kubectl("get", "mpijob", theirs["metadata"]["name"], "-o", "jsonpath={.status}",
                                   namespace=namespace).stdout  # fmt: skip
    assert status in ("", "{}"), f"a job in another namespace got a status: {status}"
    assert rbac_denials(operator, own) == []


def test_its_service_account_is_refused_everywhere_else(
    control_plane: ControlPlane, installed: list[Obj], namespace: str, tmp_path: Path
) -> None:
    own = operator_container(installed)[0]
    token = control_plane.kubeconfig_for_service_account(own, OPERATOR)
    for question in QUESTIONS:
        here = control_plane.kubectl("auth", "can-i", *question, kubeconfig=token, namespace=own, check=False)
        there = control_plane.kubectl(
            "auth", "can-i", *question, kubeconfig=token, namespace=namespace, check=False
        )
        assert (here.stdout.strip(), there.stdout.strip()) == ("yes", "no"), question
    refused = control_plane.kubectl("get", "pods", kubeconfig=token, namespace=namespace, check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr

    cluster_wide = OperatorProcess(
        token, ["--no-leader-elect"], workdir=tmp_path, name="cluster-wide"
    ).start()
    try:
        assert cluster_wide.wait_exit() == 4
    finally:
        cluster_wide.stop()
    assert "not allowed to read" in cluster_wide.log_text() and "all namespaces" in cluster_wide.log_text()
