"""Admission: release the gated jobs a plan starts, and say on each gated pod why it waits
(spec "Admission"; docs/kubernetes.md, "The controller").

The last part of acting on a plan (gpu_policy.kubernetes.write.actuator), in this order:
1. every gated job is sorted out: a reserved job's pods still gated go onto the reserved
   nodes its released pods do not hold; a job the plan starts goes onto the plan's places,
   unless it runs on GPUs still being attached (`WaitingForComposition`); the others wait
   with the plan's reason, or stays gated for a victim's checkpoint (`WaitingForCheckpoint`,
   gpu_policy.kubernetes.write.checkpoint_first). Every pod of a job is checked before any is patched;
2. the jobs this round's request budget (`max_requests_per_round`) holds are released this
   round, in order, each counted as a patch and an Admitted Event per pod; the rest are carried
   over to the next round, which comes at once (a burst is work, not a failure: no Event, no
   warning, nothing lost; the budget is there for a server that makes a round loop);
3. the placements of the gangs about to be released are written as reservations, in one
   write, before the first release, so a gang released part way holds all its nodes;
4. the release patches of every job at once (gpu_policy.kubernetes.write.release), at most
   `max_requests_in_flight` out, each fenced;
5. the Admitted Events, then an Event on each pod that still waits, the pods the look left
   out included (releases first: they are what pods wait for, Events are not), side by side too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from gpu_policy.kubernetes.read.isolate import LEFT_OUT, ObjectWarning
from gpu_policy.kubernetes.read.pods import PodRef
from gpu_policy.kubernetes.read.snapshot import Snapshot
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.write.events import NOT_ADMITTED, EventWriter
from gpu_policy.kubernetes.write.inflight import InFlight
from gpu_policy.kubernetes.write.release import PodRelease, release_patches, send_releases
from gpu_policy.kubernetes.write.reservations import reservation_for, write_reservations
from gpu_policy.model.cluster import Outcome, WaitReason, Waiting
from gpu_policy.model.plan import JobDecision, Placement, Plan

log = logging.getLogger(__name__)


@dataclass
class Release:
    """A gated job released this round: its pods, their patches, what its Admitted Events add
    (`share`: its queue's GPUs before and after the plan), and the decision to reserve first
    when it is a gang not reserved yet."""

    job: str
    queue: str
    pods: list[PodRef]
    patches: list[PodRelease]
    share: str
    gang: JobDecision | None


@dataclass
class Sorted:
    """The gated jobs of one round: those released, those that wait."""

    releases: list[Release]
    waiting: list[Waiting]


class Admission:
    """Releases gated jobs and tells gated pods why they wait; every write runs `fence` first.
    `read_pod` gives a pod's object as it is now (the controller's cache, or a GET), and
    `read_config_map` the reservations ConfigMap before a gang's reservation is written; `witness`
    hears of each release and of the gangs' reservation (gpu_policy.kubernetes.write.actuator.Witness),
    `expires_at()` is when a reservation written now lapses; the releases and Events go out
    side by side through `in_flight`."""

    def __init__(self, client: KubeClient, fence: Callable[[], None], events: EventWriter,
                 read_pod: Callable[[str, str], dict | None], witness, expires_at: Callable[[], float],
                 in_flight: InFlight, read_config_map: Callable[[str], dict | None]):
        self.client, self.fence, self.events, self.read_pod = client, fence, events, read_pod
        self.witness, self.expires_at, self.in_flight = witness, expires_at, in_flight
        self.read_config_map = read_config_map

    def admit(self, plan: Plan, snap: Snapshot, bad: list[ObjectWarning], attaching: list[Outcome],
              execute: bool, held: dict[str, WaitReason] | None = None) -> tuple[list[Outcome], list[Waiting]]:
        """Release what `plan` starts, or (a dry run) say what would be; `attaching`: this round's
        attach outcomes (a failed one is the reason its job waits); `held`: the jobs it starts that
        wait for their victims' checkpoints, and why."""
        found = self.sort(plan, snap, attaching, held or {})
        if not execute:
            return [Outcome(r.job, "release", "dry run", _places(r), [str(p) for p in r.pods])
                    for r in found.releases], found.waiting
        releases, carried = self._this_round(found.releases)
        self._reserve_gangs([r.gang for r in releases if r.gang is not None], snap)
        outcomes, admitted = self._release(releases, found.waiting)
        self.events.write_many([(ref, "GpuPolicyAdmitted", note, "Normal", "Admit") for ref, note in admitted],
                               self.in_flight)
        found.waiting += self._left_out(bad)
        self._tell_waiting(found.waiting, carried)
        if carried:
            self.witness.carried_over([w.job for w in carried])
        return outcomes, found.waiting + carried

    def sort(self, plan: Plan, snap: Snapshot, attaching: list[Outcome],
             held: dict[str, WaitReason] | None = None) -> Sorted:
        """Each gated job: released (its patches built, every pod checked), or waiting and why
        (`held`: the jobs the plan starts that wait for their victims' checkpoints)."""
        held = held or {}
        decided = {d.name: d for d in plan.jobs}
        jobs = {j.name: j for j in snap.scenario.jobs}
        shares = {q.name: f"; {q.name} {q.allocated_before:g} -> {q.allocated_after:g} GPUs" for q in plan.queues}
        found = Sorted([], [])
        for name, refs in snap.gated.items():
            d = decided.get(name)
            queue = d.queue if d is not None else (jobs[name].queue if name in jobs else "")
            reservation = snap.reservations.get(name)
            if reservation is not None and d is not None and d.stops:  # the plan gives its GPUs away
                patches = WaitReason(d.code, f"its reservation is given back: {d.reason}")
            elif reservation is not None:
                places = _unheld([Placement(n, reservation.gpus, list(ix)) for n, ix in
                                  zip(reservation.nodes, reservation.gpu_indices or [[]] * len(reservation.nodes))],
                                 snap.held.get(name, []))
                patches, share = release_patches(refs, places, reservation.gpus < 1, self.read_pod), reservation.queue
            elif d is not None and d.action == "start":
                patches = held.get(name) or waits_for_composition(d, snap, attaching) or \
                    release_patches(refs, d.replicas, jobs[name].is_fractional, self.read_pod)
                share = d.queue
            else:
                patches = _waiting_reason(name, d, snap)
            if isinstance(patches, WaitReason):
                found.waiting.append(Waiting(name, queue, refs, patches))
            else:
                gang = d if len(patches) > 1 and reservation is None else None
                found.releases.append(Release(name, queue, refs, patches, shares.get(share, ""), gang))
        return found

    def _reserve_gangs(self, starts: list[JobDecision], snap: Snapshot) -> None:
        """Write the placement of every gang about to be released as a reservation, in one write,
        before its first pod is released: a gang released part way (a refused patch, the API
        server or the lease lost, this process killed) is then held whole in every snapshot, by
        any replica, until the next round releases the rest onto the same nodes."""
        jobs = {j.name: j for j in snap.scenario.jobs}
        gangs = [reservation_for(jobs[d.name], d, self.expires_at()) for d in starts]
        for r in gangs:
            r.check()
        if gangs:
            written = write_reservations(self.client, gangs, set(), self.fence, self.read_config_map)
            self.witness.reservations_written(written)

    def _this_round(self, releases: list[Release]) -> tuple[list[Release], list[Waiting]]:
        """The releases this round's request budget holds, in order (a patch and an Admitted Event
        per pod, and the gangs' reservation write), and the jobs carried over to the next round.
        The first always goes: a gang larger than the budget is released part way, its
        reservation holding the rest for the next round."""
        left, budget = self.client.requests_left() - 1, self.client.settings.max_requests_per_round
        for i, r in enumerate(releases):
            left -= 2 * len(r.patches)
            if i and left < 0:
                sent = sum(len(x.patches) for x in releases[:i])
                why = WaitReason("Admitted", f"released by the next round, at once: this round's {budget} requests "
                                             f"(max_requests_per_round) went to the {sent} pods released before it")
                return releases[:i], [Waiting(x.job, x.queue, x.pods, why) for x in releases[i:]]
        return releases, []

    def _release(self, releases: list[Release], waiting: list[Waiting]) -> tuple[list[Outcome],
                                                                                   list[tuple[PodRef, str]]]:
        """Send every job's release patches at once; the outcome of each job and the Admitted
        Event of each pod released. A job with pods still gated (a patch refused) joins `waiting`."""
        job_of = {id(p): r for r in releases for p in r.patches}
        done: dict[str, list[PodRef]] = {r.job: [] for r in releases}
        refused: dict[str, list[str]] = {r.job: [] for r in releases}
        admitted: list[tuple[PodRef, str]] = []

        def released(release: PodRelease, pod: dict) -> None:
            r = job_of[id(release)]
            self.events.forget(release.pod.uid)
            self.witness.released(release.pod, release.node, pod)
            admitted.append((release.pod, f"Admitted: onto {release.node}{r.share} (a replica of {r.job})"))
            done[r.job].append(release.pod)

        try:
            send_releases(self.client, [p for r in releases for p in r.patches], self.fence, released,
                          lambda release, why: refused[job_of[id(release)].job].append(why), self.in_flight)
        finally:  # also when a write raised part way: say what was released
            for r in releases:
                if 0 < len(done[r.job]) < len(r.pods):
                    log.warning("%s: released %d of its %d gated pods; the rest stay gated on their reserved nodes "
                                "and are released next round", r.job, len(done[r.job]), len(r.pods))
                elif done[r.job]:
                    log.info("released %s: %d pod%s", r.job, len(done[r.job]), "s" if len(done[r.job]) > 1 else "")
        outcomes = []
        for r in releases:
            names = [str(p) for p in r.pods]
            if not refused[r.job]:
                outcomes.append(Outcome(r.job, "release", "done", _places(r), names))
                continue
            why = WaitReason("ReleaseFailed", "; ".join(refused[r.job]))
            outcomes.append(Outcome(r.job, "release", "failed",
                                    f"released {len(done[r.job])} of {len(r.pods)}: {why.text}", names))
            waiting.append(Waiting(r.job, r.queue, [p for p in r.pods if p not in done[r.job]], why))
        return outcomes, admitted

    def _left_out(self, bad: list[ObjectWarning]) -> list[Waiting]:
        """The pods the look left out or left waiting (issue 29): each is told why, naming the
        field and the value, as a gated pod that waits is."""
        out = []
        for w in bad:
            pod = self.read_pod(*w.pod) if w.pod is not None else None
            uid = (pod.get("metadata") or {}).get("uid") if pod is not None else None
            if isinstance(uid, str) and uid:
                namespace, name = w.pod
                why = WaitReason("UnreadablePod" if w.outcome == LEFT_OUT else "NoNodeFits", w.line())
                out.append(Waiting(f"{namespace}/{name}", "", [PodRef(namespace, name, uid)], why))
        return out

    def _tell_waiting(self, waiting: list[Waiting], carried: list[Waiting]) -> None:
        """An Event on each waiting pod, once per change of reason, side by side; pods no longer
        waiting are forgotten. Pods carried over to the next round are told nothing: their
        release comes next."""
        self.events.keep_only({ref.uid for w in waiting + carried for ref in w.pods})
        told = []
        for w in waiting:
            never = w.why.code in NOT_ADMITTED
            told += [(ref, w.why.code, w.why.text, "Warning" if never else "Normal",
                      "GpuPolicyNotAdmitted" if never else "GpuPolicyWaiting") for ref in w.pods]
        self.events.waiting_many(told, self.in_flight)


def waits_for_composition(decision: JobDecision, snap: Snapshot, attaching: list[Outcome]) -> WaitReason | None:
    """Why a job the plan starts stays gated: it runs on GPUs being attached (asked for in this
    round or before), whose requests are not complete; released earlier, its pods would sit
    unbound on a node whose device plugin does not offer the GPUs yet. None when its GPUs are there."""
    if snap.composed is None:
        return None
    nodes = snap.composed.waits_on(decision, snap.scenario.nodes)
    if not nodes:
        return None
    failed = [o.detail for o in attaching if o.action == "attach" and o.result == "failed" and o.job in nodes]
    waiting = [r.waiting() for (node, _), r in sorted(snap.composed.requests.items())
               if node in nodes and not r.complete]
    return WaitReason("WaitingForComposition", "; ".join(failed or waiting) or decision.reason)


def _places(r: Release) -> str:
    nodes = [p.node for p in r.patches]
    return f"{len(nodes)} pod{'s' if len(nodes) != 1 else ''} onto {', '.join(nodes)}"


def _unheld(places: list[Placement], held: list[str]) -> list[Placement]:
    """A reservation's places less one on each node a pod of the job already holds."""
    left, out = list(held), []
    for place in places:
        if place.node in left:
            left.remove(place.node)
        else:
            out.append(place)
    return out


def _waiting_reason(name: str, decision: JobDecision | None, snap: Snapshot) -> WaitReason:
    """Why a gated job the plan does not start waits: its gang's missing pods, the plan's
    reason, or (no decision) that gpu-policy does not plan it."""
    if name in snap.incomplete:
        return WaitReason("WaitingForGang", snap.incomplete[name])
    if decision is None:
        return WaitReason("NotManaged", "gpu-policy does not plan it: it names no queue gpu-policy knows, or asks for "
                                        "a GPU resource gpu-policy does not count (see the plan's warnings)")
    return WaitReason(decision.code, decision.reason)
