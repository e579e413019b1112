"""PyTorchJobController on the JobController template, over the in-memory API server: PyTorch's rules meet
the template's lifecycle (the elastic HPA across suspend/resume, scaling, the master's verdict, restarts)."""

from __future__ import annotations

from typing import Any

from framework_cluster import FrameworkCluster

from kubetrain.api import PYTORCHJOB
from kubetrain.common.kube.resources import HPAS, PODS
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.testing.operator import job_manifest, replica_spec

CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
}
ELASTIC = {"minReplicas": 1, "maxReplicas": 4, "metrics": [CPU]}


def pytorchjob(specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return job_manifest(PYTORCHJOB, specs, **spec)


async def test_the_elastic_hpa_exists_while_running_and_is_removed_while_suspended() -> None:
    async with FrameworkCluster(PyTorchJobController) as c:
        await c.submit(pytorchjob({"Worker": replica_spec(2)}, elasticPolicy=ELASTIC))
        assert await c.names(HPAS) == ["job"]
        hpa = await c.api.get(HPAS, "ns", "job")
        assert hpa["spec"]["scaleTargetRef"] == {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "job",
        }
        assert (hpa["metadata"]["ownerReferences"][0]["name"], hpa["spec"]["maxReplicas"]) == ("job", 4)

        await c.patch_spec({"runPolicy": {"suspend": True}})
        assert await c.reason("Suspended") == "PyTorchJobSuspended"
        assert await c.names(HPAS) == []
        assert await c.names(PODS) == []

        await c.patch_spec({"runPolicy": {"suspend": False}})
        assert await c.names(HPAS) == ["job"]
        assert await c.names(PODS) == ["job-worker-0", "job-worker-1"]


async def test_scaling_an_elastic_job_adds_workers_with_the_same_rendezvous() -> None:
    async with FrameworkCluster(PyTorchJobController) as c:
        await c.submit(pytorchjob({"Worker": replica_spec(2)}, elasticPolicy=ELASTIC))
        await c.run("job-worker-0", "job-worker-1")
        kept = (await c.pod("job-worker-0"))["metadata"]["uid"]
        await c.patch_spec({"pytorchReplicaSpecs": {"Worker": {"replicas": 3}}})
        assert await c.names(PODS) == ["job-worker-0", "job-worker-1", "job-worker-2"]
        assert (await c.pod("job-worker-0"))["metadata"]["uid"] == kept
        added = await c.env("job-worker-2")
        assert (added["PET_NNODES"], added["PET_RDZV_ENDPOINT"]) == ("1:4", "job-worker-0.job:23456")
        status = (await c.job())["status"]["replicaStatuses"]["Worker"]
        assert status["selector"] == (
            "training.kubeflow.org/job-name=job,training.kubeflow.org/operator-name=pytorchjob-controller,"
            "training.kubeflow.org/replica-type=worker"
        )


async def test_the_master_decides() -> None:
    async with FrameworkCluster(PyTorchJobController) as c:
        await c.submit(pytorchjob({"Master": replica_spec(1), "Worker": replica_spec(2)}))
        assert [i["name"] for i in (await c.pod("job-worker-0"))["spec"]["initContainers"]] == [
            "init-pytorch"
        ]
        await c.run("job-worker-0", "job-worker-1")
        assert await c.condition("Running") is None
        await c.run("job-master-0")
        assert await c.reason("Running") == "PyTorchJobRunning"
        await c.succeed("job-worker-0", "job-worker-1")
        assert await c.condition("Succeeded") is None
        await c.succeed("job-master-0")
        succeeded = await c.condition("Succeeded")
        assert succeeded is not None
        assert (succeeded["reason"], succeeded["message"]) == (
            "PyTorchJobSucceeded",
            "PyTorchJob ns/job successfully completed.",
        )


async def test_elastic_without_master_succeeds_when_any_worker_does() -> None:
    async with FrameworkCluster(PyTorchJobController) as c:
        await c.submit(
            pytorchjob({"Worker": replica_spec(3)}, elasticPolicy={"minReplicas": 2, "maxReplicas": 3})
        )
        await c.run("job-worker-0", "job-worker-1", "job-worker-2")
        await c.succeed("job-worker-2")
        assert await c.reason("Succeeded") == "PyTorchJobSucceeded"


async def test_on_failure_replaces_a_failed_pod_and_says_restarting() -> None:
    async with FrameworkCluster(PyTorchJobController) as c:
        await c.submit(pytorchjob({"Master": replica_spec(1), "Worker": replica_spec(1)}))
        await c.run("job-master-0", "job-worker-0")
        first = (await c.pod("job-worker-0"))["metadata"]["uid"]
        await c.fail("job-worker-0", exit_code=1)
        assert c.events("PyTorchJobRestarting") == ["job job is restarting because Worker replica(s) failed."]
        assert (await c.pod("job-worker-0"))["metadata"]["uid"] != first
        assert await c.condition("Failed") is None


async def test_never_fails_the_job_on_the_first_failure() -> None:
    async with FrameworkCluster(PyTorchJobController) as c:
        await c.submit(
            pytorchjob({"Master": replica_spec(1, restartPolicy="Never"), "Worker": replica_spec(1)})
        )
        await c.run("job-master-0", "job-worker-0")
        await c.fail("job-master-0", exit_code=2)
        failed = await c.condition("Failed")
        assert failed is not None
        assert (failed["reason"], failed["message"]) == (
            "PyTorchJobFailed",
            "PyTorchJob ns/job has failed because 1 Master replica(s) failed.",
        )


async def test_exit_code_policy_fails_on_a_permanent_code_instead_of_restarting_forever() -> None:
    async with FrameworkCluster(PyTorchJobController) as c:
        await c.submit(pytorchjob({"Master": replica_spec(1, restartPolicy="ExitCode")}))
        await c.run("job-master-0")
        await c.fail("job-master-0", exit_code=137)
        assert c.events("PyTorchJobRestarting")
        await c.run("job-master-0")
        await c.fail("job-master-0", exit_code=3)
        assert await c.reason("Failed") == "PyTorchJobFailed"
        assert await c.condition("Restarting") is None


async def test_a_rendezvous_host_with_a_port_fails_validation_with_the_fix() -> None:
    async with FrameworkCluster(PyTorchJobController) as c:
        policy = {"minReplicas": 1, "maxReplicas": 2, "rdzvHost": "etcd:2379"}
        await c.submit(pytorchjob({"Worker": replica_spec(2)}, elasticPolicy=policy))
        failed = await c.condition("Failed")
        assert failed is not None and failed["reason"] == "PyTorchJobFailedValidation"
        assert failed["message"].startswith("spec.elasticPolicy.rdzvHost: ")
        assert "without a port" in failed["message"]
        assert await c.names(PODS) == []
