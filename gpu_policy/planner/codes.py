"""The short, stable codes of the reasons a plan gives (`JobDecision.code`), one line of
meaning each. Events, the `reason` label of the controller's metrics, `gpu-policy status`
and scripts match on the code; people read the sentence beside it, which carries the
numbers. docs/scenario.md lists every code (a test compares that list with `CODES`)."""

from __future__ import annotations

from dataclasses import dataclass

#: Every code a reason may carry, with what it means. Never rename one: codes are an interface.
CODES: dict[str, str] = {
    # wait: the job can never run as the cluster is
    "NoNodeFits": "no node of the cluster could ever hold one replica (GPU model, GPUs, CPUs or memory)",
    "NoNodeMatches": "no node meets the job's placement constraints (node selector, affinity, taints)",
    "NotAllowedInQueue": "the job's namespace may not use the queue it names",
    # wait: a rule keeps it waiting
    "QueueAboveLimit": "starting it would take its queue, or a department above it, above its limit",
    "NonPreemptibleAboveDeserved": "a non-preemptible job starts only within its queue's deserved quota",
    "ClaimsBeforeBorrowing": "starting it would take its queue above its fair share, and the free GPUs "
                             "are claimed by queues within theirs",
    "ClaimsWithinDeserved": "its queue reclaims GPUs in the guarantee tier in this plan, so its starts end "
                            "within its deserved quota",
    "WouldSwapInsideQueue": "its queue loses a job in this plan that could take this one's place",
    # wait: no room where it could run
    "FragmentedNoBlock": "enough GPUs are free in all, but no node has a free block as large as one replica",
    "NotEnoughFreeGpus": "fewer GPUs are free than one replica needs",
    "GangDoesNotFit": "the free GPUs hold some replicas of the gang, not all",
    "NoFreeMigSlice": "fewer MIG slices of its profile are free than its replicas need",
    "NoGpuShareFits": "no GPU has room for the fraction it asks",
    "SharedGpusBusy": "GPUs with room for the fraction are busy or lack the memory it needs",
    "NotEnoughCpuOrMemory": "no node has the CPUs or memory one replica asks",
    "WaitingForGang": "not all replicas of the gang exist yet (the controller waits for them)",
    "PinnedToOtherNode": "its pod already selects a node by hostname other than the one the plan chose (the controller)",
    "ReleaseFailed": "the plan started it, but releasing a pod failed (it changed since the plan looked, or the API "
                     "server refused); the next plan tries again (the controller)",
    "UnreadablePod": "a field of its pod cannot be read as docs/kubernetes.md says (the note names the field and "
                     "the value): it is left out of planning until the pod is fixed (the controller)",
    "NotManaged": "gpu-policy does not plan it: it names no queue gpu-policy knows, or asks for a GPU resource "
                  "gpu-policy does not count (the controller)",
    "NotPlacedYet": "the plan chose it, but placing it found no room; it starts in a later plan",
    "PlanCutShort": "the plan's time limit ran out before it could be placed",
    "NoRuleApplies": "free GPUs would fit it, and no rule the plan knows keeps it waiting",
    # start
    "Admitted": "starts now on the plan's nodes",
    "WaitingForComposition": "starts on GPUs the plan attaches to a composable node, once they are attached",
    # preempt and move
    "ReclaimedFairShare": "preempted for another queue: its queue is above its fair share (fair-share tier)",
    "ReclaimedGuarantee": "preempted for another queue below its deserved quota (guarantee tier)",
    "PreemptedInsideQueue": "preempted for a higher-priority job of its own queue",
    "Preempted": "preempted; its queue holds fewer GPUs after the plan",
    "MovedToDefragment": "stopped and restarted on other nodes so that waiting jobs fit",
}


@dataclass(frozen=True)
class Reason:
    """Why a job waits, starts, stops or moves: a code from `CODES` and the sentence with the numbers."""

    code: str
    text: str

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"reason code {self.code!r} is not in gpu_policy.planner.codes.CODES")

    def __str__(self) -> str:
        return self.text


def gpu_count(n: float) -> str:
    """`n` GPUs in words for a reason: "1 GPU", "8 GPUs", "0.5 GPUs"."""
    return f"{n:g} GPU" + ("" if n == 1 else "s")
