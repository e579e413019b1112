"""ServiceMode.JOB: one headless Service per job and pods named `{pod}.{job}`; changing modes keeps names."""

from __future__ import annotations

from kubetrain.api import CleanPodPolicy, RunPolicy
from kubetrain.common.job import ServiceMode

from .harness import TOY, Cluster
from .toyjob import toy_job

JOB_LABELS = {
    "training.kubeflow.org/operator-name": "toyjob-controller",
    "training.kubeflow.org/job-name": "toy",
}


async def test_one_service_per_job_and_every_pod_under_it(cluster: Cluster) -> None:
    await cluster.restart_operator(service_mode=ServiceMode.JOB)
    await cluster.submit(toy_job(workers=2))
    services = await cluster.services()
    assert list(services) == ["toy"]
    assert services["toy"]["metadata"]["labels"] == JOB_LABELS
    assert services["toy"]["spec"] == {
        "clusterIP": "None",
        "selector": JOB_LABELS,
        "publishNotReadyAddresses": True,
    }
    pods = await cluster.pods()
    assert sorted(pods) == ["toy-leader-0", "toy-worker-0", "toy-worker-1"]
    for name, pod in pods.items():
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (name, "toy")
    await cluster.run_all()
    assert await cluster.is_true("Running"), "the job Service's creation is expected and observed"
    assert (
        cluster.op.controller.replica_address(
            cluster.op.controller.kind.model.model_validate(await cluster.job()), "Worker", 1
        )
        == "toy-worker-1.toy"
    )


async def test_a_job_begun_under_per_replica_services_keeps_them_under_the_job_mode(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=2))
    await cluster.run_all()
    before = await cluster.services()
    assert sorted(before) == ["toy-leader-0", "toy-worker-0", "toy-worker-1"]
    await cluster.restart_operator(service_mode=ServiceMode.JOB)
    await cluster.step()
    after = await cluster.services()
    assert sorted(after) == ["toy", "toy-leader-0", "toy-worker-0", "toy-worker-1"], (
        "running pods still use their per-replica names; new ones get the job's"
    )
    assert all(after[n]["metadata"]["uid"] == before[n]["metadata"]["uid"] for n in before)
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 1}}}})
    await cluster.step()
    assert sorted(await cluster.services()) == ["toy", "toy-leader-0", "toy-worker-0"], (
        "a replica scaled away loses its Service"
    )


async def test_the_job_service_follows_suspend_and_cleanup(cluster: Cluster) -> None:
    await cluster.restart_operator(service_mode=ServiceMode.JOB)
    await cluster.submit(toy_job(workers=1, run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL)))
    assert list(await cluster.services()) == ["toy"]
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"runPolicy": {"suspend": True}}})
    await cluster.step()
    assert await cluster.services() == {}
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"runPolicy": {"suspend": False}}})
    await cluster.step()
    assert list(await cluster.services()) == ["toy"]
    await cluster.run_all()
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    await cluster.step()
    assert await cluster.is_true("Succeeded")
    assert await cluster.services() == {}, "cleanPodPolicy All leaves no pod, so no Service either"
