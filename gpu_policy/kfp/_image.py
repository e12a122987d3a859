"""The one place the components' image and package pin come from."""

from gpu_policy._version import __version__

DEFAULT_BASE_IMAGE = "python:3.11-slim"
#: The released gpu-policy the components install in their pods by default.
DEFAULT_PACKAGES = [f"gpu-policy=={__version__}"]
