"""JAXJobController on the JobController template, over the in-memory API server: JAX's rules meet the
template's lifecycle (every worker must succeed, the coordinator env on every pod, cleanup, restart
policies, suspend)."""

from __future__ import annotations

from typing import Any

from framework_cluster import FrameworkCluster

from kubetrain.api import JAXJOB
from kubetrain.common.job import JOB_ROLE_LABEL
from kubetrain.common.kube.resources import PODS, SERVICES
from kubetrain.controllers.jax import JAXJobController
from kubetrain.testing.operator import container_spec, job_manifest, replica_spec


def jaxjob(specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return job_manifest(JAXJOB, specs, **spec)


def workers(count: int, **fields: Any) -> dict[str, Any]:
    return {"Worker": replica_spec(count, container_spec("jax"), **fields)}


async def test_every_worker_must_succeed_and_running_pods_are_cleaned_up() -> None:
    async with FrameworkCluster(JAXJobController) as c:
        await c.submit(jaxjob(workers(3), runPolicy={"cleanPodPolicy": "Running"}))
        await c.run("job-worker-0", "job-worker-1", "job-worker-2")
        assert await c.reason("Running") == "JAXJobRunning"
        await c.succeed("job-worker-0", "job-worker-1")
        assert await c.condition("Succeeded") is None
        await c.succeed("job-worker-2")
        succeeded = await c.condition("Succeeded")
        assert succeeded is not None
        assert (succeeded["reason"], succeeded["message"]) == (
            "JAXJobSucceeded",
            "JAXJob ns/job successfully completed.",
        )
        assert await c.names(PODS) == ["job-worker-0", "job-worker-1", "job-worker-2"]  # all Succeeded: kept


async def test_each_pod_gets_the_coordinator_env_and_worker_0_the_master_role() -> None:
    async with FrameworkCluster(JAXJobController) as c:
        await c.submit(jaxjob(workers(2)))
        for index in range(2):
            env = await c.env(f"job-worker-{index}")
            assert {k: env[k] for k in ("COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES")} == {
                "COORDINATOR_ADDRESS": "job-worker-0.job",
                "COORDINATOR_PORT": "6666",
                "NUM_PROCESSES": "2",
            }
            assert env["PROCESS_ID"] == str(index)
        assert (await c.pod("job-worker-0"))["metadata"]["labels"][JOB_ROLE_LABEL] == "master"
        assert JOB_ROLE_LABEL not in (await c.pod("job-worker-1"))["metadata"]["labels"]
        assert await c.names(SERVICES) == ["job"], "one headless Service for the job"


async def test_a_worker_failing_under_never_fails_the_job_with_kubeflows_message() -> None:
    async with FrameworkCluster(JAXJobController) as c:
        await c.submit(jaxjob(workers(2)))  # restartPolicy defaults to Never
        await c.run("job-worker-0", "job-worker-1")
        await c.fail("job-worker-1")
        failed = await c.condition("Failed")
        assert failed is not None
        assert (failed["reason"], failed["message"]) == (
            "JAXJobFailed",
            "JAXJob ns/job has failed because 1 Worker replica(s) failed.",
        )


async def test_exit_code_policy_retries_137_and_fails_on_1() -> None:
    async with FrameworkCluster(JAXJobController) as c:
        await c.submit(jaxjob(workers(2, restartPolicy="ExitCode")))
        await c.run("job-worker-0", "job-worker-1")
        first = (await c.pod("job-worker-1"))["metadata"]["uid"]
        await c.fail("job-worker-1", exit_code=137)
        assert c.events("JAXJobRestarting")
        assert (await c.pod("job-worker-1"))["metadata"]["uid"] != first
        await c.run("job-worker-1")
        await c.fail("job-worker-1", exit_code=1)
        assert await c.reason("Failed") == "JAXJobFailed"


async def test_suspend_deletes_the_pods_and_resume_recreates_them() -> None:
    async with FrameworkCluster(JAXJobController) as c:
        await c.submit(jaxjob(workers(2)))
        await c.run("job-worker-0", "job-worker-1")
        await c.patch_spec({"runPolicy": {"suspend": True}})
        assert await c.reason("Suspended") == "JAXJobSuspended"
        assert await c.names(PODS) == []
        await c.patch_spec({"runPolicy": {"suspend": False}})
        await c.step(0.1)
        assert await c.names(PODS) == ["job-worker-0", "job-worker-1"]
