"""`gpu-policy controller`: the one decider on a live cluster (docs/kubernetes.md, "The controller").

An informer cache (LIST once, then WATCH) feeds the same mapping as `gpu-policy snapshot`;
the loop plans on change, releases gated pods with their node, evicts for reclaim and
moves, and writes Events, all while holding the Lease with fencing.
"""

from gpu_policy.controller.loop import Controller, ControllerSettings

__all__ = ["Controller", "ControllerSettings"]
