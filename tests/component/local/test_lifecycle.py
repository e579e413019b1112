"""How a local run ends: Ctrl-C and timeouts stop every process (even ones that left their process group),
the operator's cleanPodPolicy is applied, and two runs of the same job at once never collide."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest

from kubetrain.runtimes.local.runner import Outcome

from .conftest import Ran, Runner, alive, assert_nothing_left, python, pytorch_job, replica

# A trainer with a child in its process group and a grandchild that escaped into its own session; it
# ignores SIGTERM, as TensorFlow waiting for peers does. It prints every pid it owns.
STUBBORN = python(
    "import os, signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen(['sleep', '300'])\n"
    "escaped = subprocess.Popen(['sleep', '301'], start_new_session=True)\n"
    "print(f'child pid={child.pid} escaped pid={escaped.pid}', flush=True)\n"
    "time.sleep(300)"
)


async def until_running(out: io.StringIO, pods: int) -> None:
    for _ in range(300):
        await asyncio.sleep(0.1)
        if out.getvalue().count("escaped pid=") >= pods:
            return
    raise AssertionError(f"the trainers never started:\n{out.getvalue()}")


async def test_interrupt_stops_every_process_even_escaped_ones(runner: Runner) -> None:
    job = pytorch_job("ctrlc", {"Master": replica(STUBBORN), "Worker": replica(STUBBORN, replicas=2)})
    local, out = runner.local(job)
    task = asyncio.ensure_future(local.run())
    await until_running(out, 3)
    local.interrupt()
    result = await asyncio.wait_for(task, 30)
    assert result.outcome is Outcome.INTERRUPTED
    assert (
        out.getvalue()
        .rstrip()
        .endswith("PyTorchJob ns/ctrlc: interrupted: every process was stopped; it was Running")
    )
    escaped = [int(p) for p in re.findall(r"escaped pid=(\d+)", out.getvalue())]
    assert sorted(result.leftovers) == sorted(escaped), "the sweep found exactly the escaped processes"
    assert [p for p in escaped if alive(p)] == []
    assert_nothing_left(Ran(result, out.getvalue(), local.run_id))


async def test_a_second_interrupt_kills_at_once(runner: Runner) -> None:
    job = pytorch_job("twice", {"Master": replica(STUBBORN, pod={"terminationGracePeriodSeconds": 60})})
    local, out = runner.local(job)
    task = asyncio.ensure_future(local.run())
    await until_running(out, 1)
    local.interrupt()
    await asyncio.sleep(0.5)
    local.interrupt()
    result = await asyncio.wait_for(task, 20)  # far below the 60 s grace period
    assert result.outcome is Outcome.INTERRUPTED
    assert result.seconds < 20


async def test_the_timeout_stops_the_run(runner: Runner) -> None:
    job = pytorch_job("slow", {"Master": replica(python("import time; time.sleep(300)"))})
    ran = await runner.run(job, timeout=3)
    assert ran.result.outcome is Outcome.TIMED_OUT
    assert ran.output.rstrip().endswith(
        "PyTorchJob ns/slow: timed out: every process was stopped; it was Running"
    )


@pytest.mark.parametrize(
    ("policy", "worker_state"), [("All", "Deleted"), ("Running", "Deleted"), ("None", "Stopped")]
)
async def test_clean_pod_policy_is_the_operators(runner: Runner, policy: str, worker_state: str) -> None:
    job = pytorch_job(
        "clean",
        {"Master": replica(python("print('ok')")), "Worker": replica(python("import time; time.sleep(300)"))},
        {"cleanPodPolicy": policy},
    )
    ran = await runner.run(job)
    assert ran.result.outcome is Outcome.SUCCEEDED
    assert ran.row("clean-worker-0").state == worker_state
    assert ran.row("clean-master-0").state == ("Deleted" if policy == "All" else "Succeeded")
    # one Event for the pods one reconcile deleted, naming them
    deleted = "2 pods: clean-master-0, clean-worker-0" if policy == "All" else "pod: clean-worker-0"
    deleted_by_operator = f"[event] pytorchjob/clean: Normal SuccessfulDeletePod: Deleted {deleted}\n"
    assert (deleted_by_operator in ran.output) is (policy != "None")


async def test_pods_the_operator_keeps_may_finish_on_their_own(runner: Runner) -> None:
    late = python("import time; time.sleep(1.5); print('late result')")
    job = pytorch_job("linger", {"Master": replica(python("print('first')")), "Worker": replica(late)})
    ran = await runner.run(job, linger=30)
    assert ran.result.outcome is Outcome.SUCCEEDED
    assert ran.lines("linger-worker-0") == ["late result"]
    assert ran.row("linger-worker-0").state == "Succeeded"
    assert ran.result.seconds < 25


# The master serves its job's token on MASTER_PORT; the worker connects to MASTER_ADDR:MASTER_PORT and
# checks it got its own job's token. Both jobs have the same name and the same ports in their YAML.
SERVE = python(
    "import os, socket, sys\n"
    "s = socket.create_server(('', int(os.environ['MASTER_PORT'])))\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    conn, _ = s.accept(); conn.sendall(sys.argv[1].encode()); conn.close()\n"
    "print('served', sys.argv[1], 'on', os.environ['MASTER_PORT'])"
)
ASK = python(
    "import os, socket, sys, time\n"
    "for _ in range(100):\n"
    "    try: c = socket.create_connection((os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT'])))\n"
    "    except OSError: time.sleep(0.1); continue\n"
    "    break\n"
    "got = c.recv(100).decode(); print('got', got); sys.exit(0 if got == sys.argv[1] else 1)"
)


async def test_two_runs_of_the_same_job_at_once_never_cross(tmp_path: Path) -> None:
    runs = []
    for token in ("alpha", "beta"):
        job = pytorch_job(
            "twin",
            {
                "Master": replica(SERVE, args=[token, "2"]),
                "Worker": replica(ASK, args=[token], replicas=2, restart="Never"),
            },
        )
        job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["ports"] = [
            {"name": "pytorchjob-port", "containerPort": 23456}
        ]
        (tmp_path / token).mkdir()
        runs.append(Runner(tmp_path / token).local(job))
    results = await asyncio.gather(*(local.run() for local, _ in runs))
    for (_, out), result, token in zip(runs, results, ("alpha", "beta"), strict=True):
        assert result.outcome is Outcome.SUCCEEDED, out.getvalue()
        assert out.getvalue().count(f"got {token}") == 2
    ports = [re.findall(r"served \w+ on (\d+)", out.getvalue())[0] for _, out in runs]
    assert ports[0] != ports[1]
