"""The committed CRDs on a real kube-apiserver: installed with plain `kubectl apply -f`, they reject bad jobs.

The unit tests check the schemas offline; only the API server can say that it accepts them (structural
rules, list-map keys, size limits) and that it rejects a malformed pod template with a message naming the
field, which is what a user sees at `kubectl apply`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import KINDS, KindInfo
from kubetrain.api.crd import crd_file_name
from kubetrain.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "manifests" / "crds"
EXAMPLES = ROOT / "examples"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _job(info: KindInfo, name: str = "demo") -> dict[str, Any]:
    container = {"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}
    replicas = {
        rtype: {"replicas": 1, "template": copy.deepcopy(template)} for rtype in info.replica_types[:2]
    }
    return {
        "apiVersion": info.api_version,
        "kind": info.kind,
        "metadata": {"name": name},
        "spec": {info.replica_specs_field: replicas},
    }


def _apply(plane: ControlPlane, namespace: str, job: dict[str, Any], *flags: str) -> tuple[int, str]:
    result = plane.kubectl(
        "apply", *flags, "-f", "-", namespace=namespace, input=json.dumps(job), check=False
    )
    return result.returncode, result.stdout + result.stderr


def _get(plane: ControlPlane, namespace: str, info: KindInfo, name: str) -> dict[str, Any]:
    out = plane.kubectl("get", f"{info.plural}.{info.group}", name, "-o", "json", namespace=namespace).stdout
    job: dict[str, Any] = json.loads(out)
    return job


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_crd_installs_with_client_side_apply(crds: ControlPlane, info: KindInfo) -> None:
    crd = json.loads(crds.kubectl("get", "crd", info.crd_name, "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True" and conditions.get("NonStructuralSchema") is None
    assert LAST_APPLIED in crd["metadata"]["annotations"], "installed by client-side apply"
    again = crds.kubectl("apply", "-f", str(CRD_DIR / crd_file_name(info))).stdout
    assert "unchanged" in again


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_a_valid_job_is_accepted_and_its_template_kept(
    crds: ControlPlane, namespace: str, info: KindInfo
) -> None:
    job = _job(info)
    first = next(iter(job["spec"][info.replica_specs_field].values()))
    first["template"]["metadata"]["creationTimestamp"] = None  # as `kubectl create --dry-run -o yaml` writes
    first["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 2222}]
    code, out = _apply(crds, namespace, job)
    assert code == 0, out
    stored = next(iter(_get(crds, namespace, info, "demo")["spec"][info.replica_specs_field].values()))
    assert stored["template"]["metadata"]["labels"] == {"app": "demo"}, "template labels must not be pruned"
    assert stored["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 2222, "protocol": "TCP"}
    ]


def test_every_example_job_is_accepted(crds: ControlPlane, namespace: str) -> None:
    kinds = {info.kind for info in KINDS}
    examples = sorted(p for p in EXAMPLES.rglob("*.yaml") if "operators" not in p.parts)
    assert examples, f"no TFJob/PyTorchJob/MPIJob examples under {EXAMPLES}"
    for path in examples:
        for document in yaml.safe_load_all(path.read_text()):
            if not document or document.get("kind") not in kinds:
                continue  # the objects a job needs (a PVC) are applied in tests/e2e
            document["metadata"].pop("namespace", None)  # into the test's namespace
            code, out = _apply(crds, namespace, document, "--dry-run=server")
            assert code == 0, f"{path.relative_to(ROOT)}: {out}"


def _worker(job: dict[str, Any], info: KindInfo) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"][info.replica_specs_field]["Worker"]
    return spec


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda w: w["template"]["spec"]["containers"][0].update(imagePullPolicyy="Always"),
            "imagePullPolicyy",
        ),
        (lambda w: w["template"]["spec"]["containers"][0].update(ports="x"), "containers[0].ports"),
        (lambda w: w["template"]["spec"]["containers"][0].update(env=[{"value": "1"}]), "env[0].name"),
        (lambda w: w.update(replicas="two"), "Worker.replicas"),
        (lambda w: w.update(replicas=-1), "Worker.replicas"),
        (lambda w: w.update(restartPolicy="Sometimes"), "Worker.restartPolicy"),
    ],
    ids=[
        "unknown-container-field",
        "ports-not-a-list",
        "env-without-name",
        "replicas-string",
        "replicas-negative",
        "restart-policy",
    ],
)
@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_a_malformed_job_is_rejected_naming_the_field(
    crds: ControlPlane, namespace: str, info: KindInfo, change: Any, field: str
) -> None:
    job = _job(info, name="bad")
    change(_worker(job, info))
    code, out = _apply(crds, namespace, job)
    assert code != 0, f"accepted: {out}"
    assert field in out, out


@pytest.mark.parametrize("info", KINDS, ids=lambda info: info.kind)
def test_replica_types_are_checked_in_any_letter_case(
    crds: ControlPlane, namespace: str, info: KindInfo
) -> None:
    job = _job(info, name="types")
    specs = job["spec"][info.replica_specs_field]
    specs["worker"] = specs.pop("Worker")
    code, out = _apply(crds, namespace, job)
    assert code == 0, out
    specs["Wroker"] = specs.pop("worker")
    code, out = _apply(crds, namespace, {**job, "metadata": {"name": "typo"}})
    assert code != 0 and f"spec.{info.replica_specs_field}" in out and "must be replica types" in out, out


def test_get_shows_state_progress_eta_and_age_columns(crds: ControlPlane, namespace: str) -> None:
    for info in KINDS:
        code, out = _apply(crds, namespace, _job(info, name=f"cols-{info.singular}"))
        assert code == 0, out
        header = crds.kubectl("get", info.plural, namespace=namespace).stdout.splitlines()[0].split()
        assert header == ["NAME", "STATE", "PROGRESS", "ETA", "AGE"]
    listed = crds.kubectl("get", "kubeflow", "-o", "name", namespace=namespace).stdout.split()
    assert len(listed) == len(KINDS), "the `kubeflow` category lists every training job"


def test_kubectl_scale_sets_pytorchjob_workers(crds: ControlPlane, namespace: str) -> None:
    (info,) = [i for i in KINDS if i.kind == "PyTorchJob"]
    code, out = _apply(crds, namespace, _job(info, name="elastic"))
    assert code == 0, out
    crds.kubectl("scale", f"{info.plural}/elastic", "--replicas=3", namespace=namespace)
    assert _worker(_get(crds, namespace, info, "elastic"), info)["replicas"] == 3


@pytest.mark.parametrize(
    ("path", "described"),
    [
        ("tfjobs.spec.tfReplicaSpecs.template.spec.containers.image", "Container image name."),
        (
            "pytorchjobs.spec.pytorchReplicaSpecs.template.spec.containers.resources",
            "Compute Resources required",
        ),
        ("mpijobs.spec.mpiReplicaSpecs.template.spec.tolerations", "If specified, the pod's tolerations."),
    ],
)
def test_kubectl_explain_describes_pod_template_fields(crds: ControlPlane, path: str, described: str) -> None:
    out = crds.kubectl("explain", path).stdout
    assert described in out, out


# Values the server's pod validation refuses, and the CRD now refuses with the job (podenums.py), each
# with values that a pod does accept: the enum must be neither wider nor narrower than the pod's check.
POD_ENUM_CASES: list[tuple[str, Any, tuple[str, ...], str]] = [
    (
        "imagePullPolicy",
        lambda c, v: c.update(imagePullPolicy=v),
        ("Always", "IfNotPresent", "Never", ""),
        "Sometimes",
    ),
    (
        "terminationMessagePolicy",
        lambda c, v: c.update(terminationMessagePolicy=v),
        ("File", "FallbackToLogsOnError", ""),
        "Always",
    ),
    (
        "ports[0].protocol",
        lambda c, v: c.update(ports=[{"containerPort": 80, "protocol": v}]),
        ("UDP", "SCTP"),
        "tcp",
    ),
    ("restartPolicy", lambda c, v: c.update(restartPolicy=v), ("Always", "OnFailure", "Never"), "Sometimes"),
]


def _pod(container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {"containers": [container]},
    }


@pytest.mark.parametrize(
    ("field", "change", "accepted", "refused"), POD_ENUM_CASES, ids=[c[0] for c in POD_ENUM_CASES]
)
def test_a_value_every_pod_refuses_is_refused_with_the_job(
    crds: ControlPlane, namespace: str, field: str, change: Any, accepted: tuple[str, ...], refused: str
) -> None:
    (info,) = [i for i in KINDS if i.kind == "PyTorchJob"]
    for value in accepted:
        container = {"name": "main", "image": "busybox:1.36"}
        change(container, value)
        code, out = _apply(crds, namespace, _pod(container), "--dry-run=server")
        assert code == 0, f"a pod accepts {field}={value!r}: {out}"
        job = _job(info, name="enum-ok")
        change(_worker(job, info)["template"]["spec"]["containers"][0], value)
        code, out = _apply(crds, namespace, job, "--dry-run=server")
        assert code == 0, f"so does the job: {out}"
    container = {"name": "main", "image": "busybox:1.36"}
    change(container, refused)
    code, out = _apply(crds, namespace, _pod(container), "--dry-run=server")
    assert code != 0 and f"containers[0].{field}" in out, out
    job = _job(info, name="enum-bad")
    change(_worker(job, info)["template"]["spec"]["containers"][0], refused)
    code, out = _apply(crds, namespace, job)
    assert code != 0, f"the job with {field}={refused!r} was accepted, its pods would not be: {out}"
    assert f"spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].{field}" in out, out
    assert "supported values" in out, out
