"""A TFJob locally: each replica's TF_CONFIG points at 127.0.0.1 with a port per replica, the same cluster
for everyone, and the success policy (worker 0, or AllWorkers) is the operator's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetrain.controllers.tensorflow import TFJobController
from kubetrain.podcontract import TFConfig
from kubetrain.runtimes.local.runner import Outcome

from .conftest import Runner, python

SHOW_TF_CONFIG = python("import os; print(os.environ['TF_CONFIG'])")


def tf_job(name: str, worker_commands: list[list[str]], success_policy: str | None = None) -> dict[str, Any]:
    """Workers whose index i runs worker_commands[i] (one spec per command is not possible: one template)."""
    code = (
        "import os, json, subprocess, sys\n"
        "index = json.loads(os.environ['TF_CONFIG'])['task']['index']\n"
        "commands = json.loads(sys.argv[1])\n"
        "sys.exit(subprocess.call(commands[index]))"
    )
    container = {
        "name": "tensorflow",
        "image": "unused",
        "command": python(code),
        "args": [json.dumps(worker_commands)],
    }
    spec: dict[str, Any] = {
        "tfReplicaSpecs": {
            "Worker": {
                "replicas": len(worker_commands),
                "restartPolicy": "Never",
                "template": {"spec": {"containers": [container]}},
            }
        }
    }
    if success_policy is not None:
        spec["successPolicy"] = success_policy
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
    }


async def test_every_worker_sees_one_cluster_of_distinct_local_addresses(runner: Runner) -> None:
    ran = await runner.run(tf_job("tf", [SHOW_TF_CONFIG] * 3), controller=TFJobController)
    assert ran.result.outcome is Outcome.SUCCEEDED
    configs = [TFConfig.parse(ran.lines(f"tf-worker-{i}")[0]) for i in range(3)]
    assert [c.task.index for c in configs] == [0, 1, 2]
    clusters = {json.dumps(dict(c.cluster)) for c in configs}
    assert len(clusters) == 1
    addresses = configs[0].cluster["worker"]
    assert len(set(addresses)) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert [c.address for c in configs] == list(addresses)


@pytest.mark.parametrize(("policy", "second"), [(None, "Stopped"), ("AllWorkers", "Succeeded")])
async def test_the_success_policy_decides_when_the_job_is_done(
    runner: Runner, policy: str | None, second: str
) -> None:
    quick, slow = python("print('done')"), python("import time; time.sleep(3); print('done late')")
    ran = await runner.run(tf_job("sp", [quick, slow], policy), controller=TFJobController)
    assert ran.result.outcome is Outcome.SUCCEEDED
    assert ran.reason == "TFJobSucceeded"
    assert ran.row("sp-worker-0").state == "Succeeded"
    assert ran.row("sp-worker-1").state == second
