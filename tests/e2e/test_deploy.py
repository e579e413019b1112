"""The default install, end to end: `kubectl apply -k manifests/base`, the operator under its own
ServiceAccount with the shipped ClusterRole, every example job submitted with `kubectl apply -f`.

What a user relies on: every example runs to Succeeded (kwok plays the kubelet), `kubectl get
tfjobs,pytorchjobs,mpijobs,jaxjobs,xgboostjobs,paddlejobs` shows each job's State and Age, a Kueue-style
suspended job waits until it is resumed, deleting a job removes its pods and Services, and the shipped RBAC is
enough: the API server refuses the operator nothing. How the operator is run instead of the Deployment: see
`shipped`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import yaml

from kubetrain.cli.operator import build_operator_parser
from kubetrain.cli.operator.options import options_from_args, parse_address
from kubetrain.testing import ControlPlane
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until
from kubetrain.testing.volumes import claims_in, provide_volume

from .shipped import (
    LIST_OF_KINDS,
    MANIFESTS,
    OPERATOR,
    Obj,
    deployment_args,
    example_files,
    example_jobs,
    install,
    operator_container,
    phases,
    rbac_denials,
    render,
    replica_pods,
    run_to_success,
    start_operator,
    submit,
    true_conditions,
)

pytestmark = pytest.mark.e2e

BASE = MANIFESTS / "base"
SUSPENDED_EXAMPLE = "pytorch-kueue.yaml"
FRAMEWORKS = {
    "TFJob": "tensorflow",
    "PyTorchJob": "pytorch",
    "MPIJob": "mpi",
    "JAXJob": "jax",
    "XGBoostJob": "xgboost",
    "PaddleJob": "paddle",
}
"""The `framework` label of the job metrics, by kind."""


@pytest.fixture(scope="module")
def base(control_plane: ControlPlane) -> Iterator[list[Obj]]:
    """The default install; its cluster-wide objects are removed afterwards (the CRDs stay: other tests
    use them)."""
    objects = install(control_plane, BASE)
    yield objects
    namespace, _ = operator_container(objects)
    control_plane.kubectl(
        "delete", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/part-of=kubetrain"
    )
    control_plane.delete_namespace(namespace)


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, base: list[Obj], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    op = start_operator(control_plane, base, tmp_path_factory.mktemp("operator"))
    try:
        op.wait_ready()
        yield op
        namespace, _ = operator_container(base)
        assert rbac_denials(op, namespace) == [], "the shipped RBAC must allow everything the operator does"
        assert op.terminate() == 0, op.process.log_tail()
    finally:
        op.stop()


def test_the_shipped_deployments_arguments_are_accepted(control_plane: ControlPlane) -> None:
    """Every install's Deployment passes flags `kubetrain operator` knows, and its probe and metrics ports
    are the ones the operator listens on."""
    for directory in (BASE, *sorted((MANIFESTS / "overlays").iterdir())):
        objects = render(control_plane, directory)
        namespace, container = operator_container(objects)
        try:
            args = build_operator_parser().parse_args(deployment_args(objects))
        except SystemExit:
            pytest.fail(
                f"{directory}: `kubetrain operator` rejects the Deployment's args {container['args']}"
            )
        options = options_from_args(args, environ={"POD_NAMESPACE": namespace})  # as the pod has it
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        health, metrics = options.health_address, options.metrics_address
        assert health is not None and metrics is not None
        assert (ports["health"], ports["metrics"]) == (health[1], metrics[1]), directory
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        assert options.leader_election is not None and options.leader_election.name == OPERATOR, (
            "the leader-election Role names the Lease it may update"
        )
        assert parse_address("--metrics-bind-address", f":{ports['metrics']}") == metrics
        if options.progress is not None:  # the training-progress endpoint listens on its named port
            assert options.progress.address[1] == ports["progress"], directory


def test_every_example_runs_to_success_under_the_shipped_rbac(
    control_plane: ControlPlane, base: list[Obj], operator: OperatorProcess, namespace: str
) -> None:
    """Each example file as it is, `kubectl apply -f` into a fresh namespace: it carries what its job needs
    (a PVC for its checkpoints); the cluster only provides storage, as a provisioner would."""
    examples = example_jobs()
    claims = claims_in(d for path in example_files() for d in yaml.safe_load_all(path.read_text()))
    volumes = [provide_volume(control_plane, namespace, claim, "/tmp/ckpt") for claim in claims]
    for path in example_files():
        control_plane.kubectl("apply", "-f", str(path), namespace=namespace)
    queued = examples.pop(SUSPENDED_EXAMPLE)
    run_to_success(control_plane, namespace, list(examples.values()), operator)

    assert "Suspended" in true_conditions(control_plane, namespace, queued)
    assert not [p for p in phases(control_plane, namespace) if p.startswith(queued["metadata"]["name"])]
    resume = json.dumps({"spec": {"runPolicy": {"suspend": False}}})  # what Kueue does on admission
    control_plane.kubectl("patch", "pytorchjob", queued["metadata"]["name"], "--type=merge", "-p", resume,
                          namespace=namespace)  # fmt: skip
    run_to_success(control_plane, namespace, [queued], operator)

    table = control_plane.kubectl("get", LIST_OF_KINDS, namespace=namespace).stdout
    rows = _rows(table)
    assert set(rows) == {
        f"{j['kind'].lower()}.kubeflow.org/{j['metadata']['name']}" for j in [*examples.values(), queued]
    }
    assert {state for state, _ in rows.values()} == {"Succeeded"}, table
    assert all(re.fullmatch(r"\d+[smhd]\S*", age) for _, age in rows.values()), table
    jobs = [*examples.values(), queued]
    for kind, framework in FRAMEWORKS.items():
        line = (
            f'training_operator_jobs_successful_total{{framework="{framework}",job_namespace="{namespace}"}}'
        )
        expected = float(sum(j["kind"] == kind for j in jobs))
        assert f"{line} {expected}" in operator.metrics(), line
    assert rbac_denials(operator, operator_container(base)[0]) == []
    control_plane.kubectl("delete", "pv", *volumes, "--wait=false")
    columns = "custom-columns=NAME:.metadata.name,PHASE:.status.phase"
    table = control_plane.kubectl("get", "pvc", "-o", columns, "--no-headers", namespace=namespace).stdout
    phases_of = dict(line.split() for line in table.splitlines())
    assert phases_of == {c["metadata"]["name"]: "Bound" for c in claims}, table


def test_deleting_a_job_removes_its_pods_and_services(
    control_plane: ControlPlane, base: list[Obj], operator: OperatorProcess, namespace: str
) -> None:
    job = example_jobs()["pytorch-ddp.yaml"]
    submit(control_plane, job, namespace)
    pods = replica_pods(job)
    wait_until("the job's pods", lambda: set(pods) <= set(phases(control_plane, namespace)), timeout=120,
               processes=[operator.process])  # fmt: skip
    name = job["metadata"]["name"]
    assert name in _names(control_plane, "services", namespace), "the job's headless Service"

    control_plane.kubectl("delete", "pytorchjob", name, "--wait=false", namespace=namespace)
    wait_until(
        "the pods and Services garbage-collected",
        lambda: (
            not {*pods, name}
            & (set(phases(control_plane, namespace)) | _names(control_plane, "services", namespace))
        ),
        timeout=120,
    )
    assert rbac_denials(operator, operator_container(base)[0]) == []


def _names(plane: ControlPlane, resource: str, namespace: str) -> set[str]:
    return set(
        plane.kubectl("get", resource, "-o", "name", namespace=namespace)
        .stdout.replace(f"{resource[:-1]}/", "")
        .split()
    )


def _rows(table: str) -> dict[str, tuple[str, str]]:
    """{kind.group/name: (STATE, AGE)} of `kubectl get a,b,c` (one table per kind, each with its header)."""
    rows = {}
    for line in table.splitlines():
        cells = line.split()
        if not cells:
            continue
        if cells[0] == "NAME":
            assert cells == ["NAME", "STATE", "PROGRESS", "ETA", "AGE"], line
            continue
        name, state, *_, age = cells  # Progress and ETA are blank until the trainer reports
        rows[name] = (state, age)
    return rows


def test_an_mpijob_runs_suspends_resumes_and_restarts_without_reading_a_secret(
    control_plane: ControlPlane, base: list[Obj], operator: OperatorProcess, namespace: str
) -> None:
    """The operator may only create Secrets (it reads none): the job's SSH Secret is created once, kept
    through suspension, and a replaced worker and a resumed job mount the same key."""
    job = example_jobs()["mpi-mpich.yaml"]
    name = job["metadata"]["name"]
    job["spec"]["runPolicy"] = {"suspend": True}
    job["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
    submit(control_plane, job, namespace)
    wait_until("Suspended", lambda: "Suspended" in true_conditions(control_plane, namespace, job), timeout=60,
               processes=[operator.process])  # fmt: skip
    secret = _secret_uid(control_plane, namespace, f"{name}-ssh")
    assert secret, "the SSH Secret exists while the job is suspended"
    pods = replica_pods(job)

    def patch_suspend(value: bool) -> None:
        body = json.dumps({"spec": {"runPolicy": {"suspend": value}}})
        control_plane.kubectl("patch", "mpijob", name, "--type=merge", "-p", body, namespace=namespace)

    def all_running() -> bool:
        return all(phases(control_plane, namespace).get(p) == "Running" for p in pods)

    patch_suspend(False)
    wait_until("pods Running after resume", all_running, timeout=120, processes=[operator.process])
    worker = f"{name}-worker-1"
    before = _pod_uid(control_plane, namespace, worker)
    control_plane.kubectl("delete", "pod", worker, "--wait=false", namespace=namespace)  # e.g. evicted
    wait_until("the worker replaced", lambda: _pod_uid(control_plane, namespace, worker) not in ("", before),
               timeout=120, processes=[operator.process])  # fmt: skip
    patch_suspend(True)
    wait_until("pods deleted on suspend", lambda: not set(pods) & set(phases(control_plane, namespace)),
               timeout=120, processes=[operator.process])  # fmt: skip
    patch_suspend(False)
    run_to_success(control_plane, namespace, [job], operator)
    assert _secret_uid(control_plane, namespace, f"{name}-ssh") == secret, "created once, never replaced"
    ledger = control_plane.kubectl(
        "get",
        "mpijob",
        name,
        "-o",
        "jsonpath={.metadata.annotations.kubetrain\\.io/ledger}",
        namespace=namespace,
    ).stdout
    assert f"secrets/{name}-ssh" in json.loads(ledger)["created"]
    assert rbac_denials(operator, operator_container(base)[0]) == []


def _secret_uid(plane: ControlPlane, namespace: str, name: str) -> str:
    """As the admin: the operator itself may not read Secrets."""
    answer = plane.kubectl("get", "secret", name, "-o", "jsonpath={.metadata.uid}", namespace=namespace,
                           check=False)  # fmt: skip
    return answer.stdout.strip() if answer.returncode == 0 else ""


def _pod_uid(plane: ControlPlane, namespace: str, name: str) -> str:
    answer = plane.kubectl("get", "pod", name, "-o", "jsonpath={.metadata.uid}", namespace=namespace,
                           check=False)  # fmt: skip
    return answer.stdout.strip() if answer.returncode == 0 else ""
