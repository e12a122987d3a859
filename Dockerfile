# The gpu-policy component image: the wheel `make dist` builds, installed with the pinned
# dependencies of image-constraints.txt. Build it with `make image IMAGE=registry/gpu-policy:TAG`
# (docs/install.md); the KFP components and the example DAG's training pods run in it.
# `make image IMAGE_EXTRAS=kfp,s3` sets EXTRAS, the wheel's extras: kfp's dependencies are
# pinned by image-constraints.txt, those an added extra brings resolve at build time.
ARG PYTHON_IMAGE=python:3.11-slim

# Install into a virtual environment in a throwaway stage: whatever pip needs to build
# (kfp-server-api is published as a pure-Python sdist only) stays behind.
FROM ${PYTHON_IMAGE} AS install
ARG EXTRAS=kfp
COPY image-constraints.txt /tmp/constraints.txt
COPY dist/gpu_policy-*-py3-none-any.whl /tmp/wheel/
RUN python -m venv /opt/gpu-policy \
 && /opt/gpu-policy/bin/pip install --no-cache-dir --disable-pip-version-check \
      --only-binary=:all: --no-binary=kfp-server-api --constraint /tmp/constraints.txt \
      "$(ls /tmp/wheel/gpu_policy-*-py3-none-any.whl)[${EXTRAS}]" \
 && /opt/gpu-policy/bin/pip check \
 && /opt/gpu-policy/bin/pip uninstall --yes --quiet pip setuptools

FROM ${PYTHON_IMAGE}
COPY --from=install /opt/gpu-policy /opt/gpu-policy
RUN groupadd --gid 10001 gpu-policy \
 && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin gpu-policy
ENV PATH=/opt/gpu-policy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /home/gpu-policy
CMD ["gpu-policy", "--help"]
