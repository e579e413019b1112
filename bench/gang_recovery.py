"""Gang recovery on the real node: one rank's container killed, the time until every rank trains again.

    python bench/gang_recovery.py                       # 3 rounds x (PyTorchJob, TFJob, MPIJob) x 2 modes
    python bench/gang_recovery.py --runs 1 --kinds PyTorchJob
    python bench/gang_recovery.py --help

For pytorch-ddp (4 ranks), tf-multiworker-mirrored (4 workers) and mpi-allreduce-openmpi (3 ranks), each
under Kubeflow's per-replica `OnFailure` and under the gang failure policy `RestartGang`: once every rank
trains, one rank other than 0 is SIGKILLed through containerd, and the time runs until every rank has
printed its `kubetrain-train` line again. Needs root, `bash hack/node.sh` and the images
(`bash hack/images.sh operator trainer-pytorch trainer-tensorflow trainer-mpi`). The code lives in
bench/recoverybench (this directory is on sys.path when the script runs); see bench/README.md.
"""

import sys

from recoverybench.cli import main

if __name__ == "__main__":
    sys.exit(main())
