"""gpu-policy's planner as a policy: each round the simulated cluster is a scenario (its
nodes with their block and rack labels and the `topology:` levels, one queue, the running
jobs where they run and the waiting ones with their topology requests) and the plan's
starts, moves and preemptions are applied as they are."""

from __future__ import annotations

import time

from gpu_policy.model import Job, JobTopology, Queue, Scenario
from gpu_policy.planner import PlannerConfig, plan
from gpu_policy.sim.topology.cluster import LEVELS
from gpu_policy.sim.topology.policy import Decision, View
from gpu_policy.sim.topology.workload import Gang

QUEUE = "cluster"


class PlannerPolicy:
    name = "gpu-policy"

    def __init__(self, config: PlannerConfig | None = None):
        # a generous budget, so that decisions do not depend on how busy the machine is
        self.config = config or PlannerConfig(time_limit_s=120.0)
        self.seconds: list[float] = []  # each plan's
        self.cut_off = 0  # plans that reached the time limit

    @property
    def stats(self) -> dict:
        return {"plans": len(self.seconds), "plan_seconds": sum(self.seconds),
                "slowest_plan_s": max(self.seconds, default=0.0), "plans_at_time_limit": self.cut_off}

    def decide(self, view: View) -> Decision:
        result = self._plan(scenario(view))
        decision = Decision()
        index = {f"node-{n}": n for n in range(view.cluster.shape.nodes)}
        for d in result.jobs:
            nodes = tuple(index[r.node] for r in d.replicas)
            if d.action == "start":
                decision.start[d.name] = nodes
            elif d.action == "move":
                decision.move[d.name] = nodes
            elif d.action == "preempt":
                decision.preempt.append(d.name)
        return decision

    def _plan(self, s: Scenario):
        began = time.perf_counter()
        result = plan(s, self.config)
        self.seconds.append(time.perf_counter() - began)
        self.cut_off += "time limit" in result.solver.status
        return result


def scenario(view: View) -> Scenario:
    """The round's cluster as a scenario."""
    shape = view.cluster.shape
    jobs = [_job(g, running=[shape.node_name(n) for n in nodes], running_for_s=view.now - g.arrival_s)
            for g, nodes in view.running.values()]
    jobs += [_job(g, waiting_for_s=view.now - g.arrival_s) for g in view.waiting]
    return Scenario(nodes=shape.scenario_nodes(), queues=[Queue(QUEUE, deserved=shape.total_gpus)], jobs=jobs,
                    topology=list(LEVELS), source=f"round at t={view.now:g}")


def _job(g: Gang, **state) -> Job:
    topology = JobTopology(g.required, g.preferred) if g.required or g.preferred else None
    return Job(g.name, QUEUE, gpus=g.gpus, replicas=g.replicas, submitted_at=g.arrival_s, topology=topology, **state)
