"""The release's identity, in one place: setup.py, the Makefile and the KFP components read it."""

__version__ = "0.1.0"

#: The component image: what `make image` builds by default and what the generated component
#: YAMLs name until `make components IMAGE=registry/gpu-policy:TAG` replaces it (docs/install.md).
#: An unqualified name resolves to Docker Hub's official-images namespace, where no one else
#: can publish it, so a cluster that was not given the real image fails to pull rather than
#: running a stranger's.
DEFAULT_IMAGE = f"gpu-policy:{__version__}"
