"""The comparison as a table (one row per policy and seed, then the means over seeds), as
JSON, and as a plot of the three measures per policy and seed."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from gpu_policy.extras import pyplot
from gpu_policy.presentation.render import text_table
from gpu_policy.sim.topology.compare import Comparison
from gpu_policy.sim.topology.metrics import Metrics

#: The columns that are means over seeds in the summary rows.
_MEANS = ("allocated_at_first_required_wait", "allocated_while_required_waits", "utilization", "racks_per_gang",
          "largest_wait_mean_s", "largest_wait_p95_s", "wait_mean_s")


def describe(c: Comparison) -> str:
    p, s = c.protocol, c.protocol.shape
    return (f"topology: {s.blocks} blocks x {s.racks_per_block} racks x {s.nodes_per_rack} nodes x {s.gpus} GPUs "
            f"({s.total_gpus} GPUs); {p.jobs} jobs per seed at load {p.load:g}, rounds every {p.round_s:g} s; "
            f"seeds {','.join(map(str, p.seeds))}\n"
            f"largest gangs: more GPUs than one rack holds ({s.nodes_per_rack * s.gpus})")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _h(s: float | None) -> str:
    return "-" if s is None else f"{s / 3600:.2f}"


def _row(label: str, m: dict) -> list[str]:
    racks = m["racks_per_gang"]
    return [label, _pct(m["allocated_at_first_required_wait"]), _pct(m["allocated_while_required_waits"]),
            _pct(m["utilization"]), "-" if racks is None else f"{racks:.2f}", str(m.get("required_broken", "")),
            _h(m["largest_wait_mean_s"]), _h(m["largest_wait_p95_s"]), _h(m["wait_mean_s"]),
            str(m.get("moves", "")), str(m.get("plans", ""))]


def summary(c: Comparison) -> dict[str, dict]:
    """Per policy, the mean over seeds of each measure (None where a seed has none)."""
    out = {}
    for policy in c.protocol.policies:
        runs = c.of(policy)
        out[policy] = {k: _mean([getattr(m, k) for m in runs]) for k in _MEANS}
        requests = sorted({k for m in runs for k in m.racks_by_request})
        out[policy]["racks_by_request"] = {k: _mean([m.racks_by_request.get(k) for m in runs]) for k in requests}
        out[policy].update(required_broken=sum(m.required_broken for m in runs), moves=sum(m.moves for m in runs),
                           plans=sum(m.plans for m in runs),
                           plan_seconds=round(sum(m.plan_seconds for m in runs), 1),
                           slowest_plan_s=round(max((m.slowest_plan_s for m in runs), default=0.0), 2),
                           plans_at_time_limit=sum(m.plans_at_time_limit for m in runs))
    return out


def comparison_table(c: Comparison) -> str:
    header = ["POLICY", "ALLOC % AT 1ST REQUIRED WAIT", "ALLOC % WHILE REQUIRED WAITS", "UTIL %", "RACKS/GANG",
              "REQUIRED BROKEN", "LARGEST WAIT MEAN H", "P95 H", "ALL WAIT MEAN H", "MOVES", "PLANS"]
    rows = [_row(f"{m.policy} seed {m.seed}", asdict(m)) for m in c.runs]
    means = [_row(f"{policy} (mean)", s) for policy, s in summary(c).items()]
    return (f"{describe(c)}\n{text_table(header, rows)}\n\nmeans over seeds\n{text_table(header, means)}\n\n"
            f"racks per gang by request, mean over seeds\n{racks_table(c)}")


def racks_table(c: Comparison) -> str:
    summaries = summary(c)
    requests = sorted({k for m in c.runs for k in m.racks_by_request})
    rows = [[policy] + ["-" if s["racks_by_request"].get(k) is None else f"{s['racks_by_request'][k]:.2f}"
                        for k in requests] for policy, s in summaries.items()]
    return text_table(["POLICY"] + [k.upper() for k in requests], rows)


def comparison_json(c: Comparison) -> dict:
    p = c.protocol
    return {"shape": asdict(p.shape), "jobs": p.jobs, "load": p.load, "round_s": p.round_s, "seeds": list(p.seeds),
            "runs": [asdict(m) for m in c.runs], "means": summary(c)}


def plot_comparison(c: Comparison, path: str | Path) -> Path:
    """Per policy, each seed's allocation at the first required wait, racks per gang and
    the largest gangs' mean wait, with the mean over seeds as a bar."""
    plt = pyplot("--plot")
    panels = [("allocated_at_first_required_wait", "GPUs allocated when the first\nrequired gang waits (%)", 100),
              ("racks_per_gang", "racks a gang spans (mean)", 1),
              ("largest_wait_mean_s", "largest gangs' wait (mean, h)", 1 / 3600)]
    policies = c.protocol.policies
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.6))
    for ax, (key, title, scale) in zip(axes, panels):
        for i, policy in enumerate(policies):
            values = [getattr(m, key) for m in c.of(policy) if getattr(m, key) is not None]
            ys = np.array(values, dtype=float) * scale
            if len(ys):
                ax.bar(i, ys.mean(), color=f"C{i}", alpha=0.55)
                ax.scatter(np.full(len(ys), i), ys, color="black", s=10, zorder=3)
        ax.set_xticks(range(len(policies)), policies, fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    lowest = min((100 * m.allocated_at_first_required_wait for m in c.runs
                  if m.allocated_at_first_required_wait is not None), default=100.0)
    axes[0].set_ylim(min(80.0, 5 * (lowest // 5)), 100)  # no seed's dot below the axis
    s = c.protocol.shape
    fig.suptitle(f"{s.total_gpus} GPUs in {s.blocks} blocks x {s.racks_per_block} racks, {c.protocol.jobs} jobs, "
                 f"seeds {','.join(map(str, c.protocol.seeds))} (bars: mean, dots: seeds)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def _mean(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None
