"""The public surface of kubetrain.api is explicit and pinned: a change here is a deliberate API change."""

from __future__ import annotations

import kubetrain.api as api

PUBLIC = {
    # models
    "TFJob",
    "TFJobSpec",
    "TFReplicaType",
    "SuccessPolicy",
    "PyTorchJob",
    "PyTorchJobSpec",
    "PyTorchReplicaType",
    "ElasticPolicy",
    "RDZVBackend",
    "RDZVConf",
    "MPIJob",
    "MPIJobSpec",
    "MPIReplicaType",
    "MPIImplementation",
    "LauncherCreationPolicy",
    "JAXJob",
    "JAXJobSpec",
    "JAXReplicaType",
    "XGBoostJob",
    "XGBoostJobSpec",
    "XGBoostReplicaType",
    "PaddleJob",
    "PaddleJobSpec",
    "PaddleReplicaType",
    "PaddleElasticPolicy",
    "TrainingJob",
    "JobSpecBase",
    "ReplicaSpec",
    "RunPolicy",
    "SchedulingPolicy",
    "JobStatus",
    "ReplicaStatus",
    "JobCondition",
    "JobConditionType",
    "ConditionStatus",
    "RestartPolicy",
    "CleanPodPolicy",
    "LabelSelector",
    "ObjectMeta",
    "OwnerReference",
    "PodTemplateSpec",
    "PodSpec",
    "Container",
    "ContainerPort",
    "EnvVar",
    "ResourceRequirements",
    "Volume",
    "VolumeMount",
    "WireModel",
    "KubeModel",
    "Time",
    "Quantity",
    "Int32",
    "Int64",
    # progress (KEP-2779)
    "TrainerStatus",
    "TrainerMetric",
    "MAX_METRICS",
    "MAX_METRIC_NAME",
    "MAX_METRIC_VALUE",
    "latest_metric",
    # kinds
    "KindInfo",
    "ValidationRule",
    "KINDS",
    "JAXJOB",
    "PADDLEJOB",
    "MAX_REPLICAS",
    "MAX_SLOTS_PER_WORKER",
    "TFJOB",
    "PYTORCHJOB",
    "MPIJOB",
    "XGBOOSTJOB",
    "GROUP",
    "MULTIKUEUE_CONTROLLER",
    "AnyJob",
    "kind_info",
    "lookup_kind",
    # defaulting, validation, loading
    "apply_defaults",
    "validate",
    "check_job",
    "owned_env_names",
    "FieldError",
    "InvalidJobError",
    "parse_job",
    "load_jobs",
    "load_valid_jobs",
    "other_objects",
    "dump_jobs",
}


def test_all_is_pinned() -> None:
    assert set(api.__all__) == PUBLIC
    assert len(api.__all__) == len(PUBLIC)


def test_every_public_name_exists() -> None:
    for name in api.__all__:
        assert getattr(api, name) is not None, name
