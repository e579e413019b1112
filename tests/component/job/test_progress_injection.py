"""Pods of a reporting job get Kubeflow Trainer's env and the projected token+CA volume, the token with the
job's own audience; a job can opt out, and an operator without a progress endpoint injects nothing. The
reconcile that finishes a job writes its last report with the verdict."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubetrain.api import TrainerMetric, TrainerStatus
from kubetrain.common.progress.coalesce import Coalescer, JobKey
from kubetrain.common.progress.inject import MOUNT_PATH, OPT_OUT_ANNOTATION, VOLUME, ProgressInjection

from .harness import Cluster
from .toyjob import toy_job

INJECTION = ProgressInjection("https://kubetrain-progress.kubetrain-system.svc:8443", audience="kt-progress")


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or ()}


async def test_every_container_of_every_new_pod_gets_the_env_and_the_volume(cluster: Cluster) -> None:
    await cluster.restart_operator(progress=INJECTION)
    await cluster.submit(toy_job(workers=2))
    pods = await cluster.pods()
    assert len(pods) == 3
    group, version = cluster.op.controller.kind.group, cluster.op.controller.kind.version
    plural = cluster.op.controller.kind.plural
    for pod in pods.values():
        (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == VOLUME]
        token, ca = volume["projected"]["sources"]
        assert token["serviceAccountToken"] == {
            "audience": f"kt-progress/{group}/{version}/namespaces/ns/{plural}/toy/status",
            "expirationSeconds": 3600,
            "path": "token",
        }
        assert ca["configMap"]["name"] == "kubetrain-progress-ca"
        assert ca["configMap"]["optional"] is True, "a pod never waits for the CA to start training"
        for container in pod["spec"]["containers"]:
            env = _env(container)
            assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
                f"https://kubetrain-progress.kubetrain-system.svc:8443/apis/{group}/{version}"
                f"/namespaces/ns/{plural}/toy/status"
            )
            assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == f"{MOUNT_PATH}/token"
            assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == f"{MOUNT_PATH}/ca.crt"
            assert {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True} in container["volumeMounts"]


async def test_a_job_can_opt_out_and_no_endpoint_means_no_injection(cluster: Cluster) -> None:
    await cluster.restart_operator(progress=INJECTION)
    job = toy_job(workers=1)
    job["metadata"]["annotations"] = {OPT_OUT_ANNOTATION: "false"}
    await cluster.submit(job)
    await cluster.restart_operator()  # no endpoint configured
    await cluster.submit(toy_job("plain", workers=1))
    pods = await cluster.pods()
    assert len(pods) == 4  # a leader and a worker of each job
    for pod in pods.values():
        assert VOLUME not in {v["name"] for v in pod["spec"].get("volumes") or ()}, pod["metadata"]["name"]
        assert not any("KUBEFLOW_TRAINER_SERVER_URL" in _env(c) for c in pod["spec"]["containers"])


async def test_the_last_report_and_the_verdict_are_written_in_one_status_write(cluster: Cluster) -> None:
    """A job is never seen Succeeded with an older progress: the reconcile that writes the verdict takes the
    report still waiting for its interval and writes it in the same patch, replacing `trainerStatus`."""
    coalescer = Coalescer(cluster.api, interval=10.0, clock=cluster.clock)
    await cluster.restart_operator(progress=ProgressInjection("https://op:8443", reports=coalescer))
    await cluster.submit(toy_job(workers=0))
    await cluster.run_all()
    key = JobKey(cluster.op.controller.kind, "ns", "toy")
    coalescer.offer(key, TrainerStatus(progress_percentage=16, estimated_remaining_seconds=50))
    await coalescer.write_due()
    final = [TrainerMetric(name="loss", value="0.01")]
    coalescer.offer(key, TrainerStatus(progress_percentage=100, metrics=final))
    assert await coalescer.write_due() is not None, "the final report waits for its interval"
    writes: list[Any] = []
    patch = cluster.api.patch

    async def recorded(res: Any, namespace: str | None, name: str, body: Any, **kwargs: Any) -> Any:
        if kwargs.get("subresource") == "status" and res == cluster.op.controller.job_resource():
            writes.append(body["status"])
        return await patch(res, namespace, name, body, **kwargs)

    cluster.api.patch = recorded  # type: ignore[method-assign]
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    (verdict,) = [w for w in writes if any(c["type"] == "Succeeded" for c in w.get("conditions") or ())]
    assert verdict["trainerStatus"]["progressPercentage"] == 100
    assert verdict["trainerStatus"]["estimatedRemainingSeconds"] is None, "the old ETA is removed"
    stored = (await cluster.job())["status"]["trainerStatus"]
    assert stored["progressPercentage"] == 100 and "estimatedRemainingSeconds" not in stored
    assert await coalescer.write_due() is None, "nothing waits any more: it is not written twice"


async def test_the_ca_is_published_to_the_namespace_before_its_first_pod(cluster: Cluster) -> None:
    """The kubelet reads the optional CA ConfigMap once at a pod's start (and again only about a minute
    later): a pod made before the copy would fail every report of a short run."""
    published: list[tuple[str, int]] = []

    async def publish(namespace: str) -> None:
        published.append((namespace, len(await cluster.pods())))

    await cluster.restart_operator(progress=replace(INJECTION, publish=publish))
    await cluster.submit(toy_job(workers=2))
    assert len(await cluster.pods()) == 3
    assert published and published[0] == ("ns", 0), published
    opted_out = toy_job("quiet", workers=1)
    opted_out["metadata"]["annotations"] = {OPT_OUT_ANNOTATION: "false"}
    before = len(published)
    await cluster.submit(opted_out)
    assert len(await cluster.pods()) == 5 and len(published) == before, "an opted-out job publishes nothing"
