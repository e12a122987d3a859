"""The comparison as a table, as JSON, and as the FGD paper's plot: unallocated
GPU capacity against arrived workload, per policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpu_policy.extras import pyplot
from gpu_policy.presentation.render import text_table
from gpu_policy.sim.compare import Comparison


def comparison_table(c: Comparison) -> str:
    rows = [[p.policy, f"{100 * p.ratio_mean:.2f}", f"{100 * p.ratio_min:.2f}", f"{100 * p.ratio_max:.2f}",
             f"{p.latency_p50_ms:.2f}", f"{p.latency_p95_ms:.2f}", p.per] for p in c.policies]
    table = text_table(["POLICY", "ALLOC % MEAN", "MIN", "MAX", "P50 MS", "P95 MS", "LATENCY PER"], rows)
    low, high = 100 * min(c.bounds.values()), 100 * max(c.bounds.values())
    bound = f"{low:.2f}%" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}%"
    return (f"openb{_workload(c)}: {c.nodes} nodes, {c.gpus} GPUs; {_seeds(c.seeds)}; pods arrive until "
            f"{100 * c.inflate:g}% of GPU capacity\n{table}\n"
            f"no policy can allocate more than {bound} on {'this seed' if len(c.seeds) == 1 else 'these seeds'} "
            f"(gpu_policy.sim.bound)")


def comparison_json(c: Comparison) -> dict:
    return {
        "trace": {"nodes": c.nodes, "gpus": c.gpus, "seeds": c.seeds, "inflate": c.inflate, "window": c.window,
                  "workload": c.workload},
        "bound": {str(s): round(b, 6) for s, b in c.bounds.items()},
        "policies": [{
            "policy": p.policy,
            "allocation_ratio": {"mean": round(p.ratio_mean, 6), "min": round(p.ratio_min, 6),
                                 "max": round(p.ratio_max, 6),
                                 "per_seed": {str(r.seed): round(r.allocation_ratio, 6) for r in p.runs}},
            "latency_ms": {"p50": round(p.latency_p50_ms, 3), "p95": round(p.latency_p95_ms, 3), "per": p.per},
            "pods": {"arrived": sum(r.pods_arrived for r in p.runs), "placed": sum(r.pods_placed for r in p.runs)},
        } for p in c.policies],
    }


def plot_comparison(c: Comparison, path: str | Path) -> Path:
    """Unallocated GPU % against arrived workload % (0-100), the mean over seeds."""
    plt = pyplot("--plot")
    grid = np.linspace(0, 100 * c.inflate, 401)
    mean_curves = {p.policy: np.mean([np.interp(grid, *np.array(r.curve).T) for r in p.runs], axis=0)
                   for p in c.policies}
    style = {p.policy: "--" if p.policy.endswith("batched") else "-" for p in c.policies}
    bound = 100 * (1 - float(np.mean(list(c.bounds.values()))))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for p in c.policies:
        ax.plot(grid, mean_curves[p.policy], style[p.policy], label=f"{p.policy} ({100 * p.ratio_mean:.1f}%)",
                linewidth=1.6)
    ax.plot(grid, np.maximum(0, 100 - grid), color="grey", linestyle=":", linewidth=1, label="all placed")
    ax.set_xlabel("arrived workload (% of GPU capacity)")
    ax.set_ylabel("unallocated GPU (% of capacity)")
    ax.set_xlim(0, 100 * c.inflate)
    ax.set_ylim(0, 100)
    ax.set_title(f"openb{_workload(c)}, {c.gpus} GPUs, {_seeds(c.seeds)}")
    ax.legend(fontsize=8, title="policy (allocated at the end)", title_fontsize=8, loc="lower left")
    ax.grid(alpha=0.3)
    inset = ax.inset_axes([0.58, 0.58, 0.38, 0.32])
    tail = grid >= 90 * c.inflate
    for p in c.policies:
        inset.plot(grid[tail], mean_curves[p.policy][tail], style[p.policy], linewidth=1.2)
    inset.axhline(bound, color="black", linewidth=0.8, linestyle="-.")
    inset.text(grid[tail][0], bound, " bound for any policy", fontsize=6, va="bottom")
    tail_top = max(float(mean_curves[p.policy][tail].min()) for p in c.policies)
    inset.set_ylim(0, max(12.0, np.ceil(tail_top + 2)))
    inset.set_title("the last 10% (unallocated %)", fontsize=7)
    inset.tick_params(labelsize=6)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out


def _workload(c: Comparison) -> str:
    return f" ({c.workload})" if c.variants else ""


def _seeds(seeds: list[int]) -> str:
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    contiguous = seeds == list(range(seeds[0], seeds[-1] + 1))
    return "seeds " + (f"{seeds[0]}-{seeds[-1]}" if contiguous else ",".join(map(str, seeds)))
