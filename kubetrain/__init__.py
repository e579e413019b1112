"""kubetrain: one Kubernetes operator for TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob and MPIJob
(kubeflow.org compatible)."""

__version__ = "0.1.0"
__all__ = ["__version__"]
