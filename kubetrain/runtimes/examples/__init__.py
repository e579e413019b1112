"""Example trainers that really learn (scikit-learn's bundled digits data), one per framework and launcher.

Each runs as `python -m kubetrain.runtimes.examples.<name>` inside a replica, reads only the environment the
operator renders, and prints one `kubetrain-result {...}` JSON line per rank (accuracy and a digest of the
final weights). The data-parallel ones (pytorch_ddp, tf_multiworker, mpi_allreduce) also print a
`kubetrain-train {...}` line per rank after the first step of each epoch (docs/jobs.md). The runtime
tests and the example job YAML use them:

- pytorch_ddp: DistributedDataParallel (gloo on CPU, NCCL on GPU), plain env or torchrun;
- pytorch_elastic: the same under torchrun with c10d rendezvous from PET_*, resuming from a checkpoint;
- tf_multiworker: MultiWorkerMirroredStrategy with Keras fit (and the Evaluator replica, --evaluate);
- tf_ps: ParameterServerStrategy, chief + ps + workers;
- mpi_allreduce: a numpy MLP with MPI_Allreduce of the gradients (mpi4py);
- horovod_torch: Horovod over PyTorch under mpirun.
"""
