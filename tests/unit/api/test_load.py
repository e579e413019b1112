"""Loading YAML: the right model per apiVersion and kind; every mistake reported without pydantic's voice."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import (
    InvalidJobError,
    MPIJob,
    PyTorchJob,
    TFJob,
    dump_jobs,
    load_jobs,
    load_valid_jobs,
    other_objects,
    parse_job,
)

TF = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: a}
spec:
  tfReplicaSpecs:
    Worker:
      template: {spec: {containers: [{name: tensorflow, image: tf:2}]}}
"""
PT = (
    TF.replace("TFJob", "PyTorchJob")
    .replace("tfReplicaSpecs", "pytorchReplicaSpecs")
    .replace("tensorflow", "pytorch")
)
MPI = (
    TF.replace("kubeflow.org/v1", "kubeflow.org/v2beta1")
    .replace("TFJob", "MPIJob")
    .replace("tfReplicaSpecs", "mpiReplicaSpecs")
    .replace("Worker", "Launcher")
)


def test_each_kind_gets_its_model() -> None:
    jobs = load_jobs("---\n".join([TF, PT, MPI]))
    assert [type(j) for j in jobs] == [TFJob, PyTorchJob, MPIJob]


def test_empty_documents_are_skipped_and_lists_unpacked() -> None:
    listed = "apiVersion: v1\nkind: List\nitems:\n" + "\n".join(
        "- " + "\n  ".join(doc.strip().splitlines()) for doc in (TF, PT)
    )
    assert [type(j) for j in load_jobs("---\n---\n" + listed + "\n---\n")] == [TFJob, PyTorchJob]
    assert load_jobs("") == []


def error_lines(text: str) -> list[str]:
    with pytest.raises(InvalidJobError) as caught:
        load_jobs(text)
    return [str(e) for e in caught.value.errors]


@pytest.mark.parametrize(
    "text,line",
    [
        (
            "apiVersion: kubeflow.org/v1\nkind: MXJob\n",
            "kind: 'MXJob' is not a kind kubetrain serves; use one of "
            "TFJob (kubeflow.org/v1), PyTorchJob (kubeflow.org/v1), MPIJob (kubeflow.org/v2beta1), "
            "JAXJob (kubeflow.org/v1), XGBoostJob (kubeflow.org/v1)",
        ),
        ("apiVersion: kubeflow.org/v1\n", "kind: is required; use one of TFJob"),
        ("kind: PyTorchJob\n", "apiVersion: is required; set apiVersion: kubeflow.org/v1"),
        (
            "apiVersion: kubeflow.org/v1beta2\nkind: TFJob\n",
            "apiVersion: TFJob is not served as 'kubeflow.org/v1beta2'",
        ),
        ("- a\n- b\n", "(document): a job must be a mapping"),
        ("just text\n", "(document): a job must be a mapping"),
    ],
)
def test_what_is_not_a_job_says_what_is_served(text: str, line: str) -> None:
    assert any(found.startswith(line) for found in error_lines(text)), error_lines(text)


def test_paths_are_camel_case_and_index_lists() -> None:
    text = TF.replace(
        "{name: tensorflow, image: tf:2}", "{name: tensorflow, image: tf:2, ports: [{containerPort: x}]}"
    )
    assert error_lines(text) == [
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].ports[0].containerPort: "
        "must be a whole number, got 'x'; write a number without quotes, e.g. 2"
    ]


def test_odd_keys_are_quoted_in_paths() -> None:
    text = TF.replace("metadata: {name: a}", "metadata: {name: a, labels: {app.kubernetes.io/name: 3}}")
    assert error_lines(text)[0].startswith(
        'metadata.labels["app.kubernetes.io/name"]: must be a string, got 3'
    )


def test_missing_required_field() -> None:
    text = TF.replace("{name: tensorflow, image: tf:2}", "{name: tensorflow, image: tf:2, env: [{value: x}]}")
    assert error_lines(text) == [
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].env[0].name: is required; add `name`"
    ]


def test_null_replica_spec() -> None:
    assert error_lines(
        TF.replace(
            "Worker:\n      template: {spec: {containers: [{name: tensorflow, image: tf:2}]}}", "Worker: null"
        )
    ) == ["spec.tfReplicaSpecs.Worker: must be a mapping, got null; write it as `key: value` lines"]


BAD_INPUTS = [
    "apiVersion: kubeflow.org/v1\nkind: TFJob\nspec: [1]\n",
    "apiVersion: kubeflow.org/v1\nkind: TFJob\nspec: {runPolicy: {suspend: maybe, cleanPodPolicy: 3}}\n",
    "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {creationTimestamp: last tuesday}\nspec: {}\n",
    "apiVersion: kubeflow.org/v1\nkind: TFJob\nstatus: {conditions: [{type: Exploded, status: Maybe}]}\n",
    "apiVersion: kubeflow.org/v1\nkind: TFJob\n"
    "spec: {tfReplicaSpecs: {W: {template: {spec: {containers: 7}}}}}",
    "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nspec: {slotsPerWorker: 1.5, extra: true}\n",
    "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\n"
    "spec: {elasticPolicy: {rdzvBackend: zk, rdzvConf: {a: 1}}}",
    "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nspec: {slotsPerWorker: 3000000000}\n",
    "key: [unclosed\n",
    "\t- tab\n",
]


@pytest.mark.parametrize("text", BAD_INPUTS)
def test_errors_never_leak_pydantic(text: str) -> None:
    with pytest.raises(InvalidJobError) as caught:
        load_jobs(text)
    report = str(caught.value)
    for leak in (
        "pydantic",
        "Input should",
        "errors.pydantic.dev",
        "type=",
        "Traceback",
        "ValidationError",
        "instance of",
        "Value error",
    ):
        assert leak not in report, report
    assert all(e.message for e in caught.value.errors)
    assert all(e.fix for e in caught.value.errors)


def test_parse_job_accepts_any_mapping_and_refuses_anything_else() -> None:
    assert isinstance(parse_job({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob"}), MPIJob)
    bad: Any
    for bad in (None, 3, "TFJob", ["kind", "TFJob"]):
        with pytest.raises(InvalidJobError):
            parse_job(bad)


def test_timestamps_stay_strings_until_the_model_reads_them() -> None:
    job = load_jobs(
        TF.replace("metadata: {name: a}", "metadata: {name: a, annotations: {when: 2026-01-02T03:04:05Z}}")
    )[0]
    assert job.metadata.annotations == {"when": "2026-01-02T03:04:05Z"}


def test_dump_then_load_is_identity() -> None:
    jobs = load_jobs("---\n".join([TF, PT, MPI]))
    text = dump_jobs(jobs)
    assert text.count("\n---\n") == 2
    assert load_jobs(text) == jobs


def test_load_valid_jobs_defaults_and_numbers_documents() -> None:
    jobs = load_valid_jobs(TF + "---\n" + PT)
    assert [j.replica_specs["Worker"].replicas for j in jobs] == [1, 1]
    with pytest.raises(InvalidJobError) as caught:
        load_valid_jobs(TF + "---\n" + PT.replace("image: tf:2", "image: ''"))
    assert [str(e).split(":")[0] for e in caught.value.errors] == ["document 2"]


def test_objects_of_other_groups_beside_a_job_are_passed_over_and_listed() -> None:
    """A file a user `kubectl apply`s whole: the PVC it mounts, a PriorityClass, then the job."""
    text = (
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: ckpt}\n---\n"
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 1\n---\n"
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: a}\nspec:\n"
        "  pytorchReplicaSpecs: {Master: {template: {spec: {containers: [{name: pytorch, image: i}]}}}}\n"
    )
    assert [job.metadata.name for job in load_jobs(text)] == ["a"]
    assert [(o["kind"], o["metadata"]["name"]) for o in other_objects(text)] == [
        ("PersistentVolumeClaim", "ckpt"),
        ("PriorityClass", "low"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: kubeflow.org/v1\nkind: MXJob\n",  # a (retired) Kubeflow kind kubetrain does not serve
        "apiVersion: v1\nkind: TFJob\n",  # a job kind under a wrong apiVersion
    ],
)
def test_a_job_like_document_is_never_passed_over(text: str) -> None:
    assert error_lines(text) and other_objects(text) == []
