"""`kubetrain run --local` of a job declaring two billion replicas: one clear failure, in bounded memory.

Nothing in the local runner may be sized by the replica count a user wrote (issue 12, B2): the job fails,
naming the field, and the run never lists its replicas.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from kubetrain.cli import main

JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: huge
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: any, command: ["true"]}]
    Worker:
      replicas: 2147483647
      template:
        spec:
          containers: [{name: pytorch, image: any, command: ["true"]}]
"""


def test_two_billion_replicas_fail_cleanly_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(JOB)
    tracemalloc.start()
    code = main(["run", "--local", str(path)])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out = capsys.readouterr()
    assert code != 0
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in out.out + out.err
    assert "Traceback" not in out.out + out.err
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.1f} MiB"
