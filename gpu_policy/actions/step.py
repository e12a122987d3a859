"""What one pipeline step needs from a plan: where to run, how many GPUs, go or not yet.

`decide_step` adds the step's job to the cluster snapshot (unless it is already
there), plans, and turns the job's decision into the settings a Kubernetes pod
needs: a node affinity, a node selector, a GPU count. Waiting, which observes the
cluster again each round, is `gpu_policy.actions.cycle.wait_for_step`; the CLI,
the KFP components and the Airflow operators call it, and no policy lives in them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from gpu_policy.errors import ScenarioError, job_path
from gpu_policy.kubernetes.names import GPU_TOLERATIONS, HOSTNAME_LABEL, JOB_LABEL, QUEUE_LABEL
from gpu_policy.model import Job, Scenario
from gpu_policy.model.plan import Plan
from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.model.signals import ClusterSignals


@dataclass
class StepDecision:
    can_start: bool
    reason: str
    nodes: list[str]
    gpu_count: int  # GPUs per replica for the pod's limit (a fraction still needs one GPU)
    node_affinity: dict  # V1NodeAffinity as JSON; {} when the step may not start
    node_selector: dict  # {kubernetes.io/hostname: node} for a one-replica step
    tolerations: list[dict]  # for the GPU nodes' usual taint
    pod_labels: dict  # for the step's pods: which job and queue they are, so observations find them
    plan: Plan
    attempts: int = 1
    outcomes: list = field(default_factory=list)  # what carrying out the plan did (gpu_policy.cluster.Outcome)

    def hold(self, reason: str) -> None:
        """Not yet after all (GPUs being attached are not there): no pod settings, `reason` says why."""
        self.can_start, self.reason, self.nodes = False, reason, []
        self.node_affinity, self.node_selector, self.tolerations = {}, {}, []

    def outputs(self) -> dict:
        """The plain outputs a pipeline passes on (everything but the plan itself)."""
        return {"can_start": self.can_start, "reason": self.reason, "nodes": self.nodes,
                "gpu_count": self.gpu_count, "node_affinity": self.node_affinity,
                "node_selector": self.node_selector, "tolerations": self.tolerations, "pod_labels": self.pod_labels,
                "attempts": self.attempts, "outcomes": [o.to_dict() for o in self.outcomes]}


def with_step_job(s: Scenario, job: Job) -> Scenario:
    """The scenario with the step's job in it (waiting), unless it is there already (the step
    observed again after its reservation). A job of the step's name that is another job
    (another queue, GPU count or gang size) is refused: planning one and reporting the
    other's settings would mix them."""
    for index, found in enumerate(s.jobs):
        if found.name == job.name:
            if (found.queue, found.gpus, found.replicas) != (job.queue, job.gpus, job.replicas):
                raise ScenarioError(s.source, job_path(index, found.name),
                                    f"the step's job has this name but is another job: the cluster's runs for "
                                    f"{found.queue} with {_shape(found)}, the step asks for {job.queue} with "
                                    f"{_shape(job)}; give the step a name of its own")
            return s
    if job.queue not in {q.name for q in s.queues}:
        raise ScenarioError(s.source, "queue", f"{job.queue!r} is not a queue of the cluster "
                                               f"({', '.join(q.name for q in s.queues)})")
    return dataclasses.replace(s, jobs=[*s.jobs, job])


def _shape(job: Job) -> str:
    return f"{job.gpus:g} GPUs" + (f" x {job.replicas} replicas" if job.replicas != 1 else "")


def decide_step(s: Scenario, job: Job, signals: ClusterSignals | None = None,
                config: PlannerConfig | None = None) -> StepDecision:
    scenario = with_step_job(s, job)
    result = plan(scenario, config, signals)
    decision = result.job(job.name)
    go = decision.action in ("start", "keep", "move")
    nodes = [r.node for r in decision.replicas] if go else []
    affinity = {}
    if nodes:
        affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": sorted(set(nodes))}]}]}}
    reason = decision.reason or (f"{decision.action} on {', '.join(nodes)}" if go else "")
    return StepDecision(
        can_start=go, reason=reason, nodes=nodes, gpu_count=max(1, math.ceil(job.gpus)),
        node_affinity=affinity, node_selector={HOSTNAME_LABEL: nodes[0]} if len(set(nodes)) == 1 else {},
        tolerations=list(GPU_TOLERATIONS) if go else [],
        pod_labels={JOB_LABEL: job.name.rpartition("/")[2], QUEUE_LABEL: job.queue}, plan=result,
    )
