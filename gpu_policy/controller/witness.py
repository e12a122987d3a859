"""What the controller hears from its actuator (gpu_policy.kubernetes.write.actuator.Witness).

Each write's answer goes into the informer cache at once: the next round may come before
the watch brings it, and must not ask, reserve or release again. What was done is logged
and counted, and each released pod is remembered until it is bound (the controller reports
one not bound in time). Each job a plan starts on its victims' GPUs is remembered from the
first such plan until its release, which the reclaim wait counts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gpu_policy.controller.cache import CONFIG_MAPS, PODS, Cache
from gpu_policy.controller.composition import RequestTracker
from gpu_policy.controller.metrics import Metrics
from gpu_policy.kubernetes.clocks import Clocks
from gpu_policy.kubernetes.read.pods import PodRef, PodView
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.kubernetes.write.actuator import Witness
from gpu_policy.model.cluster import Outcome
from gpu_policy.model.plan import STOPS, Plan
from gpu_policy.planner import PlannerConfig
from gpu_policy.planner.rules.victims import lost_work

log = logging.getLogger(__name__)


@dataclass
class Released:
    pod: PodRef
    node: str
    at: float  # monotonic time of the release
    reported: bool = False


class ControllerWitness(Witness):
    """The controller's: its cache, its metrics, its released pods."""

    def __init__(self, cache: Cache, metrics: Metrics, clocks: Clocks, config: PlannerConfig | None = None):
        self.cache, self.metrics, self.clocks = cache, metrics, clocks
        self.config = config or PlannerConfig()
        self.requests = RequestTracker(cache, metrics)
        #: pod uid -> its release, until it is bound or gone (the controller checks them each turn)
        self.unbound: dict[str, Released] = {}
        #: the jobs whose releases the last round carried over to the next (its request budget was spent)
        self.carried: list[str] = []
        #: a job a plan starts on its victims' GPUs -> when the first such plan acted (wall), until its release
        self.reclaimed_at: dict[str, float] = {}
        self._claimant_of: dict[str, str] = {}  # gated pod uid -> that job

    def request_written(self, name: str, answer: dict) -> None:
        self.requests.seen(name, answer)

    def acted(self, plan: Plan, snap: Snapshot, outcomes: list[Outcome]) -> None:
        self.requests.count(snap, outcomes)
        planned = {j.name: j for j in plan.jobs}  # a broken gang, evicted whole, is no job of the plan
        jobs = {j.name: j for j in snap.scenario.jobs}
        for outcome in outcomes:
            log.info("%s", outcome.line())
            if (outcome.result == "done" and outcome.action in STOPS and outcome.job in planned
                    and outcome.job in jobs):
                d = planned[outcome.job]
                if d.action == "preempt":
                    self.metrics.preemptions.labels(d.queue, d.code).inc()
                else:
                    self.metrics.moves.labels(d.queue).inc()
                loss = lost_work(jobs[d.name], self.config.default_checkpoint_age_s, snap.scenario.policy.reclaim_wait_s)
                self.metrics.lost_work.observe(loss.gpu_seconds)
        waiting = {uid for refs in snap.gated.values() for uid in (r.uid for r in refs)}
        for uid in set(self._claimant_of) - waiting:  # released elsewhere, or deleted while gated
            self.reclaimed_at.pop(self._claimant_of.pop(uid), None)

    def pod_annotated(self, answer: dict) -> None:
        self.cache.apply(PODS, "MODIFIED", answer)  # seen at once: the next round does not ask again

    def checkpoint_request_ended(self, job: str, result: str) -> None:
        self.metrics.checkpoint_requests.labels(result).inc()

    def reclaiming(self, job: str, pods: list[PodRef]) -> None:
        if not pods:  # nothing of it is gated: no release of ours ends its wait, so none is measured
            return
        self.reclaimed_at.setdefault(job, self.clocks.wall())
        for ref in pods:
            self._claimant_of[ref.uid] = job

    def reservations_written(self, config_map: dict | None) -> None:
        if config_map is not None:  # seen at once: the round's next write starts from it
            self.cache.apply(CONFIG_MAPS, "MODIFIED", config_map)

    def carried_over(self, jobs: list[str]) -> None:
        self.carried = jobs

    def released(self, pod: PodRef, node: str, answer: dict) -> None:
        self.cache.apply(PODS, "MODIFIED", answer)  # seen at once: the next round does not release it again
        self.unbound[pod.uid] = Released(pod, node, self.clocks.monotonic())
        claimant = self._claimant_of.pop(pod.uid, None)
        if claimant in self.reclaimed_at:  # a gang's first pod released: its wait is over
            self.metrics.reclaim_wait.observe(max(0.0, self.clocks.wall() - self.reclaimed_at.pop(claimant)))
        created = self.cache.views[PODS].get((pod.namespace, pod.name))
        if isinstance(created, PodView):
            self.metrics.admission_wait.observe(max(0.0, self.clocks.wall() - created.created))
