#!/bin/sh
# Puts wrappers of the image's mpirun and mpiexec in /usr/local/lib/kubetrain/bin, which the Containerfile
# puts first in PATH: each runs wait-for-hosts.sh (an MPIJob launcher waits until its hostfile's hosts
# resolve) with the absolute path of the real command, found here at build time. Run after MPI is installed.
set -eu
lib=/usr/local/lib/kubetrain
mkdir -p "$lib/bin"
install -m 0755 "$lib/wait-for-hosts.sh" "$lib/wait-for-hosts"
wrapped=0
for name in mpirun mpiexec; do
  real=$(command -v "$name") || continue
  printf '#!/bin/sh\nexec %s/wait-for-hosts %s "$@"\n' "$lib" "$real" >"$lib/bin/$name"
  chmod 0755 "$lib/bin/$name"
  wrapped=$((wrapped + 1))
done
if [ "$wrapped" = 0 ]; then
  echo "wrap-mpirun.sh: neither mpirun nor mpiexec is in PATH ($PATH): install MPI first" >&2
  exit 1
fi
