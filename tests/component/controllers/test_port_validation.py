"""A kind's port out of 1..65535 fails the job with `<Kind>FailedValidation` before anything is created.

Not a job stuck with no pod and no condition while every reconcile fails to render the port into the env
(COORDINATOR_PORT, MASTER_PORT, PADDLE_MASTER). One test for every kind whose controller renders its port
from the container; the rule itself is `kubetrain.api.validate`'s, unit-tested per kind in
tests/unit/api/test_validation.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from framework_cluster import FrameworkCluster

from kubetrain.api import JAXJOB, PADDLEJOB, XGBOOSTJOB, KindInfo
from kubetrain.common.job import JobController
from kubetrain.common.kube.resources import PODS, SERVICES
from kubetrain.controllers.jax import JAXJobController
from kubetrain.controllers.paddle import PaddleJobController
from kubetrain.controllers.xgboost import XGBoostJobController
from kubetrain.testing.operator import container_spec, job_manifest, replica_spec

KINDS = [
    (JAXJobController, JAXJOB, {"Worker": 2}),
    (PaddleJobController, PADDLEJOB, {"Worker": 2}),
    (XGBoostJobController, XGBOOSTJOB, {"Master": 1, "Worker": 2}),
]


@pytest.mark.parametrize(("controller", "kind", "replicas"), KINDS, ids=[k.kind for _, k, _ in KINDS])
async def test_a_port_out_of_range_fails_validation_with_the_fix_and_creates_nothing(
    controller: type[JobController[Any]], kind: KindInfo, replicas: dict[str, int]
) -> None:
    assert kind.default_container_name and kind.default_port_name
    container = container_spec(kind.default_container_name, port=(kind.default_port_name, 70000))
    specs = {rtype: replica_spec(count, container) for rtype, count in replicas.items()}
    async with FrameworkCluster(controller) as c:
        await c.submit(job_manifest(kind, specs))
        failed = await c.condition("Failed")
        assert failed is not None and failed["reason"] == f"{kind.kind}FailedValidation"
        first = next(iter(replicas))
        path = f"spec.{kind.replica_specs_field}.{first}.template.spec.containers[0].ports[0].containerPort"
        assert failed["message"].startswith(f"{path}: is 70000")
        assert "1..65535" in failed["message"]
        assert await c.names(PODS) == [] and await c.names(SERVICES) == []
