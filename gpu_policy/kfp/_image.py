"""Where the components run and what their pods install: the one home of that rule.

With an image (by default `DEFAULT_IMAGE`, the placeholder `make components IMAGE=...`
replaces) a pod installs nothing at start: the image holds gpu-policy, its pinned
dependencies and kfp. Without one, the pod starts from `WHEEL_BASE_IMAGE` and installs
the exact gpu-policy wheel it was given, by path or URL, never a name looked up on an
index: gpu-policy is not published on one, and whoever claims the name there would run
code in every pipeline.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from gpu_policy._version import DEFAULT_IMAGE
from gpu_policy.errors import GpuPolicyError

#: The base image of a component that installs a wheel at start.
WHEEL_BASE_IMAGE = "python:3.11-slim"
_URL_SCHEMES = ("http", "https", "file")


def component_options(image: str | None, wheel: str | None) -> dict:
    """The `kfp.dsl.component` options for components run in `image`, or installing `wheel`."""
    if image is not None and wheel is not None:
        raise GpuPolicyError(f"components: image, wheel: must be one or the other (an image installs nothing at "
                             f"start), got image={image!r} and wheel={wheel!r}")
    if wheel is not None:
        return {"base_image": WHEEL_BASE_IMAGE, "packages_to_install": [wheel_requirement(wheel)]}
    if image is not None and (not image.strip() or any(c.isspace() for c in image)):
        raise GpuPolicyError(f"components: image: must be an image reference such as "
                             f"registry.example.com/gpu-policy:TAG, got {image!r}")
    return {"base_image": image or DEFAULT_IMAGE, "packages_to_install": [], "install_kfp_package": False}


def wheel_requirement(wheel: str) -> str:
    """What the pod's pip installs for `wheel`: the URL as given, or the file's absolute path.

    A path must name an existing file where the pipeline is built (kfp.local runs it
    there); a cluster's pods need a URL they can reach.
    """
    scheme = urlsplit(wheel).scheme
    url = scheme in _URL_SCHEMES
    name = Path(urlsplit(wheel).path if url else wheel).name
    if not (name.startswith("gpu_policy-") and name.endswith(".whl")):
        raise GpuPolicyError(f"components: wheel: must be the path or http(s)/file URL of a gpu_policy-*.whl "
                             f"(gpu-policy is installed from no index by name), got {wheel!r}")
    if url:
        return wheel
    path = Path(wheel).expanduser().resolve()
    if not path.is_file():
        raise GpuPolicyError(f"components: wheel: must be an existing file (give a URL for a file the build "
                             f"machine lacks), got {wheel!r}")
    return str(path)
