"""The Kubeflow SDK's `update_trainjob_status`, as a training script calls it (run by the SDK's own venv:
hack/kubeflow-sdk.sh). No kubetrain import. Prints `kubeflow-sdk: sent=<bool>` for each call: the SDK says
True only for an answer of 200."""

from kubeflow.trainer.backends.kubernetes.utils import update_trainjob_status


def main() -> None:
    sent = update_trainjob_status(
        progress_percent=100,
        estimated_remaining_seconds=0,
        metrics={"loss": 0.125, "accuracy": 0.97, "epoch": 3},
    )
    print(f"kubeflow-sdk: sent={sent}", flush=True)


if __name__ == "__main__":
    main()
