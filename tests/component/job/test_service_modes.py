"""ServiceMode.JOB: one headless Service per job and pods named `{pod}.{job}`; changing modes keeps names."""

from __future__ import annotations

from kubetrain.api import CleanPodPolicy, RunPolicy
from kubetrain.common.job import ServiceMode
from kubetrain.common.job.services import SERVICE_MODE_ANNOTATION

from .harness import TOY, Cluster
from .toyjob import toy_job

JOB_LABELS = {
    "toy.kubetrain.test/operator-name": "toyjob-controller",
    "toy.kubetrain.test/job-name": "toy",
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


async def test_a_job_keeps_the_mode_it_began_with_when_the_operators_changes(cluster: Cluster) -> None:
    """Its running pods name their peers one way: a job begun under per-replica Services (or adopted from
    Kubeflow's operator) carries on under them, and the other way round."""
    await cluster.submit(toy_job(workers=2))
    await cluster.run_all()
    before = await cluster.services()
    assert sorted(before) == ["toy-leader-0", "toy-worker-0", "toy-worker-1"]
    await cluster.restart_operator(service_mode=ServiceMode.JOB)
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 3}}}})
    await cluster.step()
    after = await cluster.services()
    assert sorted(after) == ["toy-leader-0", "toy-worker-0", "toy-worker-1", "toy-worker-2"]
    assert all(after[n]["metadata"]["uid"] == before[n]["metadata"]["uid"] for n in before)
    added = (await cluster.pods())["toy-worker-2"]
    assert "subdomain" not in added["spec"], "a replica added later is addressed like its peers"
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 1}}}})
    await cluster.step()
    assert sorted(await cluster.services()) == ["toy-leader-0", "toy-worker-0"], "scaled-away replicas"

    await cluster.submit(toy_job("new", workers=1))
    assert "new" in await cluster.services(), "a new job gets the operator's mode"
    await cluster.restart_operator()
    await cluster.api.patch(TOY, "ns", "new", {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 2}}}})
    await cluster.step()
    services = await cluster.services()
    assert "new-worker-1" not in services and "new" in services
    assert (await cluster.pods())["new-worker-1"]["spec"]["subdomain"] == "new"


async def test_a_job_may_choose_its_mode_by_annotation(cluster: Cluster) -> None:
    body = toy_job(workers=1)
    body["metadata"]["annotations"] = {SERVICE_MODE_ANNOTATION: "job"}
    await cluster.submit(body)
    assert list(await cluster.services()) == ["toy"]
    bad = toy_job("bad", workers=1)
    bad["metadata"]["annotations"] = {SERVICE_MODE_ANNOTATION: "pod"}
    await cluster.submit(bad)
    failed = await cluster.condition("Failed", name="bad")
    assert failed is not None and failed["reason"] == "ToyJobFailedValidation"
    assert "metadata.annotations[kubetrain.io/service-mode]: is 'pod'" in failed["message"]
    assert "write 'replica' or 'job'" in failed["message"]
    assert not [p for p in await cluster.pods() if p.startswith("bad-")], "nothing half-created"


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
