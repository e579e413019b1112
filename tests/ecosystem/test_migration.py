"""Migration from Kubeflow's training-operator v1.9.4 to kubetrain, with the real Go operator, and the
golden comparison of what each renders for the same job.

On a plane of its own: the training-operator's CRDs installed as its README says (`kubectl apply
--server-side -k`) with its validating webhook, the Go operator (built by `hack/peers.sh
training-operator`) runs the jobs of ROWS (each kind both serve, some in two variants) until every pod
runs, then is stopped (SIGTERM: its Deployment scaled to 0). The documented steps of docs/migrating.md
follow: its webhook removed (it refuses every job once nobody serves it), the kubeflow.org/v1 MPIJobs
saved and converted (`kubetrain convert`), their CRD deleted (the API server refuses a CRD without v1
while v1 is among its storedVersions), `kubectl apply -k manifests/base`, the operator started as its
Deployment runs it. Then: the running jobs are adopted (every pod and Service kept, none created, no
restart, the status carried on) and finish; the converted MPIJob and a new job of each kind run; and the
pods kubetrain renders for the Go jobs' own specs under Kubeflow's per-replica Services equal the Go
operator's, except for the named, documented INTENDED differences (docs/differences.md).

A kind joins by adding a row to ROWS: its replicas and the replica types whose
success ends the job.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import KINDS, KindInfo
from kubetrain.api.crd import custom_resource_definition
from kubetrain.cli.operator.kubeflow import FLAGS, TRAINING_OPERATOR
from kubetrain.common.job.ledger import LEDGER_ANNOTATION
from kubetrain.common.job.services import SERVICE_MODE_ANNOTATION
from kubetrain.testing import ControlPlane, FakeNode, KubectlError, Outcome
from kubetrain.testing.ecosystem import MissingComponentError
from kubetrain.testing.operator import container_spec, job_manifest, replica_spec
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until
from kubetrain.testing.training_operator import WEBHOOK_CONFIGURATION, GoTrainingOperator, find_peer

from .harness import LOGS, own_plane, shipped_operator

pytestmark = pytest.mark.ecosystem

Obj = dict[str, Any]
BY_KIND: dict[str, KindInfo] = {info.kind: info for info in KINDS}
ROOT = Path(__file__).resolve().parents[2]
JOB_NAME = "training.kubeflow.org/job-name"
RECONCILES = "controller_runtime_reconcile_total"
LOOKED_AT = "test.kubetrain.io/looked-at"
"""An annotation the test sets on a job to have kubetrain reconcile it once more; kubetrain ignores it."""


@dataclass(frozen=True)
class Row:
    """One kind both operators serve: its replicas, and the replica types whose success ends the job."""

    kind: str
    replicas: dict[str, int]
    deciders: tuple[str, ...]
    variant: str = ""
    spec: Obj = field(default_factory=dict)
    """Other fields of the job's spec."""

    @property
    def name(self) -> str:
        return "-".join(filter(None, [self.kind.lower(), self.variant]))

    def job(self, name: str, namespace: str, **annotations: str) -> Obj:
        info = BY_KIND[self.kind]
        container = container_spec(info.default_container_name or "trainer")
        specs = {rtype: replica_spec(count, container) for rtype, count in self.replicas.items()}
        body = job_manifest(info, specs, name=name, namespace=namespace, **copy.deepcopy(self.spec))
        if annotations:
            body["metadata"]["annotations"] = annotations
        return body

    def pod_names(self, name: str) -> list[str]:
        return [f"{name}-{rtype.lower()}-{i}" for rtype, count in self.replicas.items() for i in range(count)]

    def decider_pods(self, name: str) -> list[str]:
        return [f"{name}-{rtype.lower()}-{i}" for rtype in self.deciders for i in range(self.replicas[rtype])]


ELASTIC = {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "maxRestarts": 2},
           "nprocPerNode": "2"}  # fmt: skip
ROWS = (
    Row("TFJob", {"Chief": 1, "PS": 1, "Worker": 2}, ("Chief",)),
    Row("TFJob", {"Worker": 2}, ("Worker",), "workers"),
    Row("PyTorchJob", {"Master": 1, "Worker": 2}, ("Master",)),
    Row("PyTorchJob", {"Worker": 2}, ("Worker",), "elastic", ELASTIC),
    Row("JAXJob", {"Worker": 2}, ("Worker",)),
    Row("XGBoostJob", {"Master": 1, "Worker": 2}, ("Master",)),
    Row("PaddleJob", {"Worker": 2}, ("Worker",), "collective"),
    Row("PaddleJob", {"Master": 1, "Worker": 2}, ("Master",), "ps"),
)
NODES = (FakeNode("migrate-a", cpu="64", gpus=0), FakeNode("migrate-b", cpu="64", gpus=0))
_MPI = {"name": "mpi", "image": "trainer:1"}
V1_MPIJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "MPIJob",
    "metadata": {"name": "legacy-mpi"},
    "spec": {
        "slotsPerWorker": 1,
        "runPolicy": {"cleanPodPolicy": "Running"},
        "mpiReplicaSpecs": {
            "Launcher": replica_spec(1, {**_MPI, "command": ["mpirun", "-n", "2", "python", "train.py"]}),
            "Worker": replica_spec(2, _MPI),
        },
    },
}
"""A v1 MPIJob stored before the move: the training-operator serves that version, kubetrain v2beta1."""


def name_of(row: Row) -> str:
    return f"mig-{row.name}"


# ------------------------------------------------------------------------------------------- reading
def get(plane: ControlPlane, path: str) -> Obj:
    status, found = plane.rest.get(path)
    assert status == 200, f"GET {path}: {status} {found}"
    return dict(found)


def job_path(kind: str, namespace: str, name: str) -> str:
    info = BY_KIND[kind]
    return f"/apis/kubeflow.org/{info.version}/namespaces/{namespace}/{info.plural}/{name}"


def children(plane: ControlPlane, namespace: str, what: str) -> dict[str, Obj]:
    """Pods or Services of `namespace` by name, those being deleted left out."""
    items = get(plane, f"/api/v1/namespaces/{namespace}/{what}")["items"]
    return {o["metadata"]["name"]: o for o in items if not o["metadata"].get("deletionTimestamp")}


def restart_count(pod: Obj) -> int:
    return sum(int(s.get("restartCount", 0)) for s in pod.get("status", {}).get("containerStatuses") or [])


def true_conditions(job: Obj) -> list[str]:
    return [c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"]


def running(plane: ControlPlane, namespace: str, names: list[str]) -> bool:
    pods = children(plane, namespace, "pods")
    return all(pods.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)


@dataclass
class Era:
    """What the Go operator left, and what the migration found."""

    plane: ControlPlane
    namespace: str
    pods: dict[str, Obj] = field(default_factory=dict)
    services: dict[str, Obj] = field(default_factory=dict)
    jobs: dict[str, Obj] = field(default_factory=dict)
    crds_before: dict[str, Obj] = field(default_factory=dict)
    converted: Obj = field(default_factory=dict)
    finished: dict[str, list[Obj]] = field(default_factory=dict)
    """The adopted jobs' conditions once kubetrain saw them succeed, by row name."""
    kubetrain: OperatorProcess | None = None
    workdir: Path = Path()
    webhook_live: str = ""
    """The Go operator's webhook's answer to a TFJob it refuses, while it runs."""
    webhook_left: str = ""
    """The API server's answer to a valid TFJob once the Go operator stopped, its webhook registered."""


# ------------------------------------------------------------------------------------------- the move
def unnamed_container_tfjob(namespace: str) -> Obj:
    """A TFJob the training-operator's webhook refuses: no container is named `tensorflow`."""
    body = ROWS[0].job("no-tensorflow-container", namespace)
    for spec in body["spec"]["tfReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["name"] = "trainer"
    return body


def refusal(plane: ControlPlane, namespace: str, body: Obj) -> str:
    """The error of creating `body` ("" when it was created)."""
    try:
        plane.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(body))
    except KubectlError as err:
        return str(err)
    return ""


def run_go_era(plane: ControlPlane, go: GoTrainingOperator, era: Era) -> None:
    """The jobs under the Go operator until each pod runs and each job says Running."""
    for row in ROWS:
        body = row.job(name_of(row), era.namespace)
        plane.kubectl("create", "-f", "-", input=json.dumps(body))
    names = [p for row in ROWS for p in row.pod_names(name_of(row))]
    wait_until("every pod of the Go operator's jobs Running", lambda: running(plane, era.namespace, names),
               timeout=120, processes=[go.process], interval=0.5)  # fmt: skip

    def jobs_running() -> bool:
        era.jobs = {r.name: get(plane, job_path(r.kind, era.namespace, name_of(r))) for r in ROWS}
        return all("Running" in true_conditions(j) for j in era.jobs.values())

    wait_until("every job Running (the Go operator's status)", jobs_running, timeout=60,
               processes=[go.process], interval=0.5)  # fmt: skip
    era.pods = children(plane, era.namespace, "pods")
    era.services = children(plane, era.namespace, "services")


def move_v1_mpijobs(plane: ControlPlane, workdir: Path) -> Obj:
    """docs/migrating.md's MPIJob steps: save the v1 MPIJobs, convert them, delete their CRD. Returns the
    converted List."""
    saved = workdir / "mpijobs-v1.yaml"
    saved.write_text(plane.kubectl("get", "mpijobs.v1.kubeflow.org", "-A", "-o", "yaml").stdout)
    converted = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli", "convert", str(saved)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert converted.returncode == 0, converted.stderr
    plane.kubectl("delete", "crd", "mpijobs.kubeflow.org", "--wait=true")
    return dict(_yaml(converted.stdout))


def _yaml(text: str) -> Any:
    import yaml  # noqa: PLC0415  (test-only dependency of the plane's tests)

    docs = [d for d in yaml.safe_load_all(text) if d]
    assert len(docs) == 1, f"`kubetrain convert` of one List gave {len(docs)} documents"
    return docs[0]


@pytest.fixture(scope="module")
def era(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Era]:
    try:
        peer = find_peer("training-operator")
    except MissingComponentError as err:
        pytest.fail(str(err), pytrace=False)
    workdir = tmp_path_factory.mktemp("migration")
    with own_plane(NODES) as plane:
        go = GoTrainingOperator(plane, workdir, kinds=[row.kind for row in ROWS], peer=peer, webhook=True)
        go.install_crds()
        namespace = plane.create_namespace("migrate-")
        plane.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(V1_MPIJOB))
        era = Era(plane, namespace)
        LOGS["training-operator"] = go.log_path
        with go:
            era.webhook_live = refusal(plane, namespace, unnamed_container_tfjob(namespace))
            run_go_era(plane, go, era)
        era.webhook_left = refusal(plane, namespace, ROWS[0].job("after-stop", namespace))
        plane.kubectl("delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION)  # docs/migrating.md
        era.crds_before = {r.kind: get(plane, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                               f"{BY_KIND[r.kind].crd_name}") for r in ROWS}  # fmt: skip
        era.converted = move_v1_mpijobs(plane, workdir)
        with shipped_operator(plane, "base", workdir / "operator") as op:
            era.kubetrain = op
            era.workdir = workdir
            yield era


# ------------------------------------------------------------------------------------------- the webhook
def test_the_go_operators_webhook_refuses_every_job_once_it_is_stopped(era: Era) -> None:
    """Why docs/migrating.md removes it before kubetrain starts: failurePolicy Fail, nobody serving."""
    assert "must have at least one container with name tensorflow" in era.webhook_live, era.webhook_live
    assert "failed calling webhook" in era.webhook_left, era.webhook_left
    assert "/validate-kubeflow-org-v1-tfjob" in era.webhook_left  # the message names the call, not its name


# ------------------------------------------------------------------------------------------- the CRDs
def crd(plane: ControlPlane, name: str) -> Obj:
    return get(plane, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")


@pytest.mark.parametrize("kind", [*dict.fromkeys(row.kind for row in ROWS), "MPIJob"])
def test_kubectl_apply_k_puts_kubetrains_crds_over_the_go_operators(era: Era, kind: str) -> None:
    info = BY_KIND[kind]
    ours = custom_resource_definition(info)
    found = crd(era.plane, info.crd_name)
    assert [v["name"] for v in found["spec"]["versions"]] == [info.version]
    assert found["status"]["storedVersions"] == [info.version]
    schema = found["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema == ours["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "kubetrain's schema"
    if kind in era.crds_before:  # the Go operator's CRD was there, with another schema, applied server-side
        before = era.crds_before[kind]
        assert before["spec"]["versions"][0]["schema"]["openAPIV3Schema"] != schema
        managers = {m["manager"] for m in found["metadata"]["managedFields"]}
        assert {"kubectl", "kubectl-client-side-apply"} <= managers, managers


# ------------------------------------------------------------------------------------------- adoption
def reconciled(job: Obj) -> bool:
    """kubetrain has written the job: its ledger and its status's label selectors."""
    statuses = (job.get("status") or {}).get("replicaStatuses") or {}
    return LEDGER_ANNOTATION in (job["metadata"].get("annotations") or {}) and all(
        "labelSelector" in s for s in statuses.values()
    )


def adopted_jobs(era: Era) -> dict[str, Obj]:
    found: dict[str, Obj] = {}

    def all_reconciled() -> bool:
        found.update({r.name: get(era.plane, job_path(r.kind, era.namespace, name_of(r))) for r in ROWS})
        return all(reconciled(j) for j in found.values())

    wait_until("kubetrain's first write to each adopted job", all_reconciled, timeout=60, interval=0.5)
    return found


def idle(op: OperatorProcess) -> bool:
    """No job waits in a work queue and no reconcile runs (kubetrain's /metrics)."""
    return op.sample("workqueue_depth") == 0 and op.sample("controller_runtime_active_workers") == 0


def controller(row: Row) -> str:
    return f"{row.kind.lower()}-controller"


def reconciles(op: OperatorProcess) -> Counter[str]:
    """Reconciles finished so far, by controller."""
    return Counter({controller(r): int(op.sample(RECONCILES, controller=controller(r))) for r in ROWS})


def reconciled_again(era: Era) -> None:
    """Wait for proof, instead of a pause, that kubetrain looked again at every adopted job after its first
    write: once it is idle, each job gets an annotation kubetrain ignores, and the reconciles its /metrics
    counts must grow by one per job of each controller, with the queues empty again."""
    op = era.kubetrain
    assert op is not None
    wait_until("kubetrain idle after its first writes", lambda: idle(op), timeout=60, interval=0.2)
    wanted = reconciles(op) + Counter(controller(r) for r in ROWS)
    for row in ROWS:
        job = f"{BY_KIND[row.kind].plural}/{name_of(row)}"
        era.plane.kubectl(
            "annotate", job, f"{LOOKED_AT}={time.time()}", "--overwrite", namespace=era.namespace
        )

    def looked() -> bool:
        return reconciles(op) >= wanted and idle(op)

    wait_until("a reconcile of each adopted job, seen in /metrics", looked, timeout=60, interval=0.2)


def test_running_jobs_are_adopted_with_every_pod_and_service_kept(era: Era) -> None:
    jobs = adopted_jobs(era)
    reconciled_again(era)  # a wrong reconcile would have acted by then
    pods = children(era.plane, era.namespace, "pods")
    services = children(era.plane, era.namespace, "services")
    assert {n: p["metadata"]["uid"] for n, p in pods.items()} == {
        n: p["metadata"]["uid"] for n, p in era.pods.items()
    }, "every pod kept, none created or deleted"
    assert {n: s["metadata"]["uid"] for n, s in services.items()} == {
        n: s["metadata"]["uid"] for n, s in era.services.items()
    }, "every per-replica Service kept, and no job Service added: the job keeps the mode it began in"
    for name, pod in pods.items():
        before = era.pods[name]
        assert restart_count(pod) == restart_count(before) == 0, name
        for key in ("labels", "annotations", "ownerReferences", "finalizers"):
            assert pod["metadata"].get(key) == before["metadata"].get(key), f"{name}: {key}"
    for row in ROWS:
        job, before = jobs[row.name], era.jobs[row.name]
        assert json.loads(job["metadata"]["annotations"][LEDGER_ANNOTATION]).get("restarts", 0) == 0
        assert job["metadata"].get("finalizers") == before["metadata"].get("finalizers") is None
        assert job["status"]["conditions"] == before["status"]["conditions"], "the Go conditions carry on"
        assert job["status"]["startTime"] == before["status"]["startTime"]
        counts = {t: s.get("active", 0) for t, s in job["status"]["replicaStatuses"].items()}
        assert counts == row.replicas


def test_go_operators_children_carry_what_kubetrain_looks_for(era: Era) -> None:
    """Labels and owner references kubetrain selects and adopts by, as the Go operator wrote them."""
    for row in ROWS:
        job = era.jobs[row.name]
        owner = {"apiVersion": "kubeflow.org/v1", "kind": row.kind, "name": name_of(row),
                 "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        for pod_name in row.pod_names(name_of(row)):
            rtype, index = pod_name.rsplit("-", 2)[1:]
            for child in (era.pods[pod_name], era.services[pod_name]):
                assert child["metadata"]["ownerReferences"] == [owner], pod_name
                labels = child["metadata"]["labels"]
                assert labels["training.kubeflow.org/operator-name"] == BY_KIND[row.kind].operator_name
                assert labels[JOB_NAME] == name_of(row)
                assert labels["training.kubeflow.org/replica-type"] == rtype
                assert labels["training.kubeflow.org/replica-index"] == index


def test_adopted_jobs_finish_without_a_new_pod(era: Era) -> None:
    uids = {p["metadata"]["uid"] for p in era.pods.values()}
    for row in ROWS:
        for pod in row.decider_pods(name_of(row)):
            era.plane.finish_pod(era.namespace, pod, Outcome.SUCCEEDED)

    def succeeded() -> bool:
        now = children(era.plane, era.namespace, "pods")
        assert {p["metadata"]["uid"] for p in now.values()} <= uids, "a pod was created"
        jobs = {r.name: get(era.plane, job_path(r.kind, era.namespace, name_of(r))) for r in ROWS}
        era.finished = {name: job["status"]["conditions"] for name, job in jobs.items()}
        return all("Succeeded" in true_conditions(j) for j in jobs.values())

    wait_until("every adopted job Succeeded", succeeded, timeout=120, interval=0.5)


def condition_shape(conditions: list[Obj]) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """A status's conditions as the Go operator's writes them: type, status, reason and which keys."""
    return [(c["type"], c["status"], c["reason"], tuple(sorted(c))) for c in conditions]


# ------------------------------------------------------------------------------------------- after the move
def run_to_success(plane: ControlPlane, namespace: str, jobs: list[tuple[Row, Obj]]) -> None:
    for _, body in jobs:
        plane.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(body))
    names = [p for row, body in jobs for p in row.pod_names(body["metadata"]["name"])]
    wait_until(
        f"{len(names)} pods Running", lambda: running(plane, namespace, names), timeout=120, interval=0.5
    )
    for row, body in jobs:
        for pod in row.decider_pods(body["metadata"]["name"]):
            plane.finish_pod(namespace, pod, Outcome.SUCCEEDED)

    def succeeded() -> bool:
        found = [get(plane, job_path(b["kind"], namespace, b["metadata"]["name"])) for _, b in jobs]
        return all("Succeeded" in true_conditions(j) for j in found)

    wait_until(f"{len(jobs)} jobs Succeeded", succeeded, timeout=120, interval=0.5)


def test_new_jobs_of_each_kind_and_the_converted_v1_mpijob_run(era: Era) -> None:
    namespace = era.plane.create_namespace("after-")
    jobs = [(row, row.job(f"new-{row.name}", namespace)) for row in ROWS]
    items = era.converted["items"] if era.converted.get("kind") == "List" else [era.converted]
    assert [i["apiVersion"] for i in items] == ["kubeflow.org/v2beta1"]
    mpijob = copy.deepcopy(items[0])
    mpijob["metadata"] = {"name": mpijob["metadata"]["name"], "namespace": namespace}
    jobs.append((Row("MPIJob", {"Launcher": 1, "Worker": 2}, ("Launcher",)), mpijob))
    run_to_success(era.plane, namespace, jobs)


# ------------------------------------------------------------------------------------------- golden env
INTENDED: dict[str, tuple[str, ...]] = {
    "Service": ("spec.publishNotReadyAddresses",),
    "PyTorchJob": ("initContainers[0].command[2]",),
}
"""Where kubetrain renders otherwise on purpose, by kind ("Service": every per-replica Service), each
in docs/differences.md under the phrase DOCUMENTED names."""
DOCUMENTED = {
    "spec.publishNotReadyAddresses": "publishNotReadyAddresses",
    "initContainers[0].command[2]": "init-pytorch",
}
API_SERVER_VOLUME = re.compile(r"^kube-api-access-")
"""The ServiceAccount token volume the API server adds to every pod, with a random name."""


def pod_rendering(pod: Obj) -> Obj:
    """What the operator decides of a pod: labels, annotations, owner, DNS name, containers (env, ports,
    command...) with the API server's token volume left out."""
    spec = copy.deepcopy(pod["spec"])
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        mounts = [m for m in container.get("volumeMounts", []) if not API_SERVER_VOLUME.match(m["name"])]
        container["volumeMounts"] = mounts
    keys = ("hostname", "subdomain", "restartPolicy", "schedulerName", "initContainers", "containers")
    return {
        "labels": pod["metadata"].get("labels"),
        "annotations": pod["metadata"].get("annotations"),
        "owner": [{k: v for k, v in r.items() if k != "uid"} for r in pod["metadata"]["ownerReferences"]],
        **{key: spec.get(key) for key in keys},
    }


def service_rendering(service: Obj) -> Obj:
    spec = service["spec"]
    keys = ("selector", "ports", "clusterIP", "type", "publishNotReadyAddresses")
    return {
        "labels": service["metadata"].get("labels"),
        "annotations": service["metadata"].get("annotations"),
        "owner": [{k: v for k, v in r.items() if k != "uid"} for r in service["metadata"]["ownerReferences"]],
        **{f"spec.{key}": spec.get(key) for key in keys},
    }


def differences(go: Any, ours: Any, path: str = "") -> dict[str, tuple[Any, Any]]:
    """Paths where two renderings differ, with both values."""
    if isinstance(go, dict) and isinstance(ours, dict):
        found: dict[str, tuple[Any, Any]] = {}
        for key in sorted(set(go) | set(ours)):
            found |= differences(go.get(key), ours.get(key), f"{path}.{key}".lstrip("."))
        return found
    if isinstance(go, list) and isinstance(ours, list) and len(go) == len(ours):
        return {p: d for i, (a, b) in enumerate(zip(go, ours, strict=True))
                for p, d in differences(a, b, f"{path}[{i}]").items()}  # fmt: skip
    return {} if go == ours else {path: (go, ours)}


@pytest.fixture(scope="module")
def golden(era: Era) -> tuple[str, dict[str, Obj], dict[str, Obj]]:
    """The Go jobs' specs, run by kubetrain with Kubeflow's per-replica Services, in a namespace of
    their own; its name, pods and Services."""
    namespace = era.plane.create_namespace("golden-")
    for row in ROWS:
        body = row.job(name_of(row), namespace, **{SERVICE_MODE_ANNOTATION: "replica"})
        era.plane.kubectl("create", "-f", "-", input=json.dumps(body))
    names = [p for row in ROWS for p in row.pod_names(name_of(row))]
    wait_until("kubetrain's pods of the Go jobs' specs", lambda: running(era.plane, namespace, names),
               timeout=120, interval=0.5)  # fmt: skip
    return namespace, children(era.plane, namespace, "pods"), children(era.plane, namespace, "services")


def same_namespace(value: Obj, namespace: str) -> Obj:
    """`value` with the namespace's name (in TF_CONFIG hosts, DNS names...) written `<ns>`."""
    return dict(json.loads(json.dumps(value).replace(namespace, "<ns>")))


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_kubetrain_renders_what_the_go_operator_rendered(era: Era, golden: Any, row: Row) -> None:
    namespace, pods, services = golden
    seen: dict[str, tuple[Any, Any]] = {}
    for name in row.pod_names(name_of(row)):
        go = same_namespace(pod_rendering(era.pods[name]), era.namespace)
        ours = same_namespace(pod_rendering(pods[name]), namespace)
        assert go["containers"][0].get("env"), f"{name}: the Go operator's pod has no env to compare"
        seen |= {
            f"{name}: {p}": d for p, d in differences(go, ours).items() if p not in INTENDED.get(row.kind, ())
        }
        go_svc = same_namespace(service_rendering(era.services[name]), era.namespace)
        our_svc = same_namespace(service_rendering(services[name]), namespace)
        seen |= {f"Service {name}: {p}": d for p, d in differences(go_svc, our_svc).items()
                 if p not in INTENDED["Service"]}  # fmt: skip
    assert seen == {}, "(Go, kubetrain) differences not in INTENDED: " + json.dumps(seen, indent=1)
    names = set(row.pod_names(name_of(row)))
    mine = {n for n, svc in services.items() if svc["metadata"]["labels"][JOB_NAME] == name_of(row)}
    assert mine == names, "one Service per replica, no other"


def test_every_intended_difference_is_documented() -> None:
    text = (ROOT / "docs" / "differences.md").read_text()
    for paths in INTENDED.values():
        for path in paths:
            assert DOCUMENTED[path] in text, f"docs/differences.md must explain {path}"


# ------------------------------------------------------------------------------------------- its flags
def test_the_flag_table_names_every_flag_of_the_training_operator(era: Era) -> None:
    """kubetrain.cli.operator.kubeflow.FLAGS against the built binary's own `--help`."""
    binary = find_peer("training-operator").binary
    shown = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=False)
    names = set(re.findall(r"^\s+-(\S+)", shown.stdout + shown.stderr, re.MULTILINE))
    assert len(names) > 15, shown.stderr
    assert names == {flag.name for flag in FLAGS if flag.operator == TRAINING_OPERATOR}


# ------------------------------------------------------------------------------------------- rolling back
def test_rolling_back_to_the_go_operator_keeps_kubetrains_running_jobs(era: Era) -> None:
    """docs/migrating.md's roll-back: kubetrain stopped, the Go operator's CRDs applied back over
    kubetrain's (--force-conflicts), the Go operator (and its webhook) started again: it carries on with
    the jobs kubetrain started, in either Service mode, without a new pod, and they succeed. Last in this
    module: the CRDs are the Go operator's afterwards."""
    plane, namespace = era.plane, era.plane.create_namespace("rollback-")
    replica_mode = {SERVICE_MODE_ANNOTATION: "replica"}
    rows = [row for row in ROWS if not row.variant]  # one job of each kind: in job mode, or per replica
    jobs = [(row, row.job(f"back-{row.name}", namespace, **(replica_mode if i % 2 else {})))
            for i, row in enumerate(rows)]  # fmt: skip
    for _, body in jobs:
        plane.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(body))
    names = [p for row, body in jobs for p in row.pod_names(body["metadata"]["name"])]
    wait_until(
        "kubetrain's pods Running", lambda: running(plane, namespace, names), timeout=120, interval=0.5
    )
    assert era.kubetrain is not None
    era.kubetrain.stop()
    before = {n: p["metadata"]["uid"] for n, p in children(plane, namespace, "pods").items()}
    go = GoTrainingOperator(plane, era.workdir / "rollback", kinds=[r.kind for r in rows], webhook=True)
    for row in rows:
        crd_file = go.crds / f"kubeflow.org_{BY_KIND[row.kind].plural}.yaml"
        plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd_file))
    LOGS["training-operator"] = go.log_path
    with go:
        for row, body in jobs:  # the Go operator's per-replica Services, for a job begun in job mode too
            wanted = set(row.pod_names(body["metadata"]["name"]))
            wait_until(f"{body['kind']} {body['metadata']['name']}: a Service per replica",
                       lambda wanted=wanted: wanted <= set(children(plane, namespace, "services")),
                       timeout=60, processes=[go.process], interval=0.5)  # fmt: skip
        for row, body in jobs:
            for pod in row.decider_pods(body["metadata"]["name"]):
                plane.finish_pod(namespace, pod, Outcome.SUCCEEDED)

        def succeeded() -> bool:
            now = children(plane, namespace, "pods")
            assert {n: p["metadata"]["uid"] for n, p in now.items() if n in before} == {
                n: uid for n, uid in before.items() if n in now
            }, "a pod was replaced"
            assert set(now) <= set(before), "a pod was created"
            found = [get(plane, job_path(b["kind"], namespace, b["metadata"]["name"])) for _, b in jobs]
            return all("Succeeded" in true_conditions(j) for j in found)

        wait_until("the Go operator finishes kubetrain's jobs", succeeded, timeout=120,
                   processes=[go.process], interval=0.5)  # fmt: skip
    for row, body in jobs:  # the same conditions, whichever operator saw the job through
        theirs = get(plane, job_path(row.kind, namespace, body["metadata"]["name"]))["status"]["conditions"]
        assert condition_shape(era.finished[row.name]) == condition_shape(theirs), row.kind
