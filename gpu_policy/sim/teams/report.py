"""The comparison as tables, as JSON, and as a plot: each team's GPUs over time
against its quota under two policies, and each team's queueing delay under all."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpu_policy.extras import pyplot
from gpu_policy.presentation.render import text_table
from gpu_policy.sim.teams.compare import TeamsComparison
from gpu_policy.sim.teams.metrics import HEAVY_BORROWING, LOSSES, PolicyMetrics, Stats, TeamMetrics
from gpu_policy.sim.teams.stopping import SAVE_BASE_S, SAVE_PER_GPU_S


def _h(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f}"


def _pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{digits}f}"


def describe(c: TeamsComparison) -> str:
    p = c.protocol
    d0, d1 = p.days
    ckpt = "never" if p.checkpoint_every_s is None else f"every {p.checkpoint_every_s:g} s"
    jobs = c.policies[0].jobs if c.policies else 0
    warmup = f"{p.warmup_days:g} day{'' if p.warmup_days == 1 else 's'} of warm-up"
    save = (f"{SAVE_BASE_S:g} s + {SAVE_PER_GPU_S:g} s per GPU" if p.save_s is None else f"{p.save_s:g} s")
    history = ("no usage history" if p.usage_half_life_s is None
               else f"usage half-life {p.usage_half_life_s:g} s, weight {p.usage_weight:g}")
    return (f"philly-vc: {p.nodes} nodes, {8 * p.nodes} GPUs; days {d0:g}-{d1:g} after {warmup}, "
            f"{jobs} jobs measured; rounds every {p.round_s:g} s; checkpoints {ckpt}, restart {p.restart_cost_s:g} s\n"
            f"saves take {save}, {100 * p.saves_on_request:g}% of trainers save on request (seed {p.seed}); "
            f"gpu-policy waits up to {p.reclaim_wait_s:g} s for a victim's checkpoint; "
            f"minimum runtime {p.min_runtime_s:g} s; {history}")


def comparison_table(c: TeamsComparison) -> str:
    rows = []
    for m in c.policies:
        worse = c.worse_than_static.get(m.policy)
        rows.append([m.policy, _pct(m.utilization), _pct(m.guarantee_share, 2),
                     "-" if m.longest_below_guarantee_s is None else f"{m.longest_below_guarantee_s / 60:.0f}",
                     "-" if m.jain is None else f"{m.jain:.3f}", _f(m.entitlement_error.mean),
                     _f(m.entitlement_error.worst), str(m.preemptions), str(m.moves),
                     f"{m.lost_gpu_hours:.1f}", *(f"{m.lost_split[kind]:.1f}" for kind in LOSSES),
                     _s(m.reclaim_wait.p50), _s(m.reclaim_wait.p95), _h(m.queueing.mean), _h(m.queueing.p50), _h(m.queueing.p95),
                     _h(m.jct.mean), _h(m.jct.p95), "-" if worse is None else str(len(worse))])
    table = text_table(["POLICY", "UTIL %", "GUARANTEE %", "LONGEST BELOW MIN", "JAIN", "ENTITLEMENT ERR MEAN",
                        "WORST", "PREEMPT", "MOVES",
                        "LOST GPU-H", "REDONE", "RESTARTS", "SAVING",
                        "RECLAIM WAIT P50 S", "P95 S", "QUEUE MEAN H", "P50", "P95", "JCT MEAN H", "P95",
                        "TEAMS WORSE THAN STATIC"], rows)
    return f"{describe(c)}\n{table}\n\n{team_table(c)}\n\n{surplus_table(c)}"


def team_table(c: TeamsComparison) -> str:
    """Mean queueing delay per team and policy, in hours; '*' marks worse than static."""
    teams = [t for t in c.quotas if any(m.teams[t].jobs for m in c.policies)]
    rows = []
    for team in teams:
        row = [team, str(c.quotas[team]), str(c.policies[0].teams[team].jobs)]
        for m in c.policies:
            mark = "*" if team in c.worse_than_static.get(m.policy, []) else ""
            row.append(_h(m.teams[team].queueing.mean) + mark)
        rows.append(row)
    header = ["TEAM", "QUOTA", "JOBS"] + [m.policy for m in c.policies]
    return "mean queueing delay per team, hours (* worse than static)\n" + text_table(header, rows)


def surplus_table(c: TeamsComparison) -> str:
    """GPU-hours each team held beyond its quota, first week / second week, per policy;
    '*' marks a team that borrowed heavily in the first week under that policy."""
    teams = [t for t in c.quotas if any(m.teams[t].jobs for m in c.policies)]
    rows = []
    for team in teams:
        row = [team, str(c.quotas[team])]
        for m in c.policies:
            weeks = m.teams[team].surplus_gpu_h
            second = f"{weeks[1]:.0f}" if len(weeks) > 1 else "-"
            row.append(f"{weeks[0]:.0f} / {second}" + ("*" if team in m.borrowed_heavily else ""))
        rows.append(row)
    header = ["TEAM", "QUOTA"] + [m.policy for m in c.policies]
    return (f"GPU-hours held beyond the quota, first week / second week (* borrowed heavily in the first: "
            f"beyond its quota by {100 * HEAVY_BORROWING:g}% of the GPUs or more on average)\n"
            + text_table(header, rows))


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _stats(prefix: str, s: Stats) -> dict:
    return {f"mean_{prefix}_s": _round(s.mean), f"p50_{prefix}_s": _round(s.p50), f"p95_{prefix}_s": _round(s.p95)}


def _round(x: float | None, digits: int = 1) -> float | None:
    return None if x is None else round(x, digits)


def _team_json(m: TeamMetrics, worse: bool | None) -> dict:
    return {
        "quota": m.quota, "jobs": m.jobs, "finished": m.finished, "unstarted": m.unstarted,
        "utilization": round(m.utilization, 6), "mean_gpus": round(m.mean_gpus, 3),
        "mean_fair_share": round(m.mean_fair_share, 3),
        "allocation_to_fair_share": _round(m.allocation_to_fair_share, 6),
        "entitlement_error": _round(m.entitlement_error, 6),
        "surplus_gpu_h_by_week": [round(x, 3) for x in m.surplus_gpu_h],
        "guarantee_share": _round(m.guarantee_share, 6), "longest_below_guarantee_s": _round(m.longest_below_guarantee_s),
        "worse_than_static": worse, "preemptions": m.preemptions, "moves": m.moves,
        "lost_gpu_hours": round(m.lost_gpu_hours, 3), **_stats("queueing", m.queueing), **_stats("jct", m.jct),
    }


def _policy_json(m: PolicyMetrics, worse: list[str] | None, wall_s: float) -> dict:
    return {
        "utilization": round(m.utilization, 6), "guarantee_share": _round(m.guarantee_share, 6),
        "longest_below_guarantee_s": _round(m.longest_below_guarantee_s), "teams_worse_than_static": worse,
        "jain": _round(m.jain, 6),
        "entitlement_error": {"mean": _round(m.entitlement_error.mean, 6), "worst": _round(m.entitlement_error.worst, 6)},
        "borrowed_heavily": {team: {"first_week_surplus_gpu_h": round(b.first_week_gpu_h, 3),
                                    "second_week_surplus_gpu_h": _round(b.second_week_gpu_h, 3)}
                             for team, b in m.borrowed_heavily.items()},
        "preemptions": m.preemptions, "moves": m.moves,
        "lost_gpu_hours": round(m.lost_gpu_hours, 3),
        "lost_gpu_hours_split": {kind: round(m.lost_split[kind], 3) for kind in LOSSES},
        "reclaim_wait_s": {"p50": _round(m.reclaim_wait.p50), "p95": _round(m.reclaim_wait.p95)},
        "victims_within_fair_share": m.victims_within_share,
        "restarts_within_two_rounds": m.quick_restarts, **_stats("queueing", m.queueing), **_stats("jct", m.jct),
        "jobs": m.jobs, "finished": m.finished, "unstarted": m.unstarted, "rounds": m.rounds,
        "end_day": round(m.end_s / 86_400, 3), "stopped_at_drain_limit": m.horizon_reached,
        "policy_stats": m.policy_stats, "wall_s": round(wall_s, 2),
        "teams": {team: _team_json(t, None if worse is None else team in worse) for team, t in m.teams.items()},
    }


def comparison_json(c: TeamsComparison) -> dict:
    p = c.protocol
    return {
        "protocol": {"nodes": p.nodes, "gpus": 8 * p.nodes, "days": list(p.days), "warmup_days": p.warmup_days,
                     "checkpoint_every_s": p.checkpoint_every_s, "restart_cost_s": p.restart_cost_s,
                     "round_s": p.round_s, "save_s": p.save_s, "saves_on_request": p.saves_on_request,
                     "seed": p.seed, "reclaim_wait_s": p.reclaim_wait_s, "min_runtime_s": p.min_runtime_s,
                     "usage_half_life_s": p.usage_half_life_s, "usage_weight": p.usage_weight},
        "quotas": c.quotas,
        "policies": {m.policy: _policy_json(m, c.worse_than_static.get(m.policy), c.wall_s[m.policy])
                     for m in c.policies},
    }


def plot_pair(c: TeamsComparison) -> tuple[PolicyMetrics, ...]:
    """The two policies whose allocations the plot draws: static (held to the quota)
    and gpu-policy (lending what is idle) when both ran, else the first two."""
    by_name = {m.policy: m for m in c.policies}
    if "static" in by_name and "gpu-policy" in by_name:
        return by_name["static"], by_name["gpu-policy"]
    return tuple(c.policies[:2])


def _plot_stops(c: TeamsComparison, lost, waits) -> None:
    """What stops cost each policy: lost GPU-hours by kind (stacked), and reclaim waits."""
    names = [m.policy for m in c.policies]
    bottom = np.zeros(len(names))
    for kind in LOSSES:
        hours = np.array([m.lost_split[kind] for m in c.policies])
        lost.barh(names, hours, left=bottom, label=kind)
        bottom += hours
    lost.set_xlabel("GPU-hours lost to preemptions and moves", fontsize=8)
    lost.tick_params(labelsize=7)
    lost.legend(fontsize=7)
    lost.grid(axis="x", alpha=0.3)
    y = np.arange(len(names))
    for k, stat in enumerate(("p50", "p95")):
        waits.barh(y + (k - 0.5) * 0.4, [getattr(m.reclaim_wait, stat) or 0 for m in c.policies], 0.4, label=stat)
    waits.set_yticks(y, names, fontsize=7)
    waits.set_xlabel("reclaim wait (s)", fontsize=8)
    waits.tick_params(labelsize=7)
    waits.legend(fontsize=7)
    waits.grid(axis="x", alpha=0.3)


def plot_comparison(c: TeamsComparison, path: str | Path) -> Path:
    plt = pyplot("--plot")
    pair = plot_pair(c)
    teams = [t for t in c.quotas if any(m.teams[t].jobs or m.teams[t].mean_gpus for m in c.policies)]
    cols = 3
    rows = -(-len(teams) // cols)
    fig = plt.figure(figsize=(12, 2.1 * rows + 7))
    grid = fig.add_gridspec(rows + 2, cols, height_ratios=[1] * rows + [1.9, 1.6])
    d0 = c.protocol.days[0]
    colours = {m.policy: col for m, col in zip(pair, ("tab:orange", "tab:blue"))}
    for i, team in enumerate(teams):
        ax = fig.add_subplot(grid[i // cols, i % cols])
        index = list(c.quotas).index(team)
        days = d0 + (np.arange(pair[0].held_bins.shape[1]) + 0.5) * pair[0].bin_s / 86_400
        ax.fill_between(days, pair[-1].demand_bins[index], color="0.88", step="mid", linewidth=0,
                        label=f"demand ({pair[-1].policy})")
        for m in pair:
            ax.plot(days, m.held_bins[index], color=colours[m.policy], linewidth=0.9, label=m.policy)
        ax.axhline(c.quotas[team], color="black", linestyle="--", linewidth=0.9, label="quota")
        ax.set_title(f"{team} (quota {c.quotas[team]})", fontsize=8)
        ax.tick_params(labelsize=7)
        top = max(c.quotas[team], max(float(m.held_bins[index].max()) for m in pair))
        ax.set_ylim(0, 1.15 * top + 1)
        if i == 0:
            ax.legend(fontsize=6, loc="upper right")
        if i % cols == 0:
            ax.set_ylabel(f"GPUs (mean per {pair[0].bin_s / 3600:g} h)", fontsize=7)
        if i // cols == rows - 1:
            ax.set_xlabel("day", fontsize=7)
    bars = fig.add_subplot(grid[rows, :])
    width = 0.8 / len(c.policies)
    x = np.arange(len(teams))
    for k, m in enumerate(c.policies):
        hours = [(m.teams[t].queueing.mean or 0) / 3600 for t in teams]
        bars.bar(x + (k - (len(c.policies) - 1) / 2) * width, hours, width, label=m.policy)
    bars.set_yscale("symlog", linthresh=0.1)
    bars.set_xticks(x, teams, fontsize=7)
    bars.set_ylabel("mean queueing delay (h)", fontsize=8)
    bars.legend(fontsize=7, ncol=len(c.policies))
    bars.grid(axis="y", alpha=0.3)
    _plot_stops(c, fig.add_subplot(grid[rows + 1, :2]), fig.add_subplot(grid[rows + 1, 2]))
    fig.suptitle(f"{describe(c)}\nGPUs held per team: {' vs '.join(m.policy for m in pair)}", fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
