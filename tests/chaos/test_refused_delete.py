"""B1: a failed pod whose deletion is refused once is counted once towards backoffLimit.

A ValidatingAdmissionPolicy (CEL, admissionregistration.k8s.io/v1) refuses to delete any pod that carries
the annotation `chaos.kubetrain.dev/refuse-delete`. The test puts it on the running pod, makes kwok fail
it with a retryable exit code, waits until the operator's delete has been refused, then lifts the
annotation: the operator's retry deletes the pod and replaces it. With `backoffLimit: 1` the job must
restart once and then succeed; counting the pod on each delete attempt made it fail.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kubetrain.api import PYTORCHJOB
from kubetrain.common.job import LEDGER_ANNOTATION
from kubetrain.common.kube import objects
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import Outcome
from kubetrain.testing.operator import (
    container_spec,
    job_manifest,
    kubectl_apply,
    on_control_plane,
    replica_spec,
    wait_until,
)

pytestmark = pytest.mark.chaos

GUARD = "chaos.kubetrain.dev/refuse-delete"


def admission_policy(namespace: str) -> list[dict[str, Any]]:
    name = f"refuse-delete-{namespace}"
    policy: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["DELETE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": (
                        "!has(oldObject.metadata.annotations)"
                        f" || !('{GUARD}' in oldObject.metadata.annotations)"
                    ),
                    "message": "chaos test: this pod may not be deleted yet",
                }
            ],
        },
    }
    binding: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    return [policy, binding]


def install_policy(plane: ControlPlane, namespace: str) -> None:
    """Apply the policy and wait until the API server enforces it (policies load asynchronously)."""
    body = {"apiVersion": "v1", "kind": "List", "items": admission_policy(namespace)}
    plane.kubectl("apply", "-f", "-", input=json.dumps(body))
    # Never scheduled (no node matches), so a delete that the policy lets through removes it at once.
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "annotations": {GUARD: "yes"}},
        "spec": {
            "containers": [{"name": "c", "image": "x"}],
            "nodeSelector": {"chaos.kubetrain.dev/none": "x"},
        },
    }

    def refused() -> bool:
        plane.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(probe), check=False)
        answer = plane.kubectl("delete", "pod/probe", "--wait=false", namespace=namespace, check=False)
        return answer.returncode != 0 and "may not be deleted yet" in answer.stderr

    deadline = time.monotonic() + 60
    while not refused():
        assert time.monotonic() < deadline, "the admission policy was not enforced within 60 s"
        time.sleep(0.5)
    plane.kubectl("annotate", "pod/probe", f"{GUARD}-", namespace=namespace)
    plane.kubectl("delete", "pod/probe", "--wait=false", namespace=namespace)


def remove_policy(plane: ControlPlane, namespace: str) -> None:
    name = f"refuse-delete-{namespace}"
    plane.kubectl("delete", "validatingadmissionpolicybinding", name, "--ignore-not-found")
    plane.kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found")


async def test_a_refused_delete_of_a_failed_pod_counts_one_restart(
    control_plane: ControlPlane, namespace: str
) -> None:
    install_policy(control_plane, namespace)
    try:
        specs = {"Master": replica_spec(1, container_spec("pytorch"), restartPolicy="ExitCode")}
        job = job_manifest(PYTORCHJOB, specs, name="b1", namespace=namespace, runPolicy={"backoffLimit": 1})
        async with on_control_plane(control_plane, [PyTorchJobController], namespace=namespace) as op:
            kubectl_apply(control_plane, job, namespace=namespace)
            await wait_until(lambda: op.running(namespace, "b1-master-0"), what="Running")
            first = objects.uid((await op.pods(namespace))["b1-master-0"])
            control_plane.kubectl("annotate", "pod/b1-master-0", f"{GUARD}=yes", namespace=namespace)
            control_plane.finish_pod(namespace, "b1-master-0", Outcome.FAILED, exit_code=137)

            async def refusals() -> int:
                return sum(
                    e.reason == "FailedDeletePod" and "may not be deleted yet" in e.message
                    for e in op.events.events
                )

            async def retried_or_failed() -> str:
                if await op.condition(namespace, "b1", "Failed") is not None:
                    return "Failed"
                return "retried" if await refusals() >= 2 else ""

            outcome = await wait_until(retried_or_failed, what="the operator's delete refused, twice")
            assert outcome == "retried", "one failed pod is one restart, however often its deletion was tried"
            control_plane.kubectl("annotate", "pod/b1-master-0", f"{GUARD}-", namespace=namespace)
            await wait_until(lambda: op.replaced(namespace, "b1-master-0", first), what="replaced")
            assert await op.condition(namespace, "b1", "Failed") is None
            control_plane.finish_pod(namespace, "b1-master-0", Outcome.SUCCEEDED)
            await op.wait_for_condition(namespace, "b1", "Succeeded")
            ledger = json.loads((await op.job(namespace, "b1"))["metadata"]["annotations"][LEDGER_ANNOTATION])
            assert ledger["restarts"] == 1
    finally:
        remove_policy(control_plane, namespace)
