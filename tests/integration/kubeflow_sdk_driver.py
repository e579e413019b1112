"""One step of a Kubeflow Training SDK flow, run by test_kubeflow_sdk.py with the SDK's own python.

    python kubeflow_sdk_driver.py KUBECONFIG NAMESPACE STEP KIND NAME [ARG]

The SDK (kubeflow-training 1.9.x) needs kubernetes<36, so it cannot be imported beside kubetrain: this
script runs in its venv (hack/kubeflow-sdk.sh) and uses nothing but the SDK, the way a user's notebook
does. Each step prints one JSON document on stdout (`follow` prints the SDK's own log lines instead);
an SDK exception exits 1 with its message on stderr.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kubeflow.training import TrainingClient, models
from kubeflow.training.constants import constants

MODEL_ONLY = {
    constants.XGBOOSTJOB_KIND: ("xgb_replica_specs", {"Master": 1, "Worker": 1}),
    constants.JAXJOB_KIND: ("jax_replica_specs", {"Worker": 2}),
    # parameter-server mode: its Master has the master role, whose logs the SDK reads by default
    constants.PADDLEJOB_KIND: ("paddle_replica_specs", {"Master": 1, "Worker": 1}),
}
"""The kinds the SDK builds only from their model (not from an image): the model's field of replica specs,
and the replicas a test job gets."""


def create(client: TrainingClient, kind: str, name: str, _arg: str) -> Any:
    """A job as the SDK builds it from an image: a PyTorchJob gets Master + 1 Worker, a TFJob 2 Workers.
    The SDK builds no other kind from an image: those are written as their models (MODEL_ONLY)."""
    if kind in MODEL_ONLY:
        client.create_job(job=model_job(kind, name))
    else:
        client.create_job(name=name, job_kind=kind, base_image="trainer:1", num_workers=2)
    return {"created": name}


def model_job(kind: str, name: str) -> Any:
    """The SDK's model of a `kind` job with MODEL_ONLY's replicas, each pod one container of the kind's
    default name, the way a notebook writes one."""
    field, replicas = MODEL_ONLY[kind]
    parameters = constants.JOB_PARAMETERS[kind]
    container = models.V1Container(name=parameters["container"], image="trainer:1")
    template = models.V1PodTemplateSpec(spec=models.V1PodSpec(containers=[container]))
    specs = {
        rtype: models.KubeflowOrgV1ReplicaSpec(replicas=n, template=template) for rtype, n in replicas.items()
    }
    spec = getattr(models, f"{parameters['model']}Spec")(
        run_policy=models.KubeflowOrgV1RunPolicy(), **{field: specs}
    )
    return getattr(models, parameters["model"])(
        api_version=constants.API_VERSION, kind=kind, metadata=models.V1ObjectMeta(name=name), spec=spec
    )


def create_managed_by(client: TrainingClient, kind: str, name: str, managed_by: str) -> Any:
    """A PyTorchJob model with `runPolicy.managedBy` (the SDK's managedBy flow)."""
    container = models.V1Container(name="pytorch", image="trainer:1", command=["python", "train.py"])
    template = models.V1PodTemplateSpec(spec=models.V1PodSpec(containers=[container]))
    job = models.KubeflowOrgV1PyTorchJob(
        api_version=constants.API_VERSION,
        kind=kind,
        metadata=models.V1ObjectMeta(name=name),
        spec=models.KubeflowOrgV1PyTorchJobSpec(
            run_policy=models.KubeflowOrgV1RunPolicy(managed_by=managed_by),
            pytorch_replica_specs={
                "Master": models.KubeflowOrgV1ReplicaSpec(replicas=1, template=template),
                "Worker": models.KubeflowOrgV1ReplicaSpec(replicas=1, template=template),
            },
        ),
    )
    client.create_job(job=job)
    return {"created": name}


def get(client: TrainingClient, kind: str, name: str, _arg: str) -> Any:
    job = client.get_job(name, job_kind=kind)
    pods = client.get_job_pod_names(name, is_master=False)
    return {
        "kind": job.kind,
        "name": job.metadata.name,
        "managedBy": job.spec.run_policy.managed_by if job.spec.run_policy else None,
        "conditions": [c.type for c in client.get_job_conditions(name, job_kind=kind)],
        "created": client.is_job_created(name, job_kind=kind),
        "running": client.is_job_running(name, job_kind=kind),
        "succeeded": client.is_job_succeeded(name, job_kind=kind),
        "pods": sorted(pods),
    }


def wait(client: TrainingClient, kind: str, name: str, condition: str) -> Any:
    job = client.wait_for_job_conditions(
        name, job_kind=kind, expected_conditions={condition}, wait_timeout=90, polling_interval=1
    )
    return {"conditions": [c.type for c in job.status.conditions if c.status == "True"]}


def logs(client: TrainingClient, kind: str, name: str, _arg: str) -> Any:
    master, _ = client.get_job_logs(name, job_kind=kind)
    every, _ = client.get_job_logs(name, job_kind=kind, is_master=False)
    return {"master": master, "all": every}


def follow(client: TrainingClient, kind: str, name: str, _arg: str) -> Any:
    client.get_job_logs(name, job_kind=kind, follow=True)  # prints "[Pod NAME]: line" until the stream ends
    return None


def delete(client: TrainingClient, kind: str, name: str, _arg: str) -> Any:
    client.delete_job(name, job_kind=kind)
    return {"deleted": name}


STEPS = {
    f.__name__.replace("_", "-"): f for f in (create, create_managed_by, get, wait, logs, follow, delete)
}


def main(argv: list[str]) -> int:
    kubeconfig, namespace, step, kind, name, *rest = argv
    client = TrainingClient(config_file=kubeconfig, namespace=namespace, job_kind=kind)
    try:
        result = STEPS[step](client, kind, name, rest[0] if rest else "")
    except Exception as err:  # the user-visible error is the point of some steps
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 1
    if result is not None:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
