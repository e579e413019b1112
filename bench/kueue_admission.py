"""Kueue admission benchmark: N PyTorchJobs queued and admitted through kubetrain's Kueue integration and
through Kueue's own kubeflow integration (switched back on), each run with its peer in the same invocation.

    python bench/kueue_admission.py --help
    python bench/kueue_admission.py --quick

The code lives in bench/opbench/queued.py (this directory is on sys.path when the script runs); see
bench/README.md.
"""

import sys

from opbench.queued_cli import main

if __name__ == "__main__":
    sys.exit(main())
