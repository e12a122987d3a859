"""`gpu-policy telemetry` and `gpu-policy dcgm-exporter-sim`: DCGM signals, read or served."""

from __future__ import annotations

import argparse
import threading

from gpu_policy.cli._cluster import add_cluster_options, open_from_args
from gpu_policy.cli._options import add_input_options, add_telemetry_options, input_limits, number, telemetry_settings
from gpu_policy.errors import UsageError
from gpu_policy.model import Scenario
from gpu_policy.model.scenario_file import load_scenario


def register(sub) -> None:
    tm = sub.add_parser("telemetry", help="per-GPU table of DCGM signals (idle, busy, XID, memory)")
    tm.add_argument("--scenario", metavar="FILE", help="a scenario: simulate its telemetry, or name the jobs")
    add_cluster_options(tm, required=False)
    add_telemetry_options(tm)
    tm.add_argument("--prometheus-client", metavar="MODULE:FUNCTION",
                    help="read through the prometheus_api_client.PrometheusConnect that your FUNCTION returns (your "
                         "auth, headers, TLS, proxy) instead of --prometheus URL (docs/telemetry.md)")
    tm.set_defaults(func=run_table)
    ex = sub.add_parser("dcgm-exporter-sim", help="serve a scenario's simulated DCGM metrics for Prometheus")
    ex.add_argument("scenario", help="scenario file (its telemetry: section sets the profiles)")
    ex.add_argument("--port", type=number(0, 65535, whole=True), default=9400,
                    help="port (default 9400, as dcgm-exporter; 0: any free port)")
    ex.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ex.add_argument("--hostname-label", choices=("Hostname", "hostname"), default="Hostname",
                    help="label naming the node (older exporters: Hostname; newer: hostname)")
    add_input_options(ex)
    ex.set_defaults(func=run_exporter)


def run_table(args: argparse.Namespace) -> int:
    from gpu_policy.presentation.render import telemetry_table
    from gpu_policy.telemetry import cluster_signals, dcgm_source

    if args.scenario and args.cluster:
        raise UsageError("telemetry: give --scenario FILE or --cluster CLUSTER, not both")
    if args.prometheus_client and (args.prometheus or args.prometheus_insecure):
        raise UsageError("telemetry: give --prometheus URL or --prometheus-client, not both (your client's own "
                         "session decides TLS)")
    cluster = open_from_args(args, args.cluster or args.scenario) if args.cluster or args.scenario else None
    if not (args.prometheus or args.prometheus_client) and not (cluster and cluster.simulated_telemetry):
        raise UsageError("telemetry: give --prometheus URL, or a --scenario FILE to simulate "
                         "(a live cluster's telemetry needs --prometheus)")
    scenario = cluster.observe().scenario if cluster else None
    settings = telemetry_settings(args)
    source = _own_client(args.prometheus_client, settings) if args.prometheus_client else \
        dcgm_source(args.prometheus, scenario, settings)
    known = scenario or Scenario(nodes=[], queues=[], jobs=[])  # no scenario: signals per GPU only
    signals = cluster_signals(source.collect(settings), known, settings)
    print(telemetry_table(signals, scenario))
    return 0


def _own_client(reference: str, settings):
    """The source reading through the PrometheusConnect that `reference` ('module:function',
    the caller's own code: its module is trusted, as whoever runs the command chose it) returns."""
    from gpu_policy.checkpoint.budget import resolve
    from gpu_policy.telemetry import PrometheusDcgmSource

    build = resolve(reference, "--prometheus-client", trusted_modules=[str(reference).partition(":")[0]])
    return PrometheusDcgmSource(build(), settings)


def run_exporter(args: argparse.Namespace) -> int:
    from gpu_policy.telemetry.exporter import start_exporter

    scenario = load_scenario(args.scenario, input_limits(args))
    try:
        server = start_exporter(scenario, args.host, args.port, args.hostname_label)
    except OSError as e:  # a taken or privileged port, an unknown host name
        raise UsageError(f"--port: cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    host, port = server.server_address[:2]
    print(f"serving simulated dcgm-exporter metrics on http://{host}:{port}/metrics (Ctrl-C stops)", flush=True)
    try:
        threading.Event().wait()  # the server's thread serves until Ctrl-C
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0
