#!/bin/sh
# wait-for-hosts REAL_MPIRUN [ARG...]: on an MPIJob's launcher (K_MPI_JOB_ROLE=launcher), wait until every
# host of the hostfile the operator mounts resolves, then exec the real mpirun with the arguments.
#
# Why: the launcher starts with its workers, and a worker's name (<pod>.<job>.<ns>.svc) resolves only once
# its address is in the job Service's EndpointSlices and the cluster DNS has read them, a few seconds later.
# MPICH's Hydra runs `ssh <host>` once per host; when the name does not resolve, ssh exits and mpiexec
# waits for that proxy forever. Open MPI and Intel MPI fail or hang the same way, depending on timing. The
# mpi-operator's base images wait in their entrypoint; these images wrap mpirun and mpiexec instead, so the
# wait happens whether a job names them in `command` or in `args`.
#
# Bounded: after KUBETRAIN_HOSTS_TIMEOUT seconds (default 120) it names the hosts that still do not resolve
# and exits 1, so the launcher fails (and restarts under OnFailure) instead of hanging. Anywhere else (a
# worker, a plain container, no hostfile) it execs the command at once.
set -eu
real=$1
shift
if [ "${K_MPI_JOB_ROLE:-}" != launcher ]; then
  exec "$real" "$@"
fi
hostfile=${OMPI_MCA_orte_default_hostfile:-${HYDRA_HOST_FILE:-${I_MPI_HYDRA_HOST_FILE:-/etc/mpi/hostfile}}}
if [ ! -r "$hostfile" ]; then
  exec "$real" "$@"
fi
timeout=${KUBETRAIN_HOSTS_TIMEOUT:-120}
case $timeout in
  '' | *[!0-9]*)
    echo "kubetrain: KUBETRAIN_HOSTS_TIMEOUT=$timeout is not a whole number of seconds; set it to e.g. 120" >&2
    exit 2 ;;
esac
# Open MPI lines are `host slots=N`, Hydra's `host:N`; `#` starts a comment.
pending=$(sed -e 's/#.*//' "$hostfile" | awk 'NF { sub(/:.*/, "", $1); print $1 }')
began=$(date +%s)
while :; do
  left=""
  for host in $pending; do
    getent hosts "$host" >/dev/null 2>&1 || left="$left $host"
  done
  waited=$(($(date +%s) - began))
  if [ -z "$left" ]; then
    [ "$waited" -gt 0 ] && echo "kubetrain: every host of $hostfile resolves (waited $waited s)" >&2
    break
  fi
  if [ "$waited" -ge "$timeout" ]; then
    echo "kubetrain: after $timeout s these hosts of $hostfile still do not resolve:$left." \
      "mpirun starts only once every worker's DNS name resolves. Check that the worker pods are Running" \
      "and that the job's headless Service exists (kubectl get pods,services -l" \
      "training.kubeflow.org/job-name=<job>); give slow workers longer with KUBETRAIN_HOSTS_TIMEOUT" \
      "(seconds) in the launcher's env." >&2
    exit 1
  fi
  pending=$left
  sleep 1
done
exec "$real" "$@"
