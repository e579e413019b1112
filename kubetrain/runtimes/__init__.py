"""What runs inside (or instead of) the pods: framework helpers that read the pod contract
(`kubetrain.podcontract`), the pods' progress reporter, the example trainers and the local runner."""
