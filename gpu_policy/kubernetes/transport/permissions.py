"""The RBAC permissions gpu-policy's requests need, declared where each request is made.

Each client method (and each watched kind, `kinds.py`) declares the one permission it uses;
deploy/ grants exactly those, and a test checks both ways.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Permission:
    """One RBAC rule line: a verb on a resource; `own_namespace`: only in gpu-policy's
    namespace (a Role), else cluster-wide (a ClusterRole)."""

    verb: str
    group: str
    resource: str
    own_namespace: bool = False


#: what the controller's account needs
PERMISSIONS: set[Permission] = set()


def declare(verb: str, resource: str, group: str = "", own_namespace: bool = False,
            registry: set[Permission] = PERMISSIONS) -> Permission:
    """The permission, collected in `registry` (the controller's PERMISSIONS unless another
    account's, e.g. a pipeline step's, sends the request)."""
    permission = Permission(verb, group, resource, own_namespace)
    registry.add(permission)
    return permission


def needs(verb: str, resource: str, group: str = "", own_namespace: bool = False,
          registry: set[Permission] = PERMISSIONS):
    """Declare the permission a client method uses, as its `permission` attribute."""
    permission = declare(verb, resource, group, own_namespace, registry)

    def mark(method):
        method.permission = permission
        return method

    return mark
