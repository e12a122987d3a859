"""gpu-policy's planner as a policy: each round, the cluster as a pipeline step
would observe it (nodes, teams as queues with their deserved quotas and minimum
runtime, running and waiting jobs with the work each would lose, its checkpoint
interval, save time, whether it saves on request and how long it has run or
waited, and `policy.reclaim_wait_s`) goes to `gpu_policy.plan`, and the plan's
starts, preemptions and consolidation moves are applied as they are, a stop that
waits for the victim's checkpoint (`evict_after_s`) included. Its victims are
stopped as the contract says (`stopping.CONTRACT`).

With a usage half-life (`--usage-half-life`), the scenario also carries the policy's
`usage_half_life_s` and `usage_weight` and each queue's `usage_gpu_h`, the GPU-hours its
team held so far, decayed with that half-life (`usage.UsageHistory`), as the controller
would keep them; `gpu-policy-no-history` is the same planner without them."""

from __future__ import annotations

import time

from gpu_policy.model import Job, Node, Policy, Queue, Scenario
from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.sim.teams.jobs import Decision, RoundView, SimJob
from gpu_policy.sim.teams.stopping import CONTRACT
from gpu_policy.sim.teams.trace import GPUS_PER_NODE


def default_config() -> PlannerConfig:
    """The planner's defaults (HiGHS, in-process) with a generous time budget, so that
    decisions do not depend on how busy the machine is."""
    return PlannerConfig(time_limit_s=120.0)


class PlannerPolicy:
    eviction = CONTRACT

    def __init__(self, config: PlannerConfig | None = None, history: bool = True):
        self.config = config or default_config()
        self.history = history
        self.name = "gpu-policy" if history else "gpu-policy-no-history"
        self.stats = {"plans": 0, "plan_seconds": 0.0, "slowest_plan_s": 0.0, "plans_at_time_limit": 0,
                      "solver": self.config.solver}

    def decide(self, view: RoundView) -> Decision:
        names = [f"node-{i}" for i in range(len(view.free))]
        index = {name: i for i, name in enumerate(names)}
        jobs = [_job(view, j, running=[names[n] for n in j.nodes], checkpoint_age_s=view.checkpoint_age(j),
                     running_for_s=view.running_for(j)) for j in view.running]
        jobs += [_job(view, j, waiting_for_s=view.waiting_for(j)) for j in view.waiting]
        counted = self.history and view.usage is not None and view.usage_half_life_s is not None
        usage = view.usage.gpu_hours(view.now) if counted else dict.fromkeys(view.quotas, 0.0)
        policy = Policy(reclaim_wait_s=view.reclaim_wait_s, usage_weight=view.usage_weight,
                        usage_half_life_s=view.usage_half_life_s if counted else None)
        scenario = Scenario(nodes=[Node(name, GPUS_PER_NODE) for name in names],
                            queues=[Queue(team, deserved=quota, min_runtime_s=view.min_runtime_s,
                                          usage_gpu_h=usage[team]) for team, quota in view.quotas.items()],
                            jobs=jobs, policy=policy, source=f"round at t={view.now:g}")
        began = time.perf_counter()
        result = plan(scenario, self.config)
        seconds = time.perf_counter() - began
        self.stats["plans"] += 1
        self.stats["plan_seconds"] += seconds
        self.stats["slowest_plan_s"] = max(self.stats["slowest_plan_s"], seconds)
        if "time limit" in result.solver.status:
            self.stats["plans_at_time_limit"] += 1
        decision = Decision()
        for d in result.jobs:
            nodes = tuple(index[r.node] for r in d.replicas)
            if d.action == "start":
                decision.start[d.name] = nodes
            elif d.action == "preempt":
                decision.preempt.append(d.name)
            elif d.action == "move":
                decision.move[d.name] = nodes
            if d.evict_after_s is not None:
                decision.evict_after[d.name] = d.evict_after_s
        return decision


def _job(view: RoundView, j: SimJob, **state) -> Job:
    """The job as the scenario describes it: its size, trainer and checkpoints, and `state`."""
    return Job(j.name, j.team, gpus=j.spec.gpus_per_replica, replicas=j.spec.replicas,
               submitted_at=j.spec.arrival_s, checkpoint_every_s=view.checkpoint_every_s,
               save_s=j.trainer.save_s, saves_on_request=j.trainer.saves_on_request, **state)
