"""XGBoostJobController on the JobController template, over the in-memory API server: XGBoost's rules meet the
template's lifecycle (the master decides, the collective's env on every pod, restart policies, suspend)."""

from __future__ import annotations

from typing import Any

from framework_cluster import FrameworkCluster

from kubetrain.api import XGBOOSTJOB
from kubetrain.common.job import JOB_ROLE_LABEL
from kubetrain.common.kube.resources import PODS, SERVICES
from kubetrain.controllers.xgboost import XGBoostJobController
from kubetrain.testing.operator import container_spec, job_manifest, replica_spec

PODS_OF_JOB = ["job-master-0", "job-worker-0", "job-worker-1"]


def xgbjob(workers: int = 2, **fields: Any) -> dict[str, Any]:
    specs = {
        "Master": replica_spec(1, container_spec("xgboost"), **fields),
        "Worker": replica_spec(workers, container_spec("xgboost"), **fields),
    }
    return job_manifest(XGBOOSTJOB, specs)


async def test_the_master_decides_and_each_pod_gets_its_rank() -> None:
    async with FrameworkCluster(XGBoostJobController) as c:
        await c.submit(xgbjob())
        await c.run(*PODS_OF_JOB)
        assert await c.reason("Running") == "XGBoostJobRunning"
        for rank, name in enumerate(PODS_OF_JOB):
            env = await c.env(name)
            assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == (
                "job-master-0.job",
                "9999",
                "3",
                str(rank),
            )
            assert env["WORKER_ADDRS"] == "job-worker-0.job,job-worker-1.job"
        assert (await c.pod("job-master-0"))["metadata"]["labels"][JOB_ROLE_LABEL] == "master"
        assert JOB_ROLE_LABEL not in (await c.pod("job-worker-0"))["metadata"]["labels"]
        assert await c.names(SERVICES) == ["job"], "one headless Service for the job"
        await c.succeed("job-worker-0", "job-worker-1")
        assert await c.condition("Succeeded") is None
        await c.succeed("job-master-0")
        succeeded = await c.condition("Succeeded")
        assert succeeded is not None
        assert (succeeded["reason"], succeeded["message"]) == (
            "XGBoostJobSucceeded",
            "XGBoostJob ns/job successfully completed.",
        )


async def test_a_failing_master_under_never_fails_the_job_with_kubeflows_message() -> None:
    async with FrameworkCluster(XGBoostJobController) as c:
        await c.submit(xgbjob())  # restartPolicy defaults to Never
        await c.run(*PODS_OF_JOB)
        await c.fail("job-master-0")
        failed = await c.condition("Failed")
        assert failed is not None
        assert (failed["reason"], failed["message"]) == (
            "XGBoostJobFailed",
            "XGBoostJob ns/job has failed because 1 Master replica(s) failed.",
        )


async def test_exit_code_policy_retries_137_and_fails_on_1() -> None:
    async with FrameworkCluster(XGBoostJobController) as c:
        await c.submit(xgbjob(restartPolicy="ExitCode"))
        await c.run(*PODS_OF_JOB)
        first = (await c.pod("job-worker-1"))["metadata"]["uid"]
        await c.fail("job-worker-1", exit_code=137)
        assert c.events("XGBoostJobRestarting")
        assert (await c.pod("job-worker-1"))["metadata"]["uid"] != first
        await c.run("job-worker-1")
        await c.fail("job-worker-1", exit_code=1)
        assert await c.reason("Failed") == "XGBoostJobFailed"


async def test_suspend_deletes_the_pods_and_resume_recreates_them() -> None:
    async with FrameworkCluster(XGBoostJobController) as c:
        await c.submit(xgbjob())
        await c.run(*PODS_OF_JOB)
        await c.patch_spec({"runPolicy": {"suspend": True}})
        assert await c.reason("Suspended") == "XGBoostJobSuspended"
        assert await c.names(PODS) == []
        await c.patch_spec({"runPolicy": {"suspend": False}})
        await c.step(0.1)
        assert await c.names(PODS) == PODS_OF_JOB
