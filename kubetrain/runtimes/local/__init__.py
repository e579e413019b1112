"""Run any training job (TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob, MPIJob) on this machine, for real,
with the operator's own controller code.

`kubetrain run --local JOB.yaml` (kubetrain.cli.run) drives `LocalRun` (runner): the kind's real
JobController over an in-memory API server, plus a local kubelet that runs each pod's main container as a
process group with the environment the operator rendered, rewritten for 127.0.0.1 (network), with
volumes as local directories (volumes) and MPI's ssh replaced by a local agent (node, agent, standin).

Modules: runner, kubelet, podworker, plan, podenv, volumes, network, ports, node, agent, standin,
process, podstatus, view, console, sweep. `agent` and `standin` are stdlib-only scripts run by path.
This package imports nothing at import time, so the agent and the stand-in start fast.
"""
