"""`gpu-policy demo`: the seed problems and GPU composition on the embedded cluster, and a
preempted training run."""

from __future__ import annotations

import argparse

from gpu_policy.cli._options import add_solver_options, planner_config


def register(sub) -> None:
    d = sub.add_parser("demo", help="the seed problems and GPU composition on the embedded simulated cluster, then a preempted training run")
    add_solver_options(d)
    d.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpu_policy.presentation.demo import run_demo

    print(run_demo(planner_config(args)))
    return 0
