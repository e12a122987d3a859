"""`gpu-policy snapshot`: a cluster as a scenario file, to reproduce any plan offline."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from gpu_policy.cli._cluster import add_cluster_options, observed_line, open_from_args
from gpu_policy.model.scenario_dump import scenario_to_dict


def register(sub) -> None:
    s = sub.add_parser("snapshot", help="print a cluster as a scenario file (plan it offline, attach it to a bug)")
    add_cluster_options(s)
    s.add_argument("--format", choices=("yaml", "json"), default="yaml")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    obs = open_from_args(args).observe()
    data = scenario_to_dict(obs.scenario)
    print(json.dumps(data, indent=2) if args.format == "json" else
          yaml.safe_dump(data, sort_keys=False, default_flow_style=None), end="\n" if args.format == "json" else "")
    for warning in obs.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if obs.observed:
        print(observed_line(obs.observed), file=sys.stderr)
    return 0
