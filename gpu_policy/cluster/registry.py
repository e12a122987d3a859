"""Which backend serves a cluster name, in fsspec's style: the name's scheme picks it.

``k8s://`` or ``k8s://CONTEXT`` is a live Kubernetes cluster; a name without a scheme
(or ``file://``) is a scenario file, the embedded simulated cluster. Backends are
imported on first use; a third one is a class registered with `register_source`, or
an entry point in the group ``gpu_policy.sources``.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from types import MappingProxyType

from gpu_policy.errors import GpuPolicyError

_registry: dict[str, dict] = {
    "file": {"class": "gpu_policy.cluster.embedded.ScenarioCluster", "err": None},
    "k8s": {"class": "gpu_policy.kubernetes.cluster.KubernetesCluster",
            "err": "the Kubernetes backend needs the kubernetes client: pip install kubernetes"},
}
assert list(_registry) == sorted(_registry), "keep the known backends in alphabetical order"
#: scheme -> {"class": a class or its dotted path, "err": what to install when it cannot be imported}
registry = MappingProxyType(_registry)
_entry_points_read = False


def register_source(scheme: str, cls, clobber: bool = False) -> None:
    """Serve ``scheme://...`` with `cls` (a class, or its dotted path), whose
    ``from_url(url, **options)`` builds a source. Raises ValueError on a clash unless `clobber`."""
    if scheme in _registry and not clobber:
        raise ValueError(f"cluster scheme {scheme!r} is already served by {_registry[scheme]['class']}")
    _registry[scheme] = {"class": cls, "err": None}


def split_scheme(name: str) -> tuple[str, str]:
    """("k8s", "CONTEXT") for ``k8s://CONTEXT``; ("file", path) for a path."""
    scheme, sep, rest = name.partition("://")
    if not sep:
        return "file", name
    return scheme, rest


def source_class(scheme: str):
    """The class serving `scheme`, imported now."""
    _read_entry_points()
    if scheme not in _registry:
        raise GpuPolicyError(f"cluster: unknown scheme {scheme!r}:// (known: {', '.join(sorted(_registry))}; "
                             "a scenario file needs no scheme)")
    entry = _registry[scheme]
    if not isinstance(entry["class"], str):
        return entry["class"]
    module, _, name = entry["class"].rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as e:
        raise GpuPolicyError(f"cluster: {scheme}:// is unavailable: {entry['err'] or e}") from e


def open_cluster(name: str, **options):
    """The cluster called `name`, e.g. ``k8s://``, ``k8s://prod`` or ``cluster.yaml``.
    `options` go to the backend (``kubeconfig=``, ``settings=`` for k8s://)."""
    if not name:
        raise GpuPolicyError("cluster: must be a scenario file or k8s://[CONTEXT], got an empty name")
    return source_class(split_scheme(name)[0]).from_url(name, **options)


def _read_entry_points() -> None:
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for point in entry_points(group="gpu_policy.sources"):
        _registry.setdefault(point.name, {"class": point.value.replace(":", "."), "err": None})
