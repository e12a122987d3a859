"""`gpu-policy controller`: the one decider on a live cluster (deploy/ runs it)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from gpu_policy.cli._cluster import add_cluster_options, open_from_args
from gpu_policy.cli._options import (add_solver_options, add_telemetry_options, number, planner_config, positive,
                                     telemetry_settings)
from gpu_policy.errors import GpuPolicyError


def register(sub) -> None:
    c = sub.add_parser("controller", help="admit, place and reclaim GPU pods on k8s:// as they come and go "
                                          "(one leader, standbys wait)")
    add_cluster_options(c)
    c.add_argument("--metrics-port", type=number(0, 65535, whole=True), default=8080, metavar="PORT",
                   help="port of /metrics, /healthz and /readyz (default 8080; 0: any free port)")
    c.add_argument("--lease-duration", type=number(0, 3600, above=True, then=within_foreign_leases), default=15.0,
                   metavar="S",
                   help="seconds the Lease is valid without renewal; renewed every third of it (default 15; at "
                        "most 120, the longest Lease another replica honours)")
    c.add_argument("--debounce", type=number(0, 60), default=0.2, metavar="S",
                   help="seconds from the first change that can matter to the plan (default 0.2)")
    c.add_argument("--resync", type=positive(float, 86400), default=60.0, metavar="S",
                   help="with no change, plan the cached cluster again every S seconds (default 60; no LIST)")
    c.add_argument("--bind-timeout", type=positive(float, 86400), default=120.0, metavar="S",
                   help="report a released pod not bound within S seconds (default 120; it is never deleted)")
    c.add_argument("--webhook", action="store_true",
                   help="also serve the admission webhook, POST /mutate-pods over TLS, for clusters that do not "
                        "serve MutatingAdmissionPolicy (deploy/webhook/; every replica serves it)")
    c.add_argument("--webhook-port", type=number(0, 65535, whole=True), default=9443, metavar="PORT",
                   help="HTTPS port of the webhook (default 9443; 0: any free port)")
    c.add_argument("--webhook-certificates", choices=("self-signed", "cert-manager"), default="self-signed",
                   help="self-signed (default): keep a CA and serving certificate in the Secret gpu-policy-webhook-tls "
                        "and its CA in the configuration's caBundle; cert-manager: only read what cert-manager "
                        "writes there (deploy/webhook/cert-manager/)")
    add_solver_options(c)
    add_telemetry_options(c, without="none, plans on allocations alone and detaches no idle GPU")
    c.set_defaults(func=run)


def within_foreign_leases(value: float) -> float:
    """Seconds of a Lease, within what the settings allow (their own check: no longer than
    another replica honours a Lease)."""
    from gpu_policy.kubernetes import KubernetesSettings

    try:
        KubernetesSettings(lease_duration_s=value).validate()
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("lease_duration_s: ")) from None
    return value


def run(args: argparse.Namespace) -> int:
    from gpu_policy.controller import Controller, ControllerSettings
    from gpu_policy.controller.metrics import Metrics, serve
    from gpu_policy.kubernetes import KubernetesCluster

    cluster = open_from_args(args)
    if not isinstance(cluster, KubernetesCluster):
        raise GpuPolicyError(f"--cluster: the controller runs on a live cluster (k8s://), not on {args.cluster}")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    cluster.settings.lease_duration_s = args.lease_duration
    telemetry = None
    if args.prometheus:  # without it the controller plans on allocations alone (no simulated telemetry)
        from gpu_policy.controller.telemetry import TelemetryFeed
        from gpu_policy.telemetry import PrometheusDcgmSource

        settings = telemetry_settings(args)
        telemetry = TelemetryFeed(PrometheusDcgmSource(args.prometheus, settings), settings)
    metrics = Metrics()  # the cluster again, through an ApiClient that counts every request
    cluster = KubernetesCluster(cluster.url, settings=cluster.settings, namespace=cluster.default_namespace,
                                api_client=metrics.counted_client(cluster.api_client.configuration))
    controller = Controller(cluster, ControllerSettings(debounce_s=args.debounce, resync_s=args.resync,
                                                        bind_timeout_s=args.bind_timeout), planner_config(args),
                            metrics=metrics, telemetry=telemetry)
    webhook = _webhook(args, cluster, controller) if args.webhook else None
    try:
        server = serve(controller.metrics, args.metrics_port,
                       lambda: controller.ready() and (webhook is None or webhook.ready()))
    except OSError as e:
        raise GpuPolicyError(f"--metrics-port: cannot listen on {args.metrics_port}: {e.strerror or e}") from None
    print(f"gpu-policy controller: metrics on port {server.server_address[1]}", file=sys.stderr, flush=True)
    if threading.current_thread() is threading.main_thread():  # SIGTERM: finish the action in flight, then stop
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: controller.stop.set())
    try:
        controller.start()
        controller.run()
    finally:
        server.shutdown()
        if webhook is not None:
            webhook.shutdown()
    return 0


def _webhook(args: argparse.Namespace, cluster, controller):
    """The admission webhook, listening, its certificates checked in a thread (docs/kubernetes.md,
    "The admission webhook")."""
    from gpu_policy.controller.cache import NAMESPACES
    from gpu_policy.controller.webhook import Webhook
    from gpu_policy.controller.webhook_tls import TlsKeeper, WebhookSettings
    from gpu_policy.kubernetes.transport.webhook import WebhookClient

    settings = WebhookSettings(port=args.webhook_port, self_signed=args.webhook_certificates == "self-signed")
    client = WebhookClient(cluster.api_client, cluster.url, cluster.settings)
    keeper = TlsKeeper(client, cluster.settings.namespace, settings, cluster.clocks.wall)
    webhook = Webhook(keeper, settings, lambda: controller.cache.objects.get(NAMESPACES),
                      cluster.settings.gpu_resource, controller.metrics.registry)
    try:
        port = webhook.start()
    except OSError as e:
        raise GpuPolicyError(f"--webhook-port: cannot listen on {args.webhook_port}: {e.strerror or e}") from None
    print(f"gpu-policy controller: admission webhook on port {port} (https, POST /mutate-pods)", file=sys.stderr,
          flush=True)
    return webhook
