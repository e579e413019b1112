"""What the e2e tests share: the shipped manifests installed as a user installs them, and the operator run
as their Deployment would run it.

No kubelet runs images on the test control plane (kwok only fakes pod status), so the Deployment's pod
could never execute the operator; the tests scale the Deployment to 0 and instead run `kubetrain operator`
as a local process with exactly what that pod would have: the Deployment's arguments (`$(POD_NAMESPACE)`
resolved as the kubelet resolves it) and a token of the operator's ServiceAccount. The API server then
enforces the shipped RBAC on every request, so a missing rule fails the test: the operator's preflight
refuses to start, a reconcile logs a denial (`rbac_denials`), or a job never finishes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from kubetrain.testing import ControlPlane, KubectlError, Outcome
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
EXAMPLES = ROOT / "examples"
INSTALL = ("apply", "-k")
"""The kubectl words of the install command, before the directory: what README.md tells users to run."""
OPERATOR = "kubetrain-operator"
"""The name of the operator's Deployment, ServiceAccount and leader-election Lease."""
LISTENER_FLAGS = ("--health-probe-bind-address", "--metrics-bind-address", "--progress-bind-address")
"""Flags the test replaces: its operator listens on free loopback ports, not on the pod's. The progress
endpoint (whose URL names the in-cluster Service, which a host process cannot be) is left off here; the
operator serves it in tests/integration/test_operator_process_progress.py and on the real node."""
LIST_OF_KINDS = "tfjobs,pytorchjobs,mpijobs,jaxjobs,xgboostjobs,paddlejobs"

Obj = dict[str, Any]


# the manifests ---------------------------------------------------------------------------------------------
def kustomization(directory: Path, *, namespace: str | None, workdir: Path) -> Path:
    """`directory` itself, or a user's own kustomization that installs it into `namespace`."""
    if namespace is None:
        return directory
    own = workdir / f"install-{namespace}"
    own.mkdir(parents=True, exist_ok=True)
    (own / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"namespace: {namespace}\nresources:\n- {os.path.relpath(directory, own)}\n"
    )  # kustomize refuses absolute resource paths
    return own


def render(plane: ControlPlane, directory: Path) -> list[Obj]:
    """`kubectl kustomize directory`, as objects."""
    return [doc for doc in yaml.safe_load_all(plane.kubectl("kustomize", str(directory)).stdout) if doc]


def install(plane: ControlPlane, directory: Path) -> list[Obj]:
    """`kubectl apply -k directory`, plain client-side apply (the README's install command; test_project
    keeps the two in step), then scale the operator's Deployment to 0: its pod could not run here (see the
    module docstring). Returns the installed objects."""
    plane.kubectl(*INSTALL, str(directory))
    objects = render(plane, directory)
    for crd in (o for o in objects if o["kind"] == "CustomResourceDefinition"):
        name = crd["metadata"]["name"]
        plane.wait_established(name)
    namespace, _ = operator_container(objects)
    plane.kubectl("scale", f"deployment/{OPERATOR}", "--replicas=0", namespace=namespace)
    return objects


def operator_container(objects: list[Obj]) -> tuple[str, Obj]:
    """The namespace of the operator's Deployment and its container."""
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == OPERATOR]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return str(deployment["metadata"]["namespace"]), container


def deployment_args(objects: list[Obj]) -> list[str]:
    """The container's arguments after the `operator` sub-command, `$(VAR)` resolved from its env."""
    namespace, container = operator_container(objects)
    values = {}
    for env in container.get("env", []):
        field = ((env.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        values[env["name"]] = namespace if field == "metadata.namespace" else env.get("value", "")
    args: list[str] = container["args"]
    assert args[0] == "operator", f"the Deployment must run `kubetrain operator`, it runs {args}"
    return [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], arg) for arg in args[1:]]


def start_operator(plane: ControlPlane, objects: list[Obj], workdir: Path, *extra: str) -> OperatorProcess:
    """The operator as the Deployment's pod would run it: its arguments, its ServiceAccount's token."""
    namespace, _ = operator_container(objects)
    token = plane.kubeconfig_for_service_account(namespace, OPERATOR)
    args = [a for a in deployment_args(objects) if a.split("=", 1)[0] not in LISTENER_FLAGS]
    return OperatorProcess(token, [*args, *extra], workdir=workdir, name=f"operator-{namespace}").start()


def rbac_denials(op: OperatorProcess, namespace: str) -> list[str]:
    """Log lines where the API server refused the operator's ServiceAccount something."""
    who = f'system:serviceaccount:{namespace}:{OPERATOR}\\" cannot'  # as it appears inside a JSON string
    return [line for line in op.log_text().splitlines() if who in line]


# the jobs --------------------------------------------------------------------------------------------------
def example_jobs() -> dict[str, Obj]:
    """Every job of examples/, by file name."""
    return {path.name: _job_document(path) for path in example_files()}


def example_files() -> list[Path]:
    """Every file of examples/."""
    return sorted(EXAMPLES.glob("*/*.yaml"))


def _job_document(path: Path) -> Obj:
    """The job of an example file (which may also carry the objects the job needs, e.g. a PVC)."""
    job: Obj = next(
        d for d in yaml.safe_load_all(path.read_text()) if d and d["apiVersion"].startswith("kubeflow.org/")
    )
    return job


def submit(plane: ControlPlane, job: Obj, namespace: str) -> None:
    """`kubectl apply -f` the job into `namespace` (whatever namespace the file names)."""
    body = {**job, "metadata": {**job["metadata"], "namespace": namespace}}
    plane.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(body))


def _specs(job: Obj) -> dict[str, Obj]:
    (field,) = [k for k in job["spec"] if k.endswith("ReplicaSpecs")]
    specs: dict[str, Obj] = job["spec"][field]
    return specs


def replica_pods(job: Obj, *types: str) -> list[str]:
    """Pod names `{job}-{type}-{index}` of the given replica types (default: all)."""
    name = job["metadata"]["name"]
    return [
        f"{name}-{rtype.lower()}-{index}"
        for rtype, spec in _specs(job).items()
        if not types or rtype in types
        for index in range(int(spec.get("replicas", 1)))
    ]


def deciders(job: Obj) -> list[str]:
    """The pods whose success makes the job succeed: chief/master/launcher, else every worker."""
    present = set(_specs(job))
    leaders = present & {"Chief", "Master", "Launcher"}
    return replica_pods(job, *leaders) if leaders else replica_pods(job, "Worker")


def phases(plane: ControlPlane, namespace: str) -> dict[str, str]:
    out = plane.kubectl("get", "pods", "-o", "json", namespace=namespace).stdout
    return {p["metadata"]["name"]: p.get("status", {}).get("phase", "") for p in json.loads(out)["items"]}


def true_conditions(plane: ControlPlane, namespace: str, job: Obj) -> set[str]:
    kind, name = job["kind"].lower(), job["metadata"]["name"]
    path = "jsonpath={.status.conditions[?(@.status=='True')].type}"
    return set(plane.kubectl("get", f"{kind}/{name}", "-o", path, namespace=namespace).stdout.split())


def run_to_success(plane: ControlPlane, namespace: str, jobs: list[Obj], op: OperatorProcess) -> None:
    """Wait until every replica pod of `jobs` runs, let kwok finish the deciding pods with success, and wait
    until every job is Succeeded."""
    wanted = [pod for job in jobs for pod in replica_pods(job)]
    wait_until(
        f"{len(wanted)} replica pods Running",
        lambda: all(phases(plane, namespace).get(p) == "Running" for p in wanted),
        timeout=180, processes=[op.process], interval=1.0,
    )  # fmt: skip
    for job in jobs:
        for pod in deciders(job):
            try:
                plane.finish_pod(namespace, pod, Outcome.SUCCEEDED)
            except KubectlError as err:  # worker 0 already ended a TFJob: cleanPodPolicy removed the rest
                if "NotFound" not in str(err):
                    raise
    wait_until(
        f"{len(jobs)} jobs Succeeded",
        lambda: all("Succeeded" in true_conditions(plane, namespace, job) for job in jobs),
        timeout=180, processes=[op.process], interval=1.0,
    )  # fmt: skip
