"""The pure rules of kubetrain's Kueue integration: names, the Workload's shape, placement, decisions, and
what the Workload is told. Expected values are Kueue v0.19.2's (its own tests' vectors where it has them)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from kubetrain.common.kueue import wlstatus
from kubetrain.common.kueue.decide import Phase, decide
from kubetrain.common.kueue.integration import builtin_frameworks, parse_setting, waits_for_pods_ready
from kubetrain.common.kueue.names import workload_name
from kubetrain.common.kueue.placement import Placement, PlacementConflict, place_pod, placements
from kubetrain.common.kueue.workload import PodSetSource, Priority, build_workload, priority_class_name

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
LONG = (
    "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-social-"
    "media-engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-senior-"
    "architect-validation-checked-approved-by-legal-and-ops-dept"
)


def test_workload_names_are_kueues() -> None:
    # Kueue's workload_names_test.go vectors (batch/v1 Job, ShortWorkloadNames off, the default)
    assert workload_name(kind="Job", group="batch", job_name="name", job_uid="uid") == "job-name-ef3a1"
    long = workload_name(kind="Job", group="batch", job_name=LONG, job_uid="uid")
    assert len(long) == 253 and long.endswith("-approved-by-l-218b8")


def _podsets() -> list[PodSetSource]:
    worker = {"spec": {"priorityClassName": "low", "containers": [{"name": "c", "image": "i"}]}}
    return [PodSetSource("Master", 1, {"spec": {"containers": []}}), PodSetSource("Worker", 3, worker)]


def test_the_priority_class_is_the_scheduling_policys_else_the_first_templates() -> None:
    job = {"spec": {"runPolicy": {"schedulingPolicy": {"priorityClass": "high"}}}}
    assert priority_class_name(job, _podsets()) == "high"
    assert priority_class_name({"spec": {}}, _podsets()) == "low"
    assert priority_class_name({"spec": {}}, _podsets()[:1]) == ""


def test_the_workload_has_one_podset_per_replica_type_in_order() -> None:
    job = {"metadata": {"name": "j", "namespace": "ns", "uid": "u1"}}
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "j",
        "uid": "u1",
        "controller": True,
    }
    low = Priority(100, "scheduling.k8s.io", "PriorityClass", "low")
    wl = build_workload(name="pytorchjob-j-abcde", raw_job=job, owner=owner, queue="q", podsets=_podsets(),
                        priority=low, labels={"x": "y"})  # fmt: skip
    assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta2" and wl["kind"] == "Workload"
    assert wl["metadata"]["labels"] == {"x": "y", "kueue.x-k8s.io/job-uid": "u1"}
    assert wl["metadata"]["ownerReferences"] == [owner]
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("master", 1), ("worker", 3)]
    assert "minCount" not in wl["spec"]["podSets"][1]
    assert wl["spec"]["priority"] == 100
    assert wl["spec"]["priorityClassRef"] == {
        "group": "scheduling.k8s.io",
        "kind": "PriorityClass",
        "name": "low",
    }
    assert "priorityClassRef" not in Priority(0).wire()


FLAVORS = {
    "a": {"spec": {"nodeLabels": {"pool": "a"}, "tolerations": [{"key": "t", "operator": "Exists"}]}},
    "b": {"spec": {"nodeLabels": {"zone": "1"}}},
}


def _admitted(**status: object) -> dict[str, object]:
    admission = {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "worker", "flavors": {"cpu": "a", "gpu": "b"}}],
    }
    return {"status": {"admission": admission, **status}}


def test_placement_unites_the_flavors_and_the_admission_checks_updates() -> None:
    check = {
        "name": "c",
        "podSetUpdates": [{"name": "worker", "labels": {"l": "v"}, "tolerations": [{"key": "u"}]}],
    }
    placed = placements(_admitted(admissionChecks=[check]), FLAVORS)["worker"]
    assert placed.node_selector == {"pool": "a", "zone": "1"}
    assert placed.tolerations == ({"key": "t", "operator": "Exists"}, {"key": "u"})
    assert placed.labels == {"kueue.x-k8s.io/podset": "worker", "l": "v"}
    pod = place_pod({"spec": {"nodeSelector": {"pool": "a", "disk": "ssd"}}}, placed, where="w")
    assert pod["spec"]["nodeSelector"] == {"pool": "a", "disk": "ssd", "zone": "1"}


def test_a_template_that_contradicts_the_admission_is_a_conflict_naming_the_key() -> None:
    with pytest.raises(PlacementConflict, match=r"spec.x\[Worker\].template: nodeSelector.*pool"):
        place_pod({"spec": {"nodeSelector": {"pool": "b"}}}, Placement(node_selector={"pool": "a"}),
                  where="spec.x[Worker].template")  # fmt: skip


def _cond(ctype: str, status: str, reason: str = "R", message: str = "m") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": "t0"}


def _wl(*conditions: dict[str, str], **status: object) -> dict[str, object]:
    meta = {"name": "wl", "resourceVersion": "7", "generation": 2}
    spec = {"podSets": [{"name": "worker", "count": 2}]}
    return {"metadata": meta, "spec": spec, "status": {"conditions": list(conditions), **status}}


@pytest.mark.parametrize(
    ("workload", "foreign", "phase", "reason"),
    [
        (None, False, Phase.CREATE, "Queued"),
        (None, True, Phase.FOREIGN, ""),
        (_wl(), False, Phase.QUEUED, "Queued"),
        (_wl(_cond("QuotaReserved", "True")), False, Phase.QUEUED, "Queued"),  # admission checks pending
        (_wl(_cond("QuotaReserved", "True"), _cond("Admitted", "True")), False, Phase.ADMITTED, ""),
        (_wl(_cond("Admitted", "True"), _cond("Evicted", "True", "Preempted")), False, Phase.EVICTED,
         "EvictedPreempted"),
    ],
)  # fmt: skip
def test_the_decision_follows_the_workload(
    workload: object, foreign: bool, phase: Phase, reason: str
) -> None:
    decision = decide(workload, foreign=foreign, queue="q")  # type: ignore[arg-type]
    assert (decision.phase, decision.reason) == (phase, reason)
    if phase in (Phase.CREATE, Phase.QUEUED, Phase.EVICTED):
        assert "LocalQueue q" in decision.message


def test_the_pending_message_carries_kueues_reason() -> None:
    pending = _wl(_cond("QuotaReserved", "False", "Pending", "insufficient quota for cpu"))
    assert "insufficient quota for cpu" in decide(pending, foreign=False, queue="q").message


def test_requeue_hands_the_quota_back_after_a_preemption() -> None:
    held = (
        _cond("QuotaReserved", "True"),
        _cond("Admitted", "True"),
        _cond("Evicted", "True", "Preempted", "p"),
    )
    wl = _wl(*held, admission={"clusterQueue": "cq"})
    patch = wlstatus.requeue(wl, NOW)
    assert patch is not None
    assert patch["metadata"] == {"resourceVersion": "7"}
    assert patch["status"]["admission"] is None
    got = {c["type"]: (c["status"], c["reason"]) for c in patch["status"]["conditions"]}
    assert got["QuotaReserved"] == ("False", "Pending")
    assert got["Admitted"] == ("False", "NoReservation")
    assert got["Requeued"] == ("True", "Preempted")
    assert got["Evicted"] == ("True", "Preempted"), "Kueue's own conditions are kept"
    assert wlstatus.requeue(_wl(_cond("Evicted", "True", "PodsReadyTimeout")), NOW) is None, "nothing held"


def test_a_pods_ready_timeout_is_not_requeued_at_once() -> None:
    wl = _wl(_cond("QuotaReserved", "True"), _cond("Evicted", "True", "PodsReadyTimeout"))
    patch = wlstatus.requeue(wl, NOW)
    assert patch is not None
    assert {c["type"]: c["status"] for c in patch["status"]["conditions"]}["Requeued"] == "False"


def test_pods_ready_uses_kueues_reasons_and_writes_only_changes() -> None:
    started = wlstatus.pods_ready(_wl(), True, NOW)
    assert started is not None and started["status"]["conditions"][-1]["reason"] == "Started"
    assert wlstatus.pods_ready(_wl(_cond("PodsReady", "True", "Started")), True, NOW) is None
    lost = wlstatus.pods_ready(_wl(_cond("PodsReady", "True", "Started")), False, NOW)
    assert lost is not None and lost["status"]["conditions"][-1]["reason"] == "WaitForRecovery"
    waiting = wlstatus.pods_ready(_wl(), False, NOW)
    assert waiting is not None and waiting["status"]["conditions"][-1]["reason"] == "WaitForStart"


def test_reclaimable_pods_are_capped_by_the_podset_and_written_only_when_changed() -> None:
    patch = wlstatus.reclaimable(_wl(), {"worker": 5, "master": 0})
    assert patch is not None and patch["status"]["reclaimablePods"] == [{"name": "worker", "count": 2}]
    assert wlstatus.reclaimable(_wl(reclaimablePods=[{"name": "worker", "count": 2}]), {"worker": 2}) is None
    assert wlstatus.reclaimable(_wl(), {"worker": 0}) is None


def test_finished_is_told_once() -> None:
    patch = wlstatus.finished(_wl(), succeeded=False, message="boom", now=NOW)
    assert patch is not None and patch["status"]["conditions"][-1] == {
        "type": "Finished", "status": "True", "reason": "Failed", "message": "boom",
        "lastTransitionTime": "2026-01-02T03:04:05Z", "observedGeneration": 2,
    }  # fmt: skip
    assert wlstatus.finished(_wl(_cond("Finished", "True")), succeeded=True, message="", now=NOW) is None


def test_the_setting_names_kinds_or_auto_or_none() -> None:
    kinds = ["PyTorchJob", "TFJob"]
    assert parse_setting("auto", kinds) == "auto"
    assert parse_setting("None", kinds) == "none"
    assert parse_setting("pytorchjob, TFJob", kinds) == frozenset(kinds)
    with pytest.raises(
        ValueError, match=r"--kueue-integration='MPIJob': MPIJob is not a kind.*PyTorchJob, TFJob"
    ):
        parse_setting("MPIJob", kinds)


KUEUE_019_DEFAULT = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  # - "kubeflow.org/pytorchjob"
  - "pod"
#waitForPodsReady:
#  timeout: 5m
"""


def test_kueues_configuration_is_read_for_its_frameworks_and_waiting() -> None:
    config = yaml.safe_load(KUEUE_019_DEFAULT)
    assert builtin_frameworks(config) == {"batch/job", "kubeflow.org/mpijob", "pod"}
    assert waits_for_pods_ready(config), "v1beta2 (v0.19) defaults waitForPodsReady on, 30 min"
    v1beta1 = "config.kueue.x-k8s.io/v1beta1"
    assert not waits_for_pods_ready({"apiVersion": v1beta1})
    assert not waits_for_pods_ready({"apiVersion": v1beta1, "waitForPodsReady": {"timeout": "5m"}})
    assert waits_for_pods_ready({"apiVersion": v1beta1, "waitForPodsReady": {"enable": True}})
    assert builtin_frameworks({}) == {"batch/job"}
