"""One JobController subclass per framework: TFJob, PyTorchJob, MPIJob, JAXJob, XGBoostJob, PaddleJob."""
