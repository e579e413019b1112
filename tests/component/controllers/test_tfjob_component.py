"""TFJobController on the JobController template, over the in-memory API server: TensorFlow's rules meet the
template's lifecycle (success policy with pods driven to Succeeded, cleanup, restart policies)."""

from __future__ import annotations

from typing import Any

from framework_cluster import FrameworkCluster

from kubetrain.api import TFJOB
from kubetrain.common.job import JOB_ROLE_LABEL
from kubetrain.common.kube.resources import PODS, SERVICES
from kubetrain.controllers.tensorflow import TFJobController
from kubetrain.testing.operator import job_manifest, replica_spec


def tfjob(specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return job_manifest(TFJOB, specs, **spec)


async def test_worker_0_succeeding_ends_a_chiefless_job_and_cleans_up_running_pods() -> None:
    async with FrameworkCluster(TFJobController) as c:
        await c.submit(
            tfjob({"PS": replica_spec(1), "Worker": replica_spec(3)}, runPolicy={"cleanPodPolicy": "Running"})
        )
        await c.run("job-ps-0", "job-worker-0", "job-worker-1", "job-worker-2")
        assert await c.reason("Running") == "TFJobRunning"
        await c.succeed("job-worker-0")
        succeeded = await c.condition("Succeeded")
        assert succeeded is not None
        assert (succeeded["reason"], succeeded["message"]) == (
            "TFJobSucceeded",
            "TFJob ns/job successfully completed.",
        )
        assert await c.names(PODS) == ["job-worker-0"]
        assert await c.names(SERVICES) == ["job"], "the job's Service stays while a pod does"


async def test_all_workers_policy_waits_for_every_worker() -> None:
    async with FrameworkCluster(TFJobController) as c:
        await c.submit(tfjob({"Worker": replica_spec(2)}, successPolicy="AllWorkers"))
        await c.run("job-worker-0", "job-worker-1")
        await c.succeed("job-worker-0")
        assert await c.condition("Succeeded") is None
        assert await c.reason("Running") == "TFJobRunning"
        await c.succeed("job-worker-1")
        assert await c.reason("Succeeded") == "TFJobSucceeded"


async def test_the_chief_decides_and_the_evaluator_is_ignored() -> None:
    specs = {"Chief": replica_spec(1), "Worker": replica_spec(2), "Evaluator": replica_spec(1)}
    async with FrameworkCluster(TFJobController) as c:
        await c.submit(tfjob(specs))
        assert (await c.pod("job-chief-0"))["metadata"]["labels"][JOB_ROLE_LABEL] == "master"
        assert JOB_ROLE_LABEL not in (await c.pod("job-worker-0"))["metadata"]["labels"]
        await c.run("job-worker-0", "job-worker-1", "job-evaluator-0")
        assert await c.condition("Running") is None  # the chief is not running yet
        await c.run("job-chief-0")
        await c.succeed("job-worker-0", "job-worker-1", "job-evaluator-0")
        assert await c.condition("Succeeded") is None
        await c.succeed("job-chief-0")
        assert await c.reason("Succeeded") == "TFJobSucceeded"


async def test_a_failed_parameter_server_fails_the_job_with_kubeflows_message() -> None:
    async with FrameworkCluster(TFJobController) as c:
        await c.submit(tfjob({"PS": replica_spec(1), "Worker": replica_spec(2)}))
        await c.run("job-ps-0", "job-worker-0", "job-worker-1")
        await c.fail("job-ps-0")
        failed = await c.condition("Failed")
        assert failed is not None
        assert (failed["reason"], failed["message"]) == (
            "TFJobFailed",
            "TFJob ns/job has failed because 1 PS replica(s) failed.",
        )


async def test_dynamic_workers_may_fail_without_failing_the_job() -> None:
    specs = {"Chief": replica_spec(1), "Worker": replica_spec(2)}
    async with FrameworkCluster(TFJobController) as c:
        await c.submit(tfjob(specs, enableDynamicWorker=True))
        assert '"sparseCluster"' in (await c.env("job-worker-1"))["TF_CONFIG"]
        await c.run("job-chief-0", "job-worker-0", "job-worker-1")
        await c.fail("job-worker-1")
        assert await c.condition("Failed") is None
        await c.succeed("job-chief-0")
        assert await c.reason("Succeeded") == "TFJobSucceeded"


async def test_exit_code_policy_retries_137_and_fails_on_1() -> None:
    async with FrameworkCluster(TFJobController) as c:
        await c.submit(tfjob({"Worker": replica_spec(2, restartPolicy="ExitCode")}))
        await c.run("job-worker-0", "job-worker-1")
        first = (await c.pod("job-worker-1"))["metadata"]["uid"]
        await c.fail("job-worker-1", exit_code=137)
        # Restarting lasts until the replacement is seen; the Event stays.
        assert c.events("TFJobRestarting") == ["job job is restarting because Worker replica(s) failed."]
        assert (await c.pod("job-worker-1"))["metadata"]["uid"] != first
        assert (await c.pod("job-worker-1"))["spec"]["restartPolicy"] == "Never"
        await c.run("job-worker-1")
        await c.fail("job-worker-1", exit_code=1)
        assert await c.reason("Failed") == "TFJobFailed"


async def test_a_single_worker_job_runs_without_tf_config() -> None:
    async with FrameworkCluster(TFJobController) as c:
        await c.submit(tfjob({"Worker": replica_spec(1)}))
        assert "TF_CONFIG" not in await c.env("job-worker-0")
        await c.run("job-worker-0")
        await c.succeed("job-worker-0")
        assert await c.reason("Succeeded") == "TFJobSucceeded"
