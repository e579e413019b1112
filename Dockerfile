# syntax=docker/dockerfile:1
# The kubetrain operator image: the `kubetrain` wheel and its runtime dependencies, nothing else (no training
# framework: the operator never imports one). Build from the repository root (hack/images.sh does):
#   docker build -t docker.io/kubetrain/kubetrain-operator:0.1.0 .
# The base is pinned to an exact Python patch release and Debian release; bump both deliberately. It is a
# build argument so that a Debian base made without a registry (hack/images.sh) can stand in; the packages
# go into a venv, /opt/venv, so that any base with python3 and its venv module works.
ARG BASE_IMAGE=docker.io/library/python:3.11.14-slim-bookworm

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin
WORKDIR /src
# Only what the wheel is built from: the image never depends on a developer's .venv, tests or examples.
COPY pyproject.toml README.md ./
COPY kubetrain ./kubetrain
# A site's own CA, when pip must trust one, comes in as the build secret `ca` and never lands in a layer.
RUN --mount=type=secret,id=ca,target=/run/secrets/ca.crt \
    if test -s /run/secrets/ca.crt; then export PIP_CERT=/run/secrets/ca.crt; fi; \
    python3 -m venv /opt/venv && pip wheel --no-deps --wheel-dir /wheels .

FROM ${BASE_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The wheel without extras: no torch, tensorflow or mpi4py. Dependencies come from PyPI, as pyproject.toml
# bounds them; compile the bytecode now, since the root filesystem is read-only at run time. COPY, not a bind
# mount from the build stage: a bind mount is not part of the layer's cache key, so podman and buildah reused
# the layer of an older wheel and the image kept running the old operator.
COPY --from=build /wheels /wheels
RUN --mount=type=secret,id=ca,target=/run/secrets/ca.crt \
    if test -s /run/secrets/ca.crt; then export PIP_CERT=/run/secrets/ca.crt; fi; \
    python3 -m venv /opt/venv \
    && pip install /wheels/kubetrain-*.whl \
    && python -m compileall -q /opt/venv/lib
# A fixed numeric non-root user (the Deployment's runAsUser), so that runAsNonRoot can be verified by the
# kubelet without a passwd lookup; it owns nothing in the image.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["kubetrain"]
CMD ["operator"]
