"""The per-team fair-share report: a Markdown table and, with matplotlib, a bar chart."""

from __future__ import annotations

from pathlib import Path

from gpu_policy.model.plan import Plan
from gpu_policy.presentation.render import gpus_allocated, queue_table


def write_report(plan: Plan, folder: str | Path, title: str = "GPU fair share") -> list[Path]:
    """Write report.md (the per-team table and summary) and fair_share.png; return the paths.

    The plot needs matplotlib (the ``[report]`` extra); without it only the table is written.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    s = plan.summary
    lines = [f"# {title}", "", "```", queue_table(plan), "```", "",
             f"{gpus_allocated(s)}; "
             f"{s['starts']} starts, {s['preemptions']} preemptions, {s['waiting']} waiting.", ""]
    waits = [f"- {j.name} ({j.queue}) waits: {j.reason}" for j in plan.jobs if j.action == "wait"]
    if waits:
        lines += ["Waiting:", *waits, ""]
    report = out / "report.md"
    report.write_text("\n".join(lines))
    written = [report]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    teams = [q for q in plan.queues if not any(c.parent == q.name for c in plan.queues)]
    x = list(range(len(teams)))
    fig, ax = plt.subplots(figsize=(max(5.5, 1.5 * len(teams)), 3.8))
    ax.bar([i - 0.2 for i in x], [q.allocated_before for q in teams], width=0.4, label="held before", color="#b7c4d1")
    ax.bar([i + 0.2 for i in x], [q.allocated_after for q in teams], width=0.4, label="after the plan", color="#2f5d87")
    ax.scatter(x, [q.fair_share for q in teams], marker="_", s=900, linewidths=2.5, color="black", label="fair share",
               zorder=3)
    ax.scatter(x, [q.deserved for q in teams], marker="_", s=900, linewidths=1.5, color="#c0392b", label="deserved",
               zorder=3, linestyle="--")
    ax.set_xticks(x, [q.name for q in teams])
    ax.set_ylabel("GPUs")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4, fontsize=8, frameon=False)
    fig.tight_layout()
    png = out / "fair_share.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return written + [png]
