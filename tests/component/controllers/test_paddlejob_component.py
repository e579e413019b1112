"""PaddleJobController on the JobController template, over the in-memory API server: Paddle's rules meet
the template's lifecycle (collective: every worker must succeed; parameter-server: the Masters decide; the
launcher env on every pod; restart policies; suspend)."""

from __future__ import annotations

from typing import Any

from framework_cluster import FrameworkCluster

from kubetrain.api import PADDLEJOB
from kubetrain.common.job import JOB_ROLE_LABEL
from kubetrain.common.kube.resources import PODS, SERVICES
from kubetrain.controllers.paddle import PaddleJobController
from kubetrain.testing.operator import container_spec, job_manifest, replica_spec


def paddlejob(specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return job_manifest(PADDLEJOB, specs, **spec)


def workers(count: int, **fields: Any) -> dict[str, Any]:
    return {"Worker": replica_spec(count, container_spec("paddle"), **fields)}


def masters(count: int, **fields: Any) -> dict[str, Any]:
    return {"Master": replica_spec(count, container_spec("paddle"), **fields)}


async def test_collective_every_worker_must_succeed_and_none_has_the_master_role() -> None:
    async with FrameworkCluster(PaddleJobController) as c:
        await c.submit(paddlejob(workers(2)))
        await c.run("job-worker-0", "job-worker-1")
        assert await c.reason("Running") == "PaddleJobRunning"
        for name in ("job-worker-0", "job-worker-1"):
            assert JOB_ROLE_LABEL not in (await c.pod(name))["metadata"]["labels"]
        assert (await c.env("job-worker-1"))["PADDLE_MASTER"] == "job-worker-0.job:36543"
        assert await c.names(SERVICES) == ["job"], "one headless Service for the job"
        await c.succeed("job-worker-0")
        assert await c.condition("Succeeded") is None
        await c.succeed("job-worker-1")
        assert await c.reason("Succeeded") == "PaddleJobSucceeded"


async def test_parameter_server_mode_the_masters_decide_and_carry_the_master_role() -> None:
    async with FrameworkCluster(PaddleJobController) as c:
        await c.submit(paddlejob({**masters(2), **workers(2)}))
        pods = ["job-master-0", "job-master-1", "job-worker-0", "job-worker-1"]
        await c.run("job-worker-0", "job-worker-1")
        assert await c.condition("Running") is None, "workers alone do not make a PS job Running"
        await c.run("job-master-0", "job-master-1")
        assert await c.reason("Running") == "PaddleJobRunning"
        for name in pods:
            role = (await c.pod(name))["metadata"]["labels"].get(JOB_ROLE_LABEL)
            assert role == ("master" if "master" in name else None), name
            env = await c.env(name)
            assert env["PADDLE_NNODES"] == "4"
            assert ("PADDLE_SERVER_NUM" if "master" in name else "PADDLE_TRAINER_NUM") in env
        assert (await c.env("job-worker-0"))["PADDLE_MASTER"] == "job-master-0.job:36543"
        await c.succeed("job-master-0", "job-master-1")
        assert await c.reason("Succeeded") == "PaddleJobSucceeded"


async def test_the_default_on_failure_replaces_a_failed_worker_and_never_fails_the_job() -> None:
    async with FrameworkCluster(PaddleJobController) as c:
        await c.submit(paddlejob(workers(2)))  # restartPolicy defaults to OnFailure
        await c.run("job-worker-0", "job-worker-1")
        first = (await c.pod("job-worker-1"))["metadata"]["uid"]
        await c.fail("job-worker-1")
        assert c.events("PaddleJobRestarting")
        assert (await c.pod("job-worker-1"))["metadata"]["uid"] != first
    async with FrameworkCluster(PaddleJobController) as c:
        await c.submit(paddlejob(workers(2, restartPolicy="Never")))
        await c.run("job-worker-0", "job-worker-1")
        await c.fail("job-worker-1")
        failed = await c.condition("Failed")
        assert failed is not None
        assert (failed["reason"], failed["message"]) == (
            "PaddleJobFailed",
            "PaddleJob ns/job has failed because 1 Worker replica(s) failed.",
        )


async def test_suspend_deletes_the_pods_and_resume_recreates_them() -> None:
    async with FrameworkCluster(PaddleJobController) as c:
        await c.submit(paddlejob(workers(2)))
        await c.run("job-worker-0", "job-worker-1")
        await c.patch_spec({"runPolicy": {"suspend": True}})
        assert await c.reason("Suspended") == "PaddleJobSuspended"
        assert await c.names(PODS) == []
        await c.patch_spec({"runPolicy": {"suspend": False}})
        await c.step(0.1)
        assert await c.names(PODS) == ["job-worker-0", "job-worker-1"]
