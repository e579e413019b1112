"""MPIJobController's pure hooks, table by table: hostfile, discover_hosts.sh, env, launcher timing, verdicts.

Each table states what an MPIJob user relies on (the hostfile mpirun reads, the env the launcher gets,
when the launcher starts, what the job's condition says) for one input; the last tests check that what
the controller renders is what `kubetrain.runtimes` reads back inside the pods.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from kubetrain.api import RestartPolicy
from kubetrain.api.mpijob import MPIJob
from kubetrain.common.job import JobState, Observed, PodFacts, PodPhase, ReplicaCounts, ServiceMode
from kubetrain.common.job.pods import desired_pod
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import CONFIGMAPS, SECRETS, SERVICES, Obj
from kubetrain.common.kube.store import Store
from kubetrain.common.testing import FakeClock, MemoryEventRecorder
from kubetrain.controllers.mpi import LAUNCHER_BACKOFF_LIMIT, MPIJobController
from kubetrain.controllers.settings import ControllerSettings
from kubetrain.podcontract import (
    DiscoverHosts,
    Hostfile,
    MPIImplementation,
    MPIRole,
    launcher_env,
    names,
)
from kubetrain.runtimes import mpi as pod_side

NS = "team-a"


def controller(settings: ControllerSettings | None = None) -> MPIJobController:
    clock = FakeClock()
    return MPIJobController(
        api=InMemoryApiClient(clock=clock),
        cache={resource: Store() for resource in MPIJobController.resources_for()},
        clock=clock,
        recorder=MemoryEventRecorder(),
        settings=settings or ControllerSettings(),
    )


def mpijob(workers: int | None = 2, **spec: Any) -> MPIJob:
    template = {
        "spec": {"containers": [{"name": "mpi", "image": "mpi:1", "command": ["mpirun", "hostname"]}]}
    }
    worker_template = {"spec": {"containers": [{"name": "mpi", "image": "mpi:1"}]}}
    specs: dict[str, Any] = {"Launcher": {"replicas": 1, "template": template}}
    if workers is not None:
        specs["Worker"] = {"replicas": workers, "template": worker_template}
    body = {"metadata": {"name": "pi", "namespace": NS}, "spec": {"mpiReplicaSpecs": specs, **spec}}
    return MPIJob.model_validate(body)


def defaulted(workers: int | None = 2, **spec: Any) -> MPIJob:
    return controller().default(mpijob(workers, **spec))


def pod(ctl: MPIJobController, job: MPIJob, rtype: str, index: int = 0) -> Obj:
    rspec = job.replica_specs[rtype]
    body, _ = desired_pod(
        template=rspec.template.to_wire(),
        name=f"{job.name}-{rtype.lower()}-{index}",
        namespace=NS,
        labels={},
        owner={},
        restart_policy=rspec.restart_policy or RestartPolicy.NEVER,
    )
    return ctl.configure_pod(job, rtype, index, body)


def env_of(body: Obj) -> dict[str, str]:
    return {e["name"]: e["value"] for e in body["spec"]["containers"][0].get("env", [])}


def worker_pods(*phases: PodPhase, ready: bool = False, reason: str = "") -> dict[int, PodFacts]:
    return {
        i: PodFacts(name=f"pi-worker-{i}", index=i, phase=phase, ready=ready, reason=reason)
        for i, phase in enumerate(phases)
    }


def observed(
    launcher: ReplicaCounts | None = None, workers: ReplicaCounts | None = None, extras: Any = None
) -> Observed:
    replicas = {"Launcher": launcher or ReplicaCounts(replicas=1)}
    if workers is not None:
        replicas["Worker"] = workers
    return Observed(replicas=MappingProxyType(replicas), extras=MappingProxyType(extras or {}))


def config_data(ctl: MPIJobController, job: MPIJob, seen: Observed) -> dict[str, str]:
    [cm] = [e.body for e in ctl.extra_objects(job, seen) if e.resource == CONFIGMAPS]
    data: dict[str, str] = cm["data"]
    return data


# hostfile ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "settings", "expected"),
    [
        ({}, ControllerSettings(), "pi-worker-0.pi.team-a.svc slots=1\npi-worker-1.pi.team-a.svc slots=1\n"),
        (
            {"slotsPerWorker": 4, "mpiImplementation": "OpenMPI"},
            ControllerSettings(cluster_domain="corp.example"),
            "pi-worker-0.pi.team-a.svc.corp.example slots=4\n"
            "pi-worker-1.pi.team-a.svc.corp.example slots=4\n",
        ),
        (
            {"slotsPerWorker": 2, "mpiImplementation": "Intel"},
            None,
            "pi-worker-0.pi.team-a.svc:2\npi-worker-1.pi.team-a.svc:2\n",
        ),
        ({"mpiImplementation": "MPICH"}, None, "pi-worker-0.pi.team-a.svc:1\npi-worker-1.pi.team-a.svc:1\n"),
        (
            {"runLauncherAsWorker": True, "slotsPerWorker": 2},
            None,
            "pi-launcher.pi.team-a.svc slots=2\n"
            "pi-worker-0.pi.team-a.svc slots=2\n"
            "pi-worker-1.pi.team-a.svc slots=2\n",
        ),
        (
            {"runLauncherAsWorker": True, "mpiImplementation": "MPICH"},
            None,
            "pi-launcher.pi.team-a.svc:1\npi-worker-0.pi.team-a.svc:1\npi-worker-1.pi.team-a.svc:1\n",
        ),
    ],
)
def test_hostfile_per_implementation_and_slots(
    spec: dict[str, Any], settings: ControllerSettings | None, expected: str
) -> None:
    ctl = controller(settings)
    job = ctl.default(mpijob(**spec))
    assert config_data(ctl, job, observed())["hostfile"] == expected


def test_hostfile_follows_the_worker_count() -> None:
    ctl = controller()
    scaled = [config_data(ctl, defaulted(n), observed())["hostfile"].count("\n") for n in (1, 3, 5)]
    assert scaled == [1, 3, 5]


def test_launcher_alone_has_an_empty_hostfile_unless_it_runs_as_a_worker() -> None:
    ctl = controller()
    assert config_data(ctl, defaulted(None), observed())["hostfile"] == ""
    alone = defaulted(None, runLauncherAsWorker=True)
    assert config_data(ctl, alone, observed())["hostfile"] == "pi-launcher.pi.team-a.svc slots=1\n"


# discover_hosts.sh --------------------------------------------------------------------------------------
R, P, S, F = PodPhase.RUNNING, PodPhase.PENDING, PodPhase.SUCCEEDED, PodPhase.FAILED


@pytest.mark.parametrize(
    ("phases", "as_worker", "hosts"),
    [
        ((), False, []),
        ((P, P, P), False, []),
        ((R, P, R), False, ["pi-worker-0", "pi-worker-2"]),
        ((R, R, R), False, ["pi-worker-0", "pi-worker-1", "pi-worker-2"]),
        ((R, F, S), False, ["pi-worker-0"]),
        ((P, P, P), True, ["pi-launcher"]),
        ((R, R, P), True, ["pi-launcher", "pi-worker-0", "pi-worker-1"]),
    ],
)
def test_discover_hosts_lists_the_hosts_up_now(
    phases: tuple[PodPhase, ...], as_worker: bool, hosts: list[str]
) -> None:
    ctl = controller()
    job = defaulted(3, runLauncherAsWorker=as_worker)
    seen = observed(workers=ReplicaCounts(replicas=3, pods=MappingProxyType(worker_pods(*phases))))
    script = config_data(ctl, job, seen)["discover_hosts.sh"]
    assert script == "#!/bin/sh\n" + "".join(f"echo {h}.pi.team-a.svc\n" for h in hosts)


def test_discover_hosts_drops_a_worker_being_deleted() -> None:
    ctl = controller()
    leaving = PodFacts(name="pi-worker-1", index=1, phase=R, deletion=FakeClock().now())
    pods = {0: PodFacts(name="pi-worker-0", index=0, phase=R), 1: leaving}
    seen = observed(workers=ReplicaCounts(replicas=2, pods=MappingProxyType(pods)))
    assert (
        config_data(ctl, defaulted(2), seen)["discover_hosts.sh"]
        == "#!/bin/sh\necho pi-worker-0.pi.team-a.svc\n"
    )


# env and pods -----------------------------------------------------------------------------------------
OMPI = {
    "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
}
NO_GPU = {"NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, {**OMPI, "OMPI_MCA_orte_set_default_slots": "1", **NO_GPU}),
        ({"slotsPerWorker": 8}, {**OMPI, "OMPI_MCA_orte_set_default_slots": "8", **NO_GPU}),
        ({"runLauncherAsWorker": True}, {**OMPI, "OMPI_MCA_orte_set_default_slots": "1"}),
        (
            {"mpiImplementation": "Intel", "slotsPerWorker": 2},
            {
                "I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS": "-o ConnectionAttempts=10",
                "I_MPI_PERHOST": "2",
                **NO_GPU,
            },
        ),
        (
            {"mpiImplementation": "MPICH"},
            {
                "HYDRA_HOST_FILE": "/etc/mpi/hostfile",
                "HYDRA_LAUNCH_EXTRA_ARGS": "-o ConnectionAttempts=10",
                **NO_GPU,
            },
        ),
    ],
)
def test_launcher_env_per_implementation(spec: dict[str, Any], expected: dict[str, str]) -> None:
    ctl = controller()
    job = ctl.default(mpijob(**spec))
    assert env_of(pod(ctl, job, "Launcher")) == {"K_MPI_JOB_ROLE": "launcher", **expected}


@pytest.mark.parametrize("implementation", ["OpenMPI", "Intel", "MPICH"])
def test_worker_env_is_only_the_role(implementation: str) -> None:
    ctl = controller()
    job = ctl.default(mpijob(mpiImplementation=implementation))
    assert env_of(pod(ctl, job, "Worker", 1)) == {"K_MPI_JOB_ROLE": "worker"}


def test_pods_get_dns_names_under_the_job_service() -> None:
    ctl = controller(ControllerSettings(cluster_domain="corp.example"))
    job = ctl.default(mpijob())
    launcher, worker = pod(ctl, job, "Launcher"), pod(ctl, job, "Worker", 1)
    assert (launcher["spec"]["hostname"], launcher["spec"]["subdomain"]) == ("pi-launcher", "pi")
    assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == ("pi-worker-1", "pi")
    assert worker["spec"]["dnsConfig"]["searches"] == ["pi.team-a.svc.corp.example"]
    assert launcher["metadata"]["labels"]["training.kubeflow.org/job-role"] == "launcher"
    assert worker["metadata"]["labels"]["training.kubeflow.org/job-role"] == "worker"


def test_worker_runs_sshd_unless_told_otherwise() -> None:
    ctl = controller()
    job = defaulted()
    assert pod(ctl, job, "Worker")["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
    assert pod(ctl, job, "Launcher")["spec"]["containers"][0]["command"] == ["mpirun", "hostname"]


def test_host_network_pods_keep_cluster_dns() -> None:
    ctl = controller()
    job = defaulted()
    worker = job.replica_specs["Worker"]
    host_net = worker.template.spec.model_copy(update={"host_network": True})
    job.replica_specs["Worker"] = worker.model_copy(
        update={"template": worker.template.model_copy(update={"spec": host_net})}
    )
    assert pod(ctl, job, "Worker")["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "dnsPolicy" not in pod(ctl, job, "Launcher")["spec"]


@pytest.mark.parametrize(
    ("path", "mode"), [(None, 0o600), ("/root/.ssh", 0o600), ("/home/mpiuser/.ssh", 0o644)]
)
def test_ssh_key_is_mounted_read_only_with_modes_ssh_accepts(path: str | None, mode: int) -> None:
    ctl = controller()
    job = ctl.default(mpijob(2, **({"sshAuthMountPath": path} if path else {})))
    for body in (pod(ctl, job, "Launcher"), pod(ctl, job, "Worker")):
        [volume] = [v for v in body["spec"]["volumes"] if "secret" in v]
        assert volume["secret"]["secretName"] == "pi-ssh"
        assert volume["secret"]["defaultMode"] == mode
        files = {item["path"]: item["key"] for item in volume["secret"]["items"]}
        assert files == {
            "id_rsa": "ssh-privatekey",
            "id_rsa.pub": "ssh-publickey",
            "authorized_keys": "ssh-publickey",
        }
        [mount] = [m for m in body["spec"]["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
        assert mount == {"name": volume["name"], "mountPath": path or "/root/.ssh", "readOnly": True}


def test_ssh_secret_holds_a_working_key_pair_and_is_generated_only_while_missing() -> None:
    ctl = controller()
    job = defaulted()
    [secret] = [e for e in ctl.extra_objects(job, observed()) if e.resource == SECRETS]
    assert (secret.update, secret.body["type"], secret.body["immutable"]) == (
        False,
        "kubernetes.io/ssh-auth",
        True,
    )
    data = {k: base64.b64decode(v) for k, v in secret.body["data"].items()}
    private = serialization.load_pem_private_key(data["ssh-privatekey"], password=None)
    public = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert data["ssh-publickey"].strip() == public
    assert data["ssh-publickey"].startswith(b"ecdsa-sha2-nistp256 ")
    assert secret.blind, "created without ever being read: the operator has no read access to Secrets"
    existing = Observed(replicas=observed().replicas, created=frozenset({"secrets/pi-ssh"}))
    assert [e for e in ctl.extra_objects(job, existing) if e.resource == SECRETS] == [], (
        "once the ledger records the Secret, no key is generated any more"
    )


@pytest.mark.parametrize("mode", list(ServiceMode))
def test_the_job_has_one_headless_service_whatever_the_operators_setting(mode: ServiceMode) -> None:
    """The body (named like the job, selecting all its pods) is in every snapshot under `snapshots/mpi/`."""
    ctl = controller(ControllerSettings(service_mode=mode))
    assert ctl.service_mode is ServiceMode.JOB
    assert all(ctl.wants_service(defaulted(), rtype) for rtype in ("Launcher", "Worker"))
    assert not [e for e in ctl.extra_objects(defaulted(), observed()) if e.resource == SERVICES]


# defaults and validation ----------------------------------------------------------------------------
def test_defaults_bound_launcher_retries_and_clean_up_workers() -> None:
    policy = defaulted().run_policy
    assert (policy.backoff_limit, policy.clean_pod_policy) == (LAUNCHER_BACKOFF_LIMIT, "Running")
    chosen = defaulted(runPolicy={"backoffLimit": 0, "cleanPodPolicy": "None"}).run_policy
    assert (chosen.backoff_limit, chosen.clean_pod_policy) == (0, "None")


def test_zero_slots_per_worker_is_rejected_with_the_fix() -> None:
    ctl = controller()
    [error] = ctl.validate(ctl.default(mpijob(slotsPerWorker=0)))
    assert error.path == "spec.slotsPerWorker"
    assert "1 or more" in str(error)


# launcher creation policy ----------------------------------------------------------------------------
READY, NOT_READY = True, False


@pytest.mark.parametrize(
    ("policy", "phases", "ready", "created"),
    [
        ("AtStartup", (), NOT_READY, True),
        ("AtStartup", (P, P), NOT_READY, True),
        ("WaitForWorkersReady", (), NOT_READY, False),
        ("WaitForWorkersReady", (R,), READY, False),
        ("WaitForWorkersReady", (R, R), NOT_READY, False),
        ("WaitForWorkersReady", (R, R), READY, True),
    ],
)
def test_launcher_creation_policy(
    policy: str, phases: tuple[PodPhase, ...], ready: bool, created: bool
) -> None:
    ctl = controller()
    job = defaulted(2, launcherCreationPolicy=policy)
    seen = observed(
        workers=ReplicaCounts(replicas=2, pods=MappingProxyType(worker_pods(*phases, ready=ready)))
    )
    assert ctl.ready_to_create(job, "Launcher", seen) is created
    assert ctl.ready_to_create(job, "Worker", seen) is True


@pytest.mark.parametrize(("policy", "members"), [("AtStartup", 3), ("WaitForWorkersReady", 2)])
def test_gang_counts_the_launcher_only_when_it_starts_with_the_workers(policy: str, members: int) -> None:
    ctl = controller()
    job = defaulted(2, launcherCreationPolicy=policy)
    assert sum(ctl.gang_members(job, rtype) for rtype in ("Launcher", "Worker")) == members


# verdicts -------------------------------------------------------------------------------------------
def counts(replicas: int, *, active: int = 0, pending: int = 0, failed: int = 0) -> ReplicaCounts:
    return ReplicaCounts(replicas=replicas, active=active, pending=pending, failed=failed)


def launcher_pod(phase: PodPhase, reason: str = "") -> ReplicaCounts:
    facts = PodFacts(name="pi-launcher-0", index=0, phase=phase, reason=reason)
    return ReplicaCounts(
        replicas=1,
        active=int(phase is R),
        pending=int(phase is P),
        succeeded=int(phase is S),
        failed=int(phase is F),
        pods=MappingProxyType({0: facts}),
    )


def evicted_workers() -> ReplicaCounts:
    return ReplicaCounts(
        replicas=2, active=1, failed=1, pods=MappingProxyType(worker_pods(R, F, reason="Evicted"))
    )


@pytest.mark.parametrize(
    ("launcher", "workers", "state", "reason"),
    [
        (counts(1), counts(2), JobState.PENDING, "Pending"),
        (launcher_pod(P), counts(2, active=2), JobState.PENDING, "Pending"),
        (launcher_pod(R), counts(2, active=1, pending=1), JobState.PENDING, "Pending"),
        (launcher_pod(R), counts(2, active=2), JobState.RUNNING, "Running"),
        (launcher_pod(S), counts(2, active=2), JobState.SUCCEEDED, "Succeeded"),
        (launcher_pod(S), counts(2, failed=2), JobState.SUCCEEDED, "Succeeded"),
        (launcher_pod(F), counts(2, active=2), JobState.FAILED, "Failed"),
        (launcher_pod(F, "Evicted"), counts(2, active=2), JobState.FAILED, "Evicted"),
        (launcher_pod(R), evicted_workers(), JobState.FAILED, "Evicted"),
        (launcher_pod(R), counts(2, active=1, failed=1), JobState.PENDING, "Pending"),
        (counts(1), counts(2, active=1, failed=1), JobState.FAILED, "Failed"),
    ],
)
def test_verdict_follows_the_launcher(
    launcher: ReplicaCounts, workers: ReplicaCounts, state: JobState, reason: str
) -> None:
    verdict = controller().verdict(defaulted(2), observed(launcher, workers))
    assert (verdict.state, verdict.reason_suffix) == (state, reason)


def test_launcher_alone_succeeds_and_runs_without_workers() -> None:
    ctl = controller()
    assert ctl.verdict(defaulted(None), observed(launcher_pod(R))).state is JobState.RUNNING
    assert ctl.verdict(defaulted(None), observed(launcher_pod(S))).state is JobState.SUCCEEDED


# contract round trip ------------------------------------------------------------------------------------
@pytest.mark.parametrize("implementation", list(MPIImplementation))
def test_hostfile_and_env_parse_back_in_the_pods(implementation: MPIImplementation, tmp_path: Path) -> None:
    ctl = controller(ControllerSettings(cluster_domain="cluster.local"))
    job = ctl.default(
        mpijob(3, mpiImplementation=implementation.value, slotsPerWorker=2, runLauncherAsWorker=True)
    )
    launcher = pod(ctl, job, "Launcher")
    env = env_of(launcher)
    assert env == launcher_env(implementation, slots_per_worker=2, launcher_is_worker=True)
    assert MPIRole(env[names.K_MPI_JOB_ROLE]) is MPIRole.LAUNCHER
    # the file the env names is the one the ConfigMap volume puts there
    hostfile_var = {
        MPIImplementation.OPEN_MPI: names.OMPI_MCA_ORTE_DEFAULT_HOSTFILE,
        MPIImplementation.INTEL: names.I_MPI_HYDRA_HOST_FILE,
        MPIImplementation.MPICH: names.HYDRA_HOST_FILE,
    }[implementation]
    [mount] = [m for m in launcher["spec"]["containers"][0]["volumeMounts"] if m["name"] == "mpi-job-config"]
    [volume] = [v for v in launcher["spec"]["volumes"] if v["name"] == "mpi-job-config"]
    mounted = {f"{mount['mountPath']}/{item['path']}": item["key"] for item in volume["configMap"]["items"]}
    assert mounted[env[hostfile_var]] == "hostfile"
    assert mounted[names.DISCOVER_HOSTS_PATH] == "discover_hosts.sh"
    # the launcher reads the hostfile back: every pod's DNS name, with its slots
    data = config_data(ctl, job, observed())
    (tmp_path / "hostfile").write_text(data["hostfile"])
    hostfile = pod_side.read_hostfile(implementation, tmp_path / "hostfile")
    pods = [launcher] + [pod(ctl, job, "Worker", i) for i in range(3)]
    fqdns = [f"{p['spec']['hostname']}.{p['spec']['subdomain']}.{NS}.svc.cluster.local" for p in pods]
    assert [(e.host, e.slots) for e in hostfile.entries] == [(h, 2) for h in fqdns]
    assert hostfile == Hostfile.parse(data["hostfile"], implementation)
    assert DiscoverHosts.parse(data["discover_hosts.sh"]).hosts == (fqdns[0],)


def test_a_hostfile_beyond_a_configmaps_mebibyte_fails_the_job_saying_why() -> None:
    ctl = controller()
    assert ctl.validate(defaulted(10_000)) == [], "10,000 workers of a short-named job fit"
    body = mpijob(10_000).to_wire()
    body["metadata"]["name"] = "a-training-job-whose-name-is-long-enough-to-matter"
    [error] = ctl.validate(ctl.default(MPIJob.model_validate(body)))
    assert error.path == "spec.mpiReplicaSpecs.Worker.replicas"
    assert "more than the 1048576 bytes (1 MiB) a ConfigMap may hold" in error.message
    assert "raise slotsPerWorker" in error.fix


def test_cryptography_is_loaded_only_for_the_first_key() -> None:
    """7.5 MiB an idle operator does not pay (bench/operator_at_rest.py)."""
    probe = (
        "import sys, kubetrain.cli.operator.app, kubetrain.controllers.mpi, kubetrain.controllers.registry\n"
        "before = 'cryptography' in sys.modules\n"
        "from kubetrain.controllers.mpi.sshkey import generate_ssh_key\n"
        "generate_ssh_key()\n"
        "print(before, 'cryptography' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_an_in_place_gang_restart_waits_for_the_launcher_not_the_sshd_workers() -> None:
    job, ctl = defaulted(), controller()
    assert (ctl.restarts_with_gang(job, "Launcher"), ctl.restarts_with_gang(job, "Worker")) == (True, False)
