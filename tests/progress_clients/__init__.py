"""Training scripts that report progress only through Kubeflow's own clients, unmodified and with no
kubetrain import: Hugging Face Transformers' `Trainer` (its `KubeflowCallback` registers itself when
`KUBEFLOW_TRAINER_SERVER_URL` is set) and the Kubeflow SDK's `update_trainjob_status`. The runtime tier runs
them under `kubetrain run --local`, the integration tier as pods simulated by processes."""
