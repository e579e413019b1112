"""The Kubeflow SDK's `update_trainjob_status`, as a training script calls it (run by the SDK's own venv:
hack/kubeflow-sdk.sh, or by the trainer-pytorch image). No kubetrain import. Prints `kubeflow-sdk:
sent=<bool>` for each call: the SDK says True only for an answer of 200. With `MIDWAY_SECONDS` set, it first
reports 50 % and waits that long (more than the SDK's own 5 s between reports), so that a watcher can see a
job's progress while it runs."""

import os
import time

from kubeflow.trainer.backends.kubernetes.utils import update_trainjob_status


def main() -> None:
    midway = float(os.environ.get("MIDWAY_SECONDS", "0"))
    if midway:
        sent = update_trainjob_status(
            progress_percent=50, estimated_remaining_seconds=int(midway), metrics={"loss": 0.5, "epoch": 1}
        )
        print(f"kubeflow-sdk: sent={sent}", flush=True)
        time.sleep(midway)
    sent = update_trainjob_status(
        progress_percent=100,
        estimated_remaining_seconds=0,
        metrics={"loss": 0.125, "accuracy": 0.97, "epoch": 3},
    )
    print(f"kubeflow-sdk: sent={sent}", flush=True)


if __name__ == "__main__":
    main()
