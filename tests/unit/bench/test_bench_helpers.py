"""The pure pieces of bench/operator_scale.py: the table a reader sees, request counting from an audit log,
/proc parsing, the workload it submits, the milestones it derives from watch events, and its command-line
checks. No control plane and no timing here: a benchmark prints figures, it never asserts them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from opbench import cli
from opbench.audit import audit_policy, count_requests, read_requests
from opbench.histogram import ReconcileTimes, parse_reconcile_times
from opbench.identity import token_kubeconfig
from opbench.procstat import parse_stat, parse_status_kib, parse_steal_ticks, sample_tree, steal_seconds
from opbench.progress import Progress
from opbench.report import Mode, Row, floor_ratio, render_json, render_markdown
from opbench.subject import Readiness, expand
from opbench.workload import Workload, kind_by_name
from prometheus_client import CollectorRegistry, generate_latest

from kubetrain.api import KINDS, PYTORCHJOB
from kubetrain.api.load import load_valid_jobs
from kubetrain.common.metrics import Metrics
from kubetrain.testing.kwok import ANNOTATION_OUTCOME, ANNOTATION_RUN_FOR


def row(mode: Mode, jobs: int, t_pods: float | None, **fields: Any) -> Row:
    fields = {"outcome": "ok", **fields}
    return Row(mode=mode, kind="PyTorchJob", jobs=jobs, replicas=4, pods=jobs * 4, load_before=1.5,
               t_pods=t_pods, **fields)  # fmt: skip


# ------------------------------------------------------------------ report
def table_rows(markdown: str) -> list[list[str]]:
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_table_gives_each_operator_run_its_ratio_to_the_floor_of_the_same_n() -> None:
    rows = [
        row(Mode.FLOOR, 10, 0.5, requests=40),
        row(Mode.OPERATOR, 10, 3.0, requests=250, cpu_seconds=1.25, peak_rss_mib=101.6, steal_seconds=0.031),
        row(Mode.FLOOR, 100, 4.0),
        row(Mode.OPERATOR, 100, 10.0),
    ]
    header, _, *body = table_rows(render_markdown(rows, title="t"))
    cells = [dict(zip(header, line, strict=True)) for line in body]
    assert [c["all pods / floor"] for c in cells] == ["1.00x", "6.00x", "1.00x", "2.50x"]
    assert cells[1]["req/job"] == "25.0"
    assert cells[1]["CPU s"] == "1.2"  # rounded for the table; the JSON keeps every digit
    assert cells[1]["peak RSS MiB"] == "102"
    assert cells[1]["steal s"] == "0.03"


def test_missing_figures_show_as_na_never_as_zero() -> None:
    rows = [row(Mode.OPERATOR, 10, None, outcome="timeout")]
    header, _, body = table_rows(render_markdown(rows, title="t"))
    cells = dict(zip(header, body, strict=True))
    assert cells["all pods s"] == "n/a"
    assert cells["API requests"] == "n/a"
    assert cells["all pods / floor"] == "n/a"
    assert cells["steal s"] == "n/a"  # a kernel that does not count it
    assert cells["outcome"] == "timeout"


def test_ratio_needs_a_floor_of_the_same_shape_that_got_all_its_pods() -> None:
    operator = row(Mode.OPERATOR, 10, 3.0)
    assert floor_ratio(operator, [operator, row(Mode.FLOOR, 100, 1.0)]) is None
    assert floor_ratio(operator, [operator, row(Mode.FLOOR, 10, None)]) is None
    assert floor_ratio(operator, [operator, row(Mode.FLOOR, 10, 2.0)]) == 1.5


def test_markdown_lists_notes_and_the_most_frequent_calls() -> None:
    calls = {"create pods": 40, "create events": 80, "get pods": 1}
    refused = {"patch pytorchjobs/status 409": 3}
    text = render_markdown(
        [row(Mode.OPERATOR, 10, 1.0, requests=121, requests_by_call=calls, refused_by_call=refused)],
        title="t",
        notes=["load 3.0"],
    )
    assert "- load 3.0" in text
    assert (
        "- operator N=10: create events 80, create pods 40, get pods 1; "
        "refused 3 (patch pytorchjobs/status 409 3)" in text
    )


def test_json_keeps_full_precision_and_the_derived_figures() -> None:
    rows = [row(Mode.FLOOR, 10, 0.5), row(Mode.OPERATOR, 10, 1.234567, requests=30)]
    data = json.loads(render_json(rows, meta={"cpus": 2}))
    assert data["meta"] == {"cpus": 2}
    assert data["rows"][1]["t_pods"] == 1.234567
    assert data["rows"][1]["requests_per_job"] == 3.0
    assert data["rows"][1]["pods_vs_floor"] == pytest.approx(2.469134)


# ------------------------------------------------------------------ audit
def event(user: str, audit_id: str, verb: str, resource: str = "pods", code: int = 0, **ref: str) -> str:
    body: dict[str, Any] = {"auditID": audit_id, "verb": verb, "user": {"username": user}, "stage": "x"}
    if code:
        body["responseStatus"] = {"code": code}
    if resource:
        body["objectRef"] = {"resource": resource, **ref}
    else:
        body["requestURI"] = "/version?timeout=32s"
    return json.dumps(body)


OP = "system:serviceaccount:kubetrain-bench:op-1"


def test_requests_are_counted_once_per_audit_id_for_that_user_only() -> None:
    lines = [
        event(OP, "a", "watch"),
        event(OP, "a", "watch"),  # ResponseStarted, then ResponseComplete of the same watch
        event(OP, "b", "create"),
        event(OP, "c", "patch", "pytorchjobs", subresource="status"),
        event(OP, "d", "get", ""),
        event("kubetrain-admin", "e", "create"),
        '{"auditID": "f", "verb": "create", "user": {"usern',  # the line being written
    ]
    counted = count_requests(lines, OP)
    assert counted.total == 4
    assert counted.by_call == {
        "create pods": 1,
        "get /version": 1,
        "patch pytorchjobs/status": 1,
        "watch pods": 1,
    }
    assert counted.refused == {}


def test_requests_the_server_refused_are_counted_by_call_and_code() -> None:
    lines = [
        event(OP, "a", "patch", "pytorchjobs", code=409, subresource="status"),
        event(OP, "b", "patch", "pytorchjobs", code=200, subresource="status"),
        event(OP, "c", "create", code=409),
        event(OP, "c", "create", code=409),  # two stages of one request
        event(OP, "d", "watch", code=200),
    ]
    counted = count_requests(lines, OP)
    assert counted.total == 4
    assert counted.refused == {"create pods 409": 1, "patch pytorchjobs/status 409": 1}


def test_rotated_audit_logs_are_read_too(tmp_path: Path) -> None:
    (tmp_path / "audit.log").write_text(event(OP, "a", "create") + "\n")
    (tmp_path / "audit-2026-01-01T00-00-00.000.log").write_text(event(OP, "b", "create") + "\n")
    assert read_requests(tmp_path / "audit.log", OP).total == 2


def test_audit_policy_logs_the_bench_group_and_nothing_else() -> None:
    policy = yaml.safe_load(audit_policy("system:serviceaccounts:kubetrain-bench"))
    assert policy["kind"] == "Policy"
    assert policy["omitStages"] == ["RequestReceived"]
    assert policy["rules"] == [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts:kubetrain-bench"]},
        {"level": "None"},
    ]


# ------------------------------------------------------------------ /proc
STAT = "4242 (my (odd) proc) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 30 7 3 20 0 1 0 99 1000 50"


def test_stat_is_parsed_after_the_last_parenthesis_of_comm() -> None:
    stat = parse_stat(STAT)
    assert (stat.pid, stat.comm, stat.state, stat.ppid) == (4242, "my (odd) proc", "S", 1)
    assert (stat.utime, stat.stime, stat.cutime, stat.cstime) == (150, 30, 7, 3)
    assert stat.cpu_ticks == 190


def test_status_values_in_kib_and_none_when_absent() -> None:
    status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"
    assert parse_status_kib(status, "VmRSS") == 1024
    assert parse_status_kib(status, "VmHWM") == 2048
    assert parse_status_kib("Name:\tzombie\n", "VmRSS") is None


def fake_process(proc: Path, pid: int, ticks: int, rss: int, hwm: int, children: list[int]) -> None:
    task = proc / str(pid) / "task" / str(pid)
    task.mkdir(parents=True)
    (task / "children").write_text(" ".join(map(str, children)))
    (proc / str(pid) / "stat").write_text(f"{pid} (p) S 1 0 0 0 0 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 0 0 0")
    (proc / str(pid) / "status").write_text(f"VmHWM:\t{hwm} kB\nVmRSS:\t{rss} kB\n")


def test_a_tree_sums_cpu_and_rss_of_every_descendant_and_skips_vanished_ones(tmp_path: Path) -> None:
    fake_process(tmp_path, 10, ticks=os.sysconf("SC_CLK_TCK"), rss=1000, hwm=5000, children=[11, 99])
    fake_process(tmp_path, 11, ticks=os.sysconf("SC_CLK_TCK"), rss=500, hwm=600, children=[12])
    fake_process(tmp_path, 12, ticks=0, rss=100, hwm=100, children=[])  # 99 exited meanwhile
    sample = sample_tree(10, tmp_path)
    assert (sample.processes, sample.cpu_seconds, sample.rss_kib, sample.hwm_kib) == (3, 2.0, 1600, 5000)


def test_steal_is_the_eighth_number_of_the_summary_cpu_line(tmp_path: Path) -> None:
    stat = "cpu  443915 17117 110408 474333 1355 0 5598 1347 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2\n"
    assert parse_steal_ticks(stat) == 1347
    assert parse_steal_ticks("cpu  1 2 3 4\n") is None  # an old kernel's shorter line
    (tmp_path / "stat").write_text(stat)
    assert steal_seconds(tmp_path) == 1347 / os.sysconf("SC_CLK_TCK")
    assert steal_seconds(tmp_path / "nowhere") is None


def test_the_machines_steal_is_read_from_the_real_proc() -> None:
    first = steal_seconds()
    assert first is not None and first >= 0
    second = steal_seconds()
    assert second is not None and second >= first


def test_the_running_test_process_is_found_in_the_real_proc() -> None:
    sample = sample_tree(os.getpid())
    assert sample.processes >= 1
    assert sample.rss_kib > 0


# ------------------------------------------------------------------ workload
@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_submitted_jobs_are_valid_and_their_pods_run_for_a_while_then_succeed(info: Any) -> None:
    workload = Workload(info, jobs=3, replicas=4, run_for="3s")
    job = workload.job("bench-0")
    (parsed,) = load_valid_jobs(json.dumps(job))
    specs = job["spec"][info.replica_specs_field]
    assert sum(spec["replicas"] for spec in specs.values()) == 4
    for spec in specs.values():
        assert spec["restartPolicy"] == "Never"
        annotations = spec["template"]["metadata"]["annotations"]
        assert (annotations[ANNOTATION_OUTCOME], annotations[ANNOTATION_RUN_FOR]) == ("Succeeded", "3s")
    assert parsed.metadata.name == "bench-0"


def test_the_floor_creates_as_many_distinct_pods_as_the_operator_would() -> None:
    workload = Workload(PYTORCHJOB, jobs=3, replicas=4)
    names = [pod["metadata"]["name"] for job in workload.job_names() for pod in workload.floor_pods(job)]
    assert len(set(names)) == len(names) == workload.pods == 12
    assert "bench-2-master-0" in names


def test_a_shape_the_kind_cannot_take_is_refused() -> None:
    with pytest.raises(ValueError, match="replicas=1"):
        Workload(PYTORCHJOB, jobs=1, replicas=1)
    with pytest.raises(ValueError, match="choose one of TFJob, PyTorchJob, MPIJob"):
        kind_by_name("mxjob")
    assert kind_by_name("pytorchjobs") is PYTORCHJOB


# ------------------------------------------------------------------ milestones
def pod(name: str, phase: str = "Pending") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase}}


def succeeded(name: str, ctype: str = "Succeeded") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": ctype, "status": "True"}]}}


def test_milestones_are_when_the_last_pod_appears_starts_and_the_last_job_ends() -> None:
    progress = Progress(pods=2, jobs=2, origin=100.0)
    progress.observe_pod(pod("a"), 101.0)
    progress.observe_pod(pod("b"), 102.0)
    progress.observe_pod(pod("a", "Running"), 103.0)
    progress.observe_pod(pod("b", "Succeeded"), 104.0)  # its Running state was never seen: still started
    progress.observe_job(succeeded("j1"), 105.0)
    assert not progress.done.is_set()
    progress.observe_job(succeeded("j2", "Failed"), 106.0)
    times = [progress.since_origin(t) for t in (progress.t_pods, progress.t_running, progress.t_done)]
    assert times == [2.0, 4.0, 6.0]
    assert progress.done.is_set()
    assert progress.failures() == 1


def test_without_jobs_the_run_ends_when_every_pod_has_ended() -> None:
    progress = Progress(pods=2, jobs=0, origin=0.0)
    progress.observe_pod(pod("a", "Succeeded"), 1.0)
    assert progress.t_done is None
    progress.observe_pod(pod("b", "Succeeded"), 2.0)
    assert progress.t_done == 2.0
    assert progress.failures() == 0
    assert progress.summary() == "2/2 pods exist, 2 started, 2 pods finished"


# ------------------------------------------------------------------ command templates, options
def test_placeholders_are_filled_word_by_word() -> None:
    argv = expand("{python} -m op --kubeconfig {kubeconfig} --bind 127.0.0.1:{port}",
                  {"python": "/usr/bin/python3", "kubeconfig": "/tmp/a b/k", "port": "8081"})  # fmt: skip
    assert argv == ["/usr/bin/python3", "-m", "op", "--kubeconfig", "/tmp/a b/k", "--bind", "127.0.0.1:8081"]


def test_an_unknown_placeholder_is_named_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"bad placeholder 'kubecfg'.*\{kubeconfig\}"):
        expand("op --kubeconfig {kubecfg}", {"kubeconfig": "k"})


@pytest.mark.parametrize("text", ["http://x", "url:", "after:soon", "log:(", "wait:3"])
def test_bad_readiness_is_refused_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError):
        Readiness.parse(text)


def test_readiness_url_is_a_template_too() -> None:
    ready = Readiness.parse("url:http://127.0.0.1:{port}/readyz").expanded({"port": "9"})
    assert ready == Readiness("url", "http://127.0.0.1:9/readyz")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kind", "xgboost"], "unknown kind 'xgboost'"),
        (["--modes", "fast"], "--modes 'fast'"),
        (["--replicas", "1"], "replicas=1"),
        (["--operator-cmd", "op {kubecfg}"], "bad placeholder 'kubecfg'"),
        (["--audit-log", "/tmp/audit.log"], "--audit-log goes with --kubeconfig"),
        (["--operator-ready", "soon"], "readiness 'soon'"),
    ],
)
def test_bad_options_exit_2_with_one_line_naming_them(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_kubeconfig_for_the_identity_keeps_the_cluster_and_uses_the_token(tmp_path: Path) -> None:
    cluster = {"server": "https://127.0.0.1:6443", "certificate-authority": "ca.crt"}
    admin = {
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "admin", "user": {"client-certificate": "a.crt"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "admin"}}],
        "current-context": "ctx",
    }  # fmt: skip
    config = token_kubeconfig(admin, tmp_path, user="op", token="s3cret")
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority": str(tmp_path / "ca.crt"),
    }
    assert config["users"] == [{"name": "op", "user": {"token": "s3cret"}}]
    with pytest.raises(ValueError, match="current-context"):
        token_kubeconfig({**admin, "current-context": ""}, tmp_path, user="op", token="t")


def test_reconcile_quantiles_come_from_the_operators_own_histogram_summed_over_controllers() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    for name in ("pytorchjob-controller", "tfjob-controller"):
        metrics.controller(name)
    times = [0.004] * 60 + [0.02] * 38 + [0.3, 2.0]  # 100 reconciles
    for i, seconds in enumerate(times):
        metrics.reconcile_time.labels(("pytorchjob-controller", "tfjob-controller")[i % 2]).observe(seconds)
    got = parse_reconcile_times(generate_latest(registry).decode())
    assert got == ReconcileTimes(count=100, p50=0.005, p99=0.3)
    assert parse_reconcile_times("") == ReconcileTimes(count=0, p50=None, p99=None)
    text = render_markdown([row(Mode.OPERATOR, 10, 1.0, reconciles=got)], title="t")
    assert "- operator N=10: 100 reconciles, p50 <= 0.005 s, p99 <= 0.300 s\n" in text


def test_the_rate_limiter_waits_are_read_beside_the_reconcile_times() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.controller("pytorchjob-controller")
    metrics.reconcile_time.labels("pytorchjob-controller").observe(0.7)
    waits = [0.0] * 95 + [0.5] * 5  # 100 requests, 5 of them throttled
    for seconds in waits:
        metrics.rest_throttled.labels("POST", "h:6443").observe(seconds)
    got = parse_reconcile_times(generate_latest(registry).decode())
    assert (got.count, got.p99, got.throttle_p99) == (1, 0.7, 0.5)
    text = render_markdown([row(Mode.OPERATOR, 10, 1.0, reconciles=got)], title="t")
    assert "p99 <= 0.700 s; its requests' waits for its own client rate limiter: p99 <= 0.500 s" in text
