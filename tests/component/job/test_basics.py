"""A ToyJob's pods and Services get Kubeflow's names, labels under the kind's own group (not Kubeflow's),
and an owner; scaling; status; extra objects."""

from __future__ import annotations

from kubetrain.common.kube.resources import CONFIGMAPS, PODS

from .harness import TOY, Cluster
from .toyjob import toy_job


async def test_pods_and_services_are_created_with_labels_and_owner(cluster: Cluster) -> None:
    job = await cluster.submit(toy_job(workers=2))
    pods = await cluster.pods()
    assert sorted(pods) == ["toy-leader-0", "toy-worker-0", "toy-worker-1"]
    worker = pods["toy-worker-1"]
    assert worker["metadata"]["labels"] == {
        "toy.kubetrain.test/operator-name": "toyjob-controller",
        "toy.kubetrain.test/job-name": "toy",
        "toy.kubetrain.test/replica-type": "worker",
        "toy.kubetrain.test/replica-index": "1",
    }
    assert pods["toy-leader-0"]["metadata"]["labels"]["toy.kubetrain.test/job-role"] == "master"
    owner = worker["metadata"]["ownerReferences"]
    assert owner == [
        {
            "apiVersion": "toy.kubetrain.test/v1",
            "kind": "ToyJob",
            "name": "toy",
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert worker["spec"]["restartPolicy"] == "Never"
    env = {e["name"]: e["value"] for e in worker["spec"]["containers"][0]["env"]}
    assert env == {"TOY_ROLE": "worker", "TOY_WORLD": "3"}
    services = await cluster.services()
    assert sorted(services) == sorted(pods)
    svc = services["toy-worker-1"]["spec"]
    assert svc["clusterIP"] == "None"
    assert svc["selector"]["toy.kubetrain.test/replica-index"] == "1"
    assert svc["ports"] == [{"name": "toy-port", "port": 7777, "targetPort": 7777, "protocol": "TCP"}]


async def test_conditions_follow_the_pods(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1))
    assert await cluster.conditions() == [("Created", "True", "ToyJobCreated")]
    created = await cluster.condition("Created")
    assert created is not None and created["message"] == "ToyJob toy is created."
    await cluster.run_all()
    assert await cluster.conditions() == [
        ("Created", "True", "ToyJobCreated"),
        ("Running", "True", "ToyJobRunning"),
    ]
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    assert await cluster.conditions() == [
        ("Created", "True", "ToyJobCreated"),
        ("Running", "False", "ToyJobRunning"),
        ("Succeeded", "True", "ToyJobSucceeded"),
    ]
    status = (await cluster.job())["status"]
    assert status["completionTime"] and status["startTime"]
    assert status["replicaStatuses"]["Leader"]["succeeded"] == 1
    assert cluster.op.counter("training_operator_jobs_successful") == 1


async def test_scale_up_creates_and_scale_down_deletes_pods_and_services(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=3))
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 5}}}})
    await cluster.step()
    assert sorted(await cluster.pods()) == ["toy-leader-0", *(f"toy-worker-{i}" for i in range(5))]
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 1}}}})
    await cluster.step()
    assert sorted(await cluster.pods()) == ["toy-leader-0", "toy-worker-0"]
    assert sorted(await cluster.services()) == ["toy-leader-0", "toy-worker-0"]
    # one Event for the pods a reconcile deleted, naming them
    deleted = [e.message for e in cluster.op.events.events if e.reason == "SuccessfulDeletePod"]
    assert deleted == ["Deleted 4 pods: toy-worker-1, toy-worker-2, toy-worker-3, toy-worker-4"]


async def test_a_replica_type_removed_from_the_spec_loses_its_pods(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=2))
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"toyReplicaSpecs": {"Worker": None}}})
    await cluster.step()
    assert sorted(await cluster.pods()) == ["toy-leader-0"]
    assert sorted(await cluster.services()) == ["toy-leader-0"]


async def test_extra_objects_are_created_kept_in_shape_and_owned(cluster: Cluster) -> None:
    job = await cluster.submit(toy_job(workers=2))
    hosts = await cluster.api.get(CONFIGMAPS, "ns", "toy-hosts")
    assert hosts["data"] == {"hosts": "toy-leader-0\ntoy-worker-0\ntoy-worker-1"}
    assert hosts["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert hosts["metadata"]["labels"]["toy.kubetrain.test/job-name"] == "toy"
    await cluster.api.patch(CONFIGMAPS, "ns", "toy-hosts", {"data": {"hosts": "edited by hand"}})
    await cluster.step()
    assert (await cluster.api.get(CONFIGMAPS, "ns", "toy-hosts"))["data"]["hosts"].startswith("toy-leader-0")
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 1}}}})
    await cluster.step()
    assert (await cluster.api.get(CONFIGMAPS, "ns", "toy-hosts"))["data"][
        "hosts"
    ] == "toy-leader-0\ntoy-worker-0"


async def test_events_and_counters_record_the_decisions(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1))
    await cluster.run_all()
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    reasons = cluster.op.events.reasons()
    # the new job's one Event names every child its first reconcile created, kind by kind
    events = cluster.op.events.events
    [created] = [e.message for e in events if e.reason == "ToyJobCreated"]
    assert created == (
        "ToyJob toy is created. Created 2 pods: toy-leader-0, toy-worker-0; "
        "2 services: toy-leader-0, toy-worker-0; configmap: toy-hosts."
    )
    assert not [r for r in reasons if r.startswith("SuccessfulCreate")], "told once, in ToyJobCreated"
    for reason in ("ToyJobCreated", "ToyJobRunning", "ToyJobSucceeded"):
        assert reasons.count(reason) == 1, reason
    assert cluster.op.counter("training_operator_jobs_created") == 1
    assert cluster.op.counter("training_operator_jobs_successful") == 1
    assert cluster.op.counter("training_operator_jobs_failed") == 0


async def test_an_invalid_job_fails_with_the_field_and_the_fix(cluster: Cluster) -> None:
    await cluster.submit(toy_job(leader=2, workers=1))
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailedValidation"
    assert failed["message"] == (
        "spec.toyReplicaSpecs.Leader.replicas: exactly one Leader replica is allowed per ToyJob, got 2; "
        "set replicas: 1; run more replicas as Workers"
    )
    assert await cluster.pods() == {}


async def test_a_job_the_model_rejects_fails_instead_of_crashing_the_operator(cluster: Cluster) -> None:
    body = toy_job()
    body["spec"]["runPolicy"] = {"backoffLimit": "three"}
    await cluster.submit(body)
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailedValidation"
    assert "spec.runPolicy.backoffLimit" in failed["message"]
    assert cluster.api.count("create", PODS) == 0
