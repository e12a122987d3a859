"""`gpu-policy reconcile`: apply a plan every so often (the embedded cluster or a dry run; see docs/kubernetes.md)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from gpu_policy.cli._cluster import (add_cluster_options, add_execute_options, add_release_option, check_release,
                                     open_from_args)
from gpu_policy.cli._options import add_solver_options, add_telemetry_options, planner_config, positive, telemetry_settings


def register(sub) -> None:
    r = sub.add_parser("reconcile", help="enforce fair share: observe, plan and act every --every seconds")
    add_cluster_options(r)
    r.add_argument("--every", type=positive(float, 86400), default=60.0, metavar="S", help="seconds between rounds (default 60)")
    r.add_argument("--rounds", type=positive(int, 10 ** 9), default=None, metavar="N", help="stop after N rounds (default: "
                                                                                     "until SIGTERM or Ctrl-C)")
    add_execute_options(r, "yes on k8s://, no on a scenario file")
    add_release_option(r)
    add_solver_options(r)
    add_telemetry_options(r)
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.actions.cycle import reconcile

    check_release(args)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():  # SIGTERM ends the loop after its round
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    cluster = open_from_args(args)

    def report(plan, outcomes, error) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if error:
            print(f"{stamp} round failed: {error}", file=sys.stderr, flush=True)
            return
        done = {}
        for o in outcomes:
            done[f"{o.action} {o.result}"] = done.get(f"{o.action} {o.result}", 0) + 1
        acts = ", ".join(f"{n} {what}" for what, n in sorted(done.items())) or "nothing to do"
        cost = f"; {plan.observed['api_calls']} API calls in {plan.observed['seconds']:.2f} s" if plan.observed else ""
        print(f"{stamp} {plan.summary['starts']} starts, {plan.summary['preemptions']} preemptions, "
              f"{plan.summary['moves']} moves, {plan.summary['waiting']} waiting: {acts}{cost}", flush=True)
        for o in outcomes:
            print(f"  {o.line()}", flush=True)

    failed = reconcile(cluster, args.every, args.rounds, planner_config(args), args.prometheus,
                       telemetry_settings(args), args.execute, report, stop, args.release)
    return 2 if args.rounds and failed == args.rounds else 0
