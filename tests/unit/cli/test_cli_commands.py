"""The job commands against a fake SDK: what they print, what they ask the SDK, which exit code they give.

The exit codes are a contract with scripts (`kubetrain --help` lists them): 0 done, 1 the job failed or
is missing, 2 bad input (nothing changed), 3 timed out, 4 cluster trouble.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import AnyJob, load_jobs
from kubetrain.cli import build_parser, jobargs, main
from kubetrain.cli.exitcodes import ExitCode
from kubetrain.client.errors import ClusterAccessError, ConfigError, JobFailedError, WaitTimeoutError
from kubetrain.client.logs import LogLine

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
Make = Callable[..., AnyJob]


def _status(*types: str) -> dict[str, Any]:
    conditions = [
        {"type": t, "status": "True", "reason": f"PyTorchJob{t}", "message": f"job is {t.lower()}"}
        for t in types
    ]
    return {"conditions": conditions, "replicaStatuses": {"Worker": {"active": 2, "failed": 1}}}


TRAINER_STATUS = {
    "progressPercentage": 42,
    "estimatedRemainingSeconds": 310,
    "metrics": [{"name": "accuracy", "value": "0.97"}, {"name": "loss", "value": "0.0412"}],
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- get


def test_get_lists_every_kind_in_one_table_with_the_last_condition_as_state(
    fake: Any, job: Make, capsys: Any
) -> None:
    reported = {**_status("Created", "Running"), "trainerStatus": TRAINER_STATUS}
    fake.jobs += [job("TFJob", "a"), job("PyTorchJob", "b", status=reported)]
    code, out, _ = run(capsys, "get")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["NAME", "KIND", "STATE", "PROGRESS", "ETA", "METRIC", "AGE"]
    assert lines[1].split()[:6] == ["a", "TFJob", "<none>", "<none>", "<none>", "<none>"]
    assert lines[2].split()[:6] == ["b", "PyTorchJob", "Running", "42%", "5m10s", "loss=0.0412"]
    assert fake.calls[0] == ("list_jobs", {"kind": None, "namespace": None, "all_namespaces": False})
    assert fake.closed


def test_get_with_a_kind_lists_only_that_kind_whatever_its_spelling(fake: Any, capsys: Any) -> None:
    for spelling in ("tfjobs", "TFJob", "tfjob.kubeflow.org"):
        fake.calls.clear()
        run(capsys, "get", spelling)
        assert fake.calls[0][1]["kind"] == "TFJob"


def test_get_all_namespaces_adds_a_namespace_column_and_wide_adds_replicas(
    fake: Any, job: Make, capsys: Any
) -> None:
    fake.jobs += [job("PyTorchJob", "b", "team-a", status=_status("Running"))]
    _, out, _ = run(capsys, "get", "-A", "-o", "wide")
    header, row = out.splitlines()
    assert header.split() == [
        "NAMESPACE",
        "NAME",
        "KIND",
        "STATE",
        "PROGRESS",
        "ETA",
        "METRIC",
        "AGE",
        "REPLICAS",
        "ACTIVE",
        "SUCCEEDED",
        "FAILED",
    ]
    cells = row.split()
    assert cells[:4] == ["team-a", "b", "PyTorchJob", "Running"]
    assert cells[8:] == ["Master:1,Worker:2", "2", "0", "1"]


def test_get_one_job_as_yaml_json_and_name(fake: Any, job: Make, capsys: Any) -> None:
    fake.jobs += [job("MPIJob", "m")]
    _, out, _ = run(capsys, "get", "m", "-o", "yaml")
    assert load_jobs(out)[0].name == "m"
    _, out, _ = run(capsys, "get", "mpijob/m", "-o", "json")
    assert json.loads(out)["kind"] == "MPIJob"
    _, out, _ = run(capsys, "get", "m", "-o", "name")
    assert out.strip() == "mpijob.kubeflow.org/m"
    _, out, _ = run(capsys, "get", "-o", "yaml")
    assert yaml.safe_load(out)["kind"] == "List"


def test_get_of_an_empty_namespace_says_so_on_stderr_and_succeeds(fake: Any, capsys: Any) -> None:
    code, out, err = run(capsys, "get", "-n", "empty")
    assert (code, out) == (0, "")
    assert "No training jobs found in namespace 'empty'" in err


def test_a_missing_job_exits_1_and_a_near_kind_is_suggested(fake: Any, capsys: Any) -> None:
    code, _, err = run(capsys, "get", "nope")
    assert code == ExitCode.FAILED and "no training job" in err and "did you mean" not in err
    code, _, err = run(capsys, "get", "tfjbo")
    assert code == ExitCode.FAILED and "did you mean 'tfjob'" in err


def test_a_misspelt_kind_before_a_name_is_a_usage_error_with_a_suggestion(fake: Any, capsys: Any) -> None:
    code, _, err = run(capsys, "get", "pytorchjbo", "mnist")
    assert code == ExitCode.USAGE
    assert "'pytorchjbo' is not a training job kind" in err and "did you mean 'pytorchjob'" in err
    assert not fake.calls


def test_a_name_shared_by_two_kinds_asks_for_the_kind(fake: Any, job: Make, capsys: Any) -> None:
    fake.jobs += [job("TFJob", "same"), job("PyTorchJob", "same")]
    code, _, err = run(capsys, "describe", "same")
    assert code == ExitCode.USAGE and "say which one" in err
    code, out, _ = run(capsys, "describe", "tfjob", "same")
    assert code == 0 and "Kind:" in out and "TFJob" in out


def test_get_takes_one_name(fake: Any, capsys: Any) -> None:
    code, _, err = run(capsys, "get", "tfjob", "a", "b")
    assert code == ExitCode.USAGE and "one NAME" in err


# ---------------------------------------------------------------- submit


def test_submit_validates_every_file_before_creating_anything(fake: Any, tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: Bad_Name}\nspec: {tfReplicaSpecs: {}}\n"
    )
    code, _, err = run(
        capsys,
        "submit",
        str(EXAMPLES / "pytorch" / "pytorch-ddp.yaml"),
        str(bad),
        str(tmp_path / "gone.yaml"),
    )
    assert code == ExitCode.USAGE
    assert f"{bad}: metadata.name" in err and "gone.yaml" in err and "cannot be read" in err
    assert fake.created == [] and not fake.calls


def test_submit_creates_the_jobs_of_every_file_and_names_them(fake: Any, capsys: Any) -> None:
    files = [EXAMPLES / "pytorch" / "pytorch-ddp.yaml", EXAMPLES / "tensorflow" / "tf-ps-workers.yaml"]
    code, out, _ = run(capsys, "submit", *map(str, files), "-n", "team-a")
    assert code == 0
    assert out.splitlines() == [
        "pytorchjob.kubeflow.org/pytorch-ddp created",
        "tfjob.kubeflow.org/tf-ps-workers created",
    ]
    assert fake.calls == [("create_jobs", {"count": 2, "namespace": "team-a", "dry_run": False})]


def test_submit_client_dry_run_never_contacts_a_cluster(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    def no_cluster(args: Any) -> Any:
        raise AssertionError("a client dry run must not connect")

    monkeypatch.setattr(jobargs, "new_client", no_cluster)
    code, out, _ = run(capsys, "submit", "--dry-run=client", str(EXAMPLES / "mpi" / "mpi-mpich.yaml"))
    assert code == 0 and "mpijob.kubeflow.org/mpi-mpich valid" in out


def test_submit_names_the_other_objects_of_a_file_it_leaves_to_kubectl(fake: Any, capsys: Any) -> None:
    example = EXAMPLES / "tensorflow" / "tf-chief-evaluator.yaml"  # a PVC, then the TFJob
    code, out, err = run(capsys, "submit", str(example))
    assert code == 0 and out.strip() == "tfjob.kubeflow.org/tf-chief-evaluator created"
    assert "PersistentVolumeClaim 'tf-checkpoints' is not a job" in err
    assert f"kubectl apply -f {example}" in err


def test_submitting_an_existing_job_exits_1(fake: Any, job: Make, capsys: Any) -> None:
    fake.jobs += [job("PyTorchJob", "pytorch-ddp")]
    code, _, err = run(capsys, "submit", str(EXAMPLES / "pytorch" / "pytorch-ddp.yaml"))
    assert code == ExitCode.FAILED and "already exists" in err and fake.created == []


def test_submit_reads_standard_input(fake: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    text = (EXAMPLES / "mpi" / "mpi-mpich.yaml").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, _, _ = run(capsys, "submit", "-")
    assert code == 0 and [j.name for j in fake.created] == ["mpi-mpich"]


# ---------------------------------------------------------------- wait


def test_wait_exit_codes_tell_success_failure_and_timeout_apart(fake: Any, job: Make, capsys: Any) -> None:
    done = job("PyTorchJob", "j", status=_status("Running", "Succeeded"))
    fake.wait_outcome = done
    code, out, _ = run(capsys, "wait", "j")
    assert code == 0 and out.strip() == "pytorchjob.kubeflow.org/j condition met: Succeeded"
    fake.wait_outcome = JobFailedError("PyTorchJob", "j", "default", "PyTorchJobFailed", "worker 1 exited 1")
    code, _, err = run(capsys, "wait", "j")
    assert code == ExitCode.FAILED and "worker 1 exited 1" in err
    fake.wait_outcome = WaitTimeoutError("PyTorchJob", "j", ["Succeeded"], 5, "Running")
    code, _, err = run(capsys, "wait", "j", "--timeout", "5s")
    assert code == ExitCode.TIMEOUT and "within 5s" in err


def test_wait_passes_conditions_timeout_and_poll(fake: Any, job: Make, capsys: Any) -> None:
    fake.wait_outcome = job("TFJob", "j", status=_status("Running"))
    run(
        capsys,
        "wait",
        "tfjob/j",
        "--for",
        "condition=Running,Failed",
        "--for=Restarting",
        "--timeout",
        "1h30m",
        "--poll",
        "2",
    )
    _, call = fake.calls[-1]
    assert call == {
        "name": "j",
        "kind": "TFJob",
        "expected": ["Running", "Failed", "Restarting"],
        "timeout": 5400.0,
        "poll": 2.0,
    }


def test_wait_shows_one_plain_line_per_change_when_not_on_a_terminal(
    fake: Any, job: Make, capsys: Any
) -> None:
    first, second = job("PyTorchJob", "j"), job("PyTorchJob", "j", status=_status("Running"))
    fake.wait_versions = [first, first, second]
    fake.wait_outcome = second
    code, out, err = run(capsys, "wait", "j", "--for", "Running")
    lines = err.splitlines()
    assert code == 0 and len(lines) == 2
    assert lines[0].endswith("] PyTorchJob j: waiting for the operator")
    assert lines[1].endswith("] PyTorchJob j: Running (PyTorchJobRunning); Worker 2 active, 1 failed")
    assert out.strip() == "pytorchjob.kubeflow.org/j condition met: Running"


def test_a_bad_duration_is_a_usage_error(fake: Any, capsys: Any) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["wait", "j", "--timeout", "ten minutes"])
    assert exit_info.value.code == ExitCode.USAGE
    assert "not a duration" in capsys.readouterr().err


# ---------------------------------------------------------------- logs


def test_logs_prefix_every_line_with_its_replica(fake: Any, job: Make, capsys: Any) -> None:
    fake.jobs += [job("PyTorchJob", "j")]
    fake.logs = {"j-master-0": "step 1\nstep 2\n", "j-worker-0": "ready\n"}
    code, out, _ = run(capsys, "logs", "j")
    assert code == 0
    assert out.splitlines() == ["[master-0] step 1", "[master-0] step 2", "[worker-0] ready"]


def test_logs_of_one_chosen_replica_are_not_prefixed(fake: Any, job: Make, capsys: Any) -> None:
    fake.jobs += [job("PyTorchJob", "j")]
    fake.logs = {"j-worker-1": "hello\n"}
    code, out, _ = run(capsys, "logs", "j", "--replica-type", "worker", "--index", "1")
    assert (code, out) == (0, "hello\n")
    assert fake.calls[-1][1]["replica_type"] == "worker" and fake.calls[-1][1]["replica_index"] == 1


def test_followed_logs_merge_replicas_and_report_a_broken_stream(fake: Any, job: Make, capsys: Any) -> None:
    fake.jobs += [job("PyTorchJob", "j")]
    fake.logs = [
        LogLine("j-master-0", "master-0", "epoch 1"),
        LogLine("j-worker-0", "worker-0", "(cannot read the logs: node gone)", error=True),
        LogLine("j-master-0", "master-0", "epoch 2"),
    ]
    code, out, err = run(capsys, "logs", "-f", "j")
    assert code == ExitCode.FAILED
    assert out.splitlines() == ["[master-0] epoch 1", "[master-0] epoch 2"]
    assert "[worker-0] (cannot read the logs: node gone)" in err
    assert fake.calls[-1][1]["follow"] is True


# ---------------------------------------------------------------- delete


def test_delete_deletes_each_name_and_exits_1_if_one_was_missing(fake: Any, job: Make, capsys: Any) -> None:
    fake.jobs += [job("TFJob", "a"), job("TFJob", "c")]
    code, out, err = run(capsys, "delete", "tfjob", "a", "b", "c", "--cascade", "foreground")
    assert code == ExitCode.FAILED
    assert out.splitlines() == ['tfjob.kubeflow.org "a" deleted', 'tfjob.kubeflow.org "c" deleted']
    assert "no TFJob named 'b'" in err
    assert fake.calls[-1][1]["propagation_policy"] == "Foreground"


def test_delete_by_file_deletes_the_jobs_it_describes(fake: Any, job: Make, capsys: Any) -> None:
    fake.jobs += [job("MPIJob", "mpi-mpich")]
    code, _, _ = run(capsys, "delete", "-f", str(EXAMPLES / "mpi" / "mpi-mpich.yaml"))
    assert code == 0 and fake.deleted == [("MPIJob", "mpi-mpich")]


def test_delete_needs_names_or_a_file(fake: Any, capsys: Any) -> None:
    code, _, err = run(capsys, "delete")
    assert code == ExitCode.USAGE and "name the jobs" in err


# ---------------------------------------------------------------- cluster trouble and the top level


@pytest.mark.parametrize(
    "error", [ConfigError("no kubeconfig found"), ClusterAccessError("cannot reach", status=None)]
)
def test_cluster_trouble_exits_4_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: Any, error: Exception
) -> None:
    def broken(args: Any) -> Any:
        raise error

    monkeypatch.setattr(jobargs, "new_client", broken)
    code, _, err = run(capsys, "get")
    assert code == ExitCode.CLUSTER
    assert err.strip() == f"kubetrain get: {error}"


def test_a_misspelt_command_gets_a_suggestion(capsys: Any) -> None:
    code, _, err = run(capsys, "sumbit", "x.yaml")
    assert code == ExitCode.USAGE and "did you mean 'submit'" in err


def test_help_documents_every_exit_code() -> None:
    text = build_parser().format_help()
    for code in ExitCode:
        assert f"\n  {code.value} " in text, (
            f"exit code {code.value} ({code.name}) is not in `kubetrain --help`"
        )


def test_get_watch_follows_progress_until_every_job_has_finished(
    fake: Any, job: Make, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read shows the new report (a plain line per change off a terminal); the last table follows."""
    versions = iter(
        [
            {**_status("Created", "Running"), "trainerStatus": {**TRAINER_STATUS, "progressPercentage": 10}},
            {**_status("Created", "Running"), "trainerStatus": TRAINER_STATUS},
            {**_status("Created", "Succeeded"), "trainerStatus": {"progressPercentage": 100}},
        ]
    )
    fake.jobs += [job("PyTorchJob", "b", status=next(versions))]

    def next_version(_seconds: float) -> None:
        fake.jobs[:] = [job("PyTorchJob", "b", status=next(versions))]

    monkeypatch.setattr("kubetrain.cli.get.time.sleep", next_version)
    code, out, err = run(capsys, "get", "-w")
    assert code == 0
    shown = [line.split("] ", 1)[1] for line in err.splitlines()]
    assert [line.rsplit("; ", 1)[1] for line in shown] == [
        "10%, ETA 5m10s, loss=0.0412",
        "42%, ETA 5m10s, loss=0.0412",
        "100%",
    ]
    assert "Succeeded" in shown[-1]
    assert out.splitlines()[1].split()[:4] == ["b", "PyTorchJob", "Succeeded", "100%"]


def test_get_watch_refuses_an_output_format(capsys: Any) -> None:
    code, _, err = run(capsys, "get", "-w", "-o", "yaml")
    assert code == 2 and "-w" in err and "-o" in err
