"""The bodies of the KFP components: parse inputs, call the core, write outputs.

KFP serialises each function's source into the component, so every import is
inside the body. The logic lives in `gpu_policy.step`, `gpu_policy.telemetry`
and `gpu_policy.checkpoint`.
"""

from typing import NamedTuple

from kfp.dsl import Artifact, Input, Output


def collect_gpu_telemetry(scenario_yaml: str, telemetry: Output[Artifact], prometheus_url: str = "",
                          window_s: float = 600.0) -> str:
    """Collect DCGM GPU telemetry and judge it: idle, unhealthy and busy GPUs, memory headroom.

    Args:
        scenario_yaml: The cluster snapshot as scenario YAML (gpu-policy's scenario format);
            its telemetry section is simulated when no Prometheus URL is given.
        telemetry: The per-GPU and per-job signals as JSON, for plan_gpu_allocation.
        prometheus_url: A Prometheus that scrapes dcgm-exporter; empty for simulated telemetry.
        window_s: Seconds of telemetry judged (idle means below 5% for the whole window).

    Returns:
        Output: One line: what was seen, or why monitoring is unavailable (never a failure).
    """
    import json

    import yaml

    from gpu_policy import parse_scenario
    from gpu_policy.telemetry import TelemetrySettings, dcgm_source, observe

    scenario = parse_scenario(yaml.safe_load(scenario_yaml), "scenario_yaml")
    settings = TelemetrySettings(window_s=window_s)
    signals, warning = observe(scenario, dcgm_source(prometheus_url or None, scenario, settings), settings)
    if signals is None:
        data, summary = {"unavailable": warning}, warning
    else:
        data, summary = signals.to_dict(), json.dumps(signals.describe())
    with open(telemetry.path, "w") as f:
        json.dump(data, f)
    return summary


def plan_gpu_allocation(scenario_yaml: str, job_name: str, queue: str, gpus: float, plan: Output[Artifact],
                        telemetry: Input[Artifact] = None, replicas: int = 1, priority: int = 50,
                        max_wait_s: float = 0.0, poll_interval_s: float = 30.0) -> NamedTuple(
        "StepPlan", [("node_affinity", dict), ("gpu_count", int), ("can_start", bool), ("reason", str)]):
    """Plan GPUs for the next training step: fair share, reclaim and packing as one integer program.

    Args:
        scenario_yaml: The cluster snapshot as scenario YAML (the embedded simulated cluster).
        job_name: The training job this step belongs to; added to the snapshot as waiting unless there.
        queue: The team (queue) the job runs for.
        gpus: GPUs per replica; below 1 is a fraction of one GPU.
        plan: The whole Plan as JSON.
        telemetry: Signals from collect_gpu_telemetry; without them the plan uses allocations only.
        replicas: Replicas of the job (a gang: all start or none).
        priority: The job's priority (100 and above is non-preemptible).
        max_wait_s: Seconds to keep re-planning while the step may not start (0: decide once).
        poll_interval_s: Seconds between re-plans while waiting.

    Returns:
        node_affinity: Node affinity JSON for the training step (kfp-kubernetes add_node_affinity_json).
        gpu_count: GPUs per replica for the training step's accelerator limit.
        can_start: Whether the step may start now.
        reason: Why it waits, or where it starts.
    """
    import json
    from collections import namedtuple

    import yaml

    from gpu_policy import Job, parse_scenario
    from gpu_policy.step import wait_for_step
    from gpu_policy.telemetry import ClusterSignals

    scenario = parse_scenario(yaml.safe_load(scenario_yaml), "scenario_yaml")
    signals, warning = None, None
    if telemetry is not None:
        with open(telemetry.path) as f:
            data = json.load(f)
        signals = None if "unavailable" in data else ClusterSignals.from_dict(data)
        warning = data.get("unavailable")
    job = Job(name=job_name, queue=queue, gpus=gpus, replicas=replicas, priority=priority)
    decision = wait_for_step(lambda: (scenario, signals), job, max_wait_s, poll_interval_s)
    result = decision.plan.to_dict()
    if warning:
        result["warnings"].append(warning)
    with open(plan.path, "w") as f:
        json.dump(result, f, indent=2)
    outputs = namedtuple("StepPlan", ["node_affinity", "gpu_count", "can_start", "reason"])
    return outputs(decision.node_affinity, decision.gpu_count, decision.can_start, decision.reason)


def checkpointed_train_step(checkpoint_uri: str, total_steps: int, steps_per_run: int, gpu_count: int = 0,
                            step_function: str = "gpu_policy.checkpoint.example:example_step",
                            init_function: str = "gpu_policy.checkpoint.example:initial_state",
                            grace_period_s: float = 30.0, keep_last: int = 3) -> NamedTuple(
        "TrainStep", [("step_reached", int), ("checkpoint_uri", str), ("preempted", bool)]):
    """Train for a budget of steps, resuming from the newest checkpoint, safe against preemption.

    Args:
        checkpoint_uri: Where checkpoints live: a path (on a PVC) or an fsspec URL (s3://, gs://).
        total_steps: Steps of the whole training; a step that reaches it only confirms.
        steps_per_run: Most steps this pipeline step runs.
        gpu_count: GPUs the plan granted this step (logged; the pod's accelerator limit carries it).
        step_function: 'module:function' of the training step, called as f(state, k) -> state.
        init_function: 'module:function' returning the state before step 0.
        grace_period_s: Seconds between SIGTERM and SIGKILL (the pod's terminationGracePeriodSeconds).
        keep_last: Checkpoints to keep.

    Returns:
        step_reached: Steps done when this pipeline step ended.
        checkpoint_uri: Where the checkpoints are.
        preempted: Always False here: a preempted step saves, then exits 128 + the signal so that a retry resumes it.
    """
    from collections import namedtuple

    from gpu_policy.checkpoint.budget import run_step_budget

    summary = run_step_budget(checkpoint_uri, total_steps, steps_per_run, step_function, init_function,
                              grace_period_s, keep_last)
    print(f"steps {summary.first_step} -> {summary.last_step} on {gpu_count} planned GPU(s); "
          f"checkpoints written: {summary.checkpoints_written}")
    if summary.preempted:
        raise SystemExit(128 + summary.signal)
    outputs = namedtuple("TrainStep", ["step_reached", "checkpoint_uri", "preempted"])
    return outputs(summary.last_step, checkpoint_uri, False)


def step_may_start(can_start: bool) -> bool:
    """Pass plan_gpu_allocation's can_start on as this task's single output, for a dsl.If.

    kfp.local 2.17 evaluates a dsl.If only on a task's single output, not on one
    field of a NamedTuple; this pick component keeps the pipeline runnable locally.

    Args:
        can_start: plan_gpu_allocation's can_start output.

    Returns:
        Output: The same value.
    """
    return can_start
