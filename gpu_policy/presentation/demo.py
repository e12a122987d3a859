"""`gpu-policy demo`: the seed problems solved on the embedded cluster; GPUs
attached and detached (the Dynamic Device Scaling talk); a preempted training run."""

from __future__ import annotations

from importlib import resources

from gpu_policy.model.apply import apply_plan
from gpu_policy.model.composition import describe
from gpu_policy.model import Scenario
from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.presentation.render import layout_before_after, queue_table
from gpu_policy.model.scenario_file import load_scenario

SEEDS = [
    ("Seed 1, the greedy team: team-a holds 30 of 40 GPUs, team-b waits for its 20",
     "seed1-greedy-team.yaml"),
    ("Seed 2, fragmentation: six 3-GPU jobs and one 8-GPU job on four 10-GPU nodes",
     "seed2-fragmentation.yaml"),
    ("Seed 2, as found running: team-a's jobs already spread out, team-b's 8-GPU job waits",
     "seed2b-fragmentation-running.yaml"),
    ("Seed 3, idle share: team-b uses 5 of its 20 GPUs; team-a borrows the rest",
     "seed3-idle-borrow.yaml"),
    ("Seed 3, continued: team-b comes back and the borrowed GPUs are reclaimed",
     "seed3b-owner-returns.yaml"),
]


COMPOSITION = [
    ("Composition, part 1: every GPU is busy and pod-b waits; the pool has 2 A100-80GB for node-2",
     "compose-pending-pod.yaml"),
    ("Composition, part 2: pod-b has finished; the GPU attached for it sits idle",
     "compose-idle-gpu.yaml"),
]


def _example(name: str) -> Scenario:
    with resources.as_file(resources.files("gpu_policy") / "examples" / name) as file:
        return load_scenario(file)


def composition_demo(config: PlannerConfig | None = None) -> str:
    """The talk's demo on the embedded cluster: a pod pending for lack of a GPU, a GPU
    attached, the pod running; then an idle GPU detached. Each part shows the plan's
    compositions and the cluster after they are carried out. The plans read simulated
    DCGM telemetry, as `gpu-policy plan` does on a scenario file: that is how an idle GPU
    is seen."""
    from gpu_policy.actions.cycle import plan_with_telemetry

    out = []
    for title, name in COMPOSITION:
        scenario = _example(name)
        result = plan_with_telemetry(scenario, config=config)
        after = apply_plan(scenario, result)
        out += [f"== {title}\n   ({name})\n", layout_before_after(scenario, result), ""]
        out += [f"   {describe(c)}{': ' + c.reason if c.reason else ''}" for c in result.compositions] or \
            ["   no GPU attached or detached"]
        out += [f"   {j.name}: {j.reason or j.action + ' on ' + j.replicas[0].node}"
                for j in result.jobs if j.action in ("start", "wait")]
        pools = ", ".join(f"{p.free} {p.model}" for p in after.composable.pools)
        nodes = ", ".join(f"{n.name} has {after.node(n.name).gpus} GPU{'' if after.node(n.name).gpus == 1 else 's'} "
                          f"({n.attached} attached)" for n in after.composable.nodes)
        out += [f"   after: {nodes}; the pool has {pools}", ""]
    return "\n".join(out)


def training_demo() -> str:
    """A checkpointed training run preempted halfway, then resumed: nothing lost or repeated."""
    import signal

    from gpu_policy.checkpoint import CheckpointPolicy, CheckpointStore, PreemptionGuard, run_training_steps
    from gpu_policy.checkpoint.example import accuracy, initial_state, make_step

    store = CheckpointStore("memory://gpu-policy-demo", keep_last=2)
    for info in store.list():
        store.delete(info.step)
    step, guard = make_step(), PreemptionGuard(grace_period_s=30)

    def step_until_evicted(state, k):
        if k == 120:  # the planner reclaims the borrowed GPUs: Kubernetes sends SIGTERM
            guard.trigger(signal.SIGTERM)
        return step(state, k)

    policy = CheckpointPolicy(mean_time_to_preemption_s=600)
    first = run_training_steps(step_until_evicted, initial_state, store, steps=200, guard=guard, policy=policy)
    second = run_training_steps(step, initial_state, store, steps=200, policy=policy)
    return "\n".join([
        "== Preemption-safe training: the example trainer (gpu-policy train-example)",
        f"   run 1: steps {first.first_step} -> {first.last_step}, SIGTERM; checkpoint of step "
        f"{first.last_step} saved in {first.seconds_saving * 1000:.1f} ms, well inside the 30 s grace period",
        f"   run 2: resumed at step {second.resumed_from} -> {second.last_step}; accuracy "
        f"{accuracy(store.load(store.latest())):.3f}; no step lost, none repeated",
        "",
    ])


def run_demo(config: PlannerConfig | None = None) -> str:
    """Plan each seed problem and show every node before and after, with the team table;
    then composition and checkpointed training."""
    out = []
    for title, name in SEEDS:
        scenario = _example(name)
        result = plan(scenario, config)
        s = result.summary
        out.append(f"== {title}\n   ({name})\n")
        out.append(layout_before_after(scenario, result))
        out.append("")
        out.append(queue_table(result))
        out.append(f"\n-> {s['starts']} started, {s['preemptions']} preempted, {s['moves']} moved, {s['waiting']} waiting; "
                   f"{s['empty_nodes_after']} empty node{'' if s['empty_nodes_after'] == 1 else 's'}, "
                   f"largest free block {s['largest_free_block_after']} "
                   f"({result.solver.backend}, {result.solver.seconds:.2f} s)")
        waits = [f"   {j.name} waits: {j.reason}" for j in result.jobs if j.action == "wait"]
        preempts = [f"   {j.name} preempted: {j.reason}" for j in result.jobs if j.action == "preempt"]
        moves = [f"   {j.name} {j.reason}" for j in result.jobs if j.action == "move"]
        out += preempts + moves + waits + [""]
    out.append(composition_demo(config))
    out.append(training_demo())
    return "\n".join(out)
