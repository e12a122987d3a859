"""`gpu-policy demo`: the three seed problems, solved on the embedded cluster."""

from __future__ import annotations

from importlib import resources

from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.render import layout_before_after, queue_table
from gpu_policy.scenario import load_scenario

SEEDS = [
    ("Seed 1, the greedy team: team-a holds 30 of 40 GPUs, team-b waits for its 20",
     "seed1-greedy-team.yaml"),
    ("Seed 2, fragmentation: six 3-GPU jobs and one 8-GPU job on four 10-GPU nodes",
     "seed2-fragmentation.yaml"),
    ("Seed 3, idle share: team-b uses 5 of its 20 GPUs; team-a borrows the rest",
     "seed3-idle-borrow.yaml"),
    ("Seed 3, continued: team-b comes back and the borrowed GPUs are reclaimed",
     "seed3b-owner-returns.yaml"),
]


def run_demo(config: PlannerConfig | None = None) -> str:
    """Plan each seed problem and show every node before and after, with the team table."""
    out = []
    for title, name in SEEDS:
        path = resources.files("gpu_policy") / "examples" / name
        with resources.as_file(path) as file:
            scenario = load_scenario(file)
        result = plan(scenario, config)
        s = result.summary
        out.append(f"== {title}\n   ({name})\n")
        out.append(layout_before_after(scenario, result))
        out.append("")
        out.append(queue_table(result))
        out.append(f"\n-> {s['starts']} started, {s['preemptions']} preempted, {s['waiting']} waiting; "
                   f"{s['empty_nodes_after']} empty nodes, largest free block {s['largest_free_block_after']} "
                   f"({result.solver.backend}, {result.solver.seconds:.2f} s)")
        waits = [f"   {j.name} waits: {j.reason}" for j in result.jobs if j.action == "wait"]
        preempts = [f"   {j.name} preempted: {j.reason}" for j in result.jobs if j.action == "preempt"]
        out += preempts + waits + [""]
    return "\n".join(out)
