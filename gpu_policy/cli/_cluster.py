"""The options that name a cluster, shared by plan, snapshot, telemetry, step, apply, reconcile."""

from __future__ import annotations

import argparse

from gpu_policy.cli._options import add_input_options, input_limits, number
from gpu_policy.errors import GpuPolicyError


def add_cluster_options(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--cluster", metavar="CLUSTER", required=required,
                   help="k8s:// (the pod's service account, else the current kubeconfig context), "
                        "k8s://CONTEXT, or a scenario file (the embedded simulated cluster)")
    p.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig for k8s:// (default $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--namespace", metavar="NS", help="namespace of gpu-policy's own objects (default gpu-policy)")
    p.add_argument("--queues-from", choices=("auto", "configmap", "kai"), default="auto",
                   help="where queues come from on k8s://: the gpu-policy-queues ConfigMap, KAI-Scheduler Queue "
                        "objects, or auto (the ConfigMap when it exists; default)")
    p.add_argument("--topology", metavar="NAME", type=topology_name,
                   help="k8s://: the Kueue Topology whose levels gpu-policy places by, when the gpu-policy-queues "
                        "ConfigMap has no topology.yaml (default: the only one, else the one the pods name in "
                        "kai.scheduler/topology; docs/topology.md)")
    p.add_argument("--api-deadline", type=number(0, 86400, above=True), default=None, metavar="S",
                   help="seconds to keep retrying an API server that answers 429 or 5xx, or does not answer (default 60)")
    add_input_options(p)  # a cluster may be a scenario file


def topology_name(text: str) -> str:
    """An argparse type: a name a Kueue Topology can have (the settings' own check)."""
    from gpu_policy.kubernetes import KubernetesSettings

    try:
        KubernetesSettings(topology=text).validate()
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("topology: ")) from None
    return text


def add_execute_options(p: argparse.ArgumentParser, default: str) -> None:
    way = p.add_mutually_exclusive_group()
    way.add_argument("--execute", dest="execute", action="store_true", default=None,
                     help=f"carry the plan out: evict, reserve (default: {default})")
    way.add_argument("--dry-run", dest="execute", action="store_false", help="only say what would be done")


def add_release_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--release", action="store_true",
                   help="k8s:// only: also release the gated pods the plan starts and write the Events the "
                        "controller writes, under the Lease; never beside a running controller")


def check_release(args: argparse.Namespace) -> None:
    """--release names gated pods, which only a live cluster has."""
    from gpu_policy.cluster import split_scheme

    if args.release and split_scheme(args.cluster)[0] != "k8s":
        raise GpuPolicyError(f"--release: applies to k8s:// clusters only (gated pods), not to {args.cluster}")


def open_from_args(args: argparse.Namespace, name: str | None = None):
    """The cluster the options name (`name` overrides --cluster)."""
    from gpu_policy.cluster import open_cluster, split_scheme

    name = name or args.cluster
    if split_scheme(name)[0] != "k8s":
        given = [f"--{o.replace('_', '-')}" for o in ("kubeconfig", "namespace", "topology", "api_deadline")
                 if getattr(args, o, None)]
        if given or getattr(args, "queues_from", "auto") != "auto":
            raise GpuPolicyError(f"{' '.join(given) or '--queues-from'}: applies to k8s:// clusters only, "
                                 f"not to {name}")
        return open_cluster(name, limits=input_limits(args))
    from gpu_policy.kubernetes import KubernetesSettings

    settings = KubernetesSettings(queues=args.queues_from, topology=args.topology)
    if args.namespace:
        settings.namespace = args.namespace
    if args.api_deadline:
        settings.deadline_s = args.api_deadline
    return open_cluster(name, kubeconfig=args.kubeconfig, settings=settings)


def outcome_lines(outcomes) -> list[str]:
    return [f"  {o.line()}" for o in outcomes] or ["  nothing to do"]


def observed_line(observed: dict | None) -> str:
    """One line saying what a look at a live cluster cost ("" for the embedded one)."""
    if not observed:
        return ""
    return (f"observed: {observed['source']} in {observed['api_calls']} API calls, {observed['objects']} objects, "
            f"{observed['bytes'] / 1024:.1f} KiB, {observed['seconds']:.2f} s")
