"""`kubetrain new-operator`'s project template: an operator of one's own kind, written on kubetrain.common.

What it writes (for `SleepJob --group example.dev --replica-types Sleeper`):

    sleepjob/kind.py          the model, the KindInfo and the controller, its hooks stubbed and documented
    sleepjob/__main__.py      `python -m sleepjob` runs the operator; `python -m sleepjob crds` prints its CRD
    tests/test_operator.py    runs the operator on kubetrain's test control plane; a sample job succeeds
    examples/sleepjob.yaml    that sample job
    config/                   kustomize: the CRD, RBAC, the Deployment, its namespace
    Containerfile, pyproject.toml (mypy --strict, pytest), README.md

The project passes its own test and `mypy --strict` as generated; `tests/unit/cli/test_new_operator.py`
checks both on a fresh copy.
"""

from kubetrain.cli.scaffold.render import ProjectNames, render_project, write_project

__all__ = ["ProjectNames", "render_project", "write_project"]
