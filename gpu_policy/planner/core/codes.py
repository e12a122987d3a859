"""The short, stable codes of the reasons a plan gives (`JobDecision.code`), one line of
meaning each. Events, the `reason` label of the controller's metrics, `gpu-policy status`
and scripts match on the code; people read the sentence beside it, which carries the
numbers. docs/scenario.md lists every code (a test compares that list with
`gpu_policy.planner.codes.CODES`)."""

from __future__ import annotations

from dataclasses import dataclass

#: The codes the core gives (each rule declares its own, `Rule.codes`), with what each means.
#: Never rename one: codes are an interface.
CORE_CODES: dict[str, str] = {
    # wait: the queue's admission and the controller
    "NotAllowedInQueue": "the job's namespace may not use the queue it names",
    "WaitingForGang": "not all replicas of the gang exist yet (the controller waits for them)",
    "PinnedToOtherNode": "its pod already selects a node by hostname other than the one the plan chose (the controller)",
    "ReleaseFailed": "the plan started it, but releasing a pod failed (it changed since the plan looked, or the API "
                     "server refused); the next plan tries again (the controller)",
    "UnreadablePod": "a field of its pod cannot be read as docs/kubernetes.md says (the note names the field and "
                     "the value): it is left out of planning until the pod is fixed (the controller)",
    "NotManaged": "gpu-policy does not plan it: it names no queue gpu-policy knows, or asks for a GPU resource "
                  "gpu-policy does not count (the controller)",
    "WaitingForCheckpoint": "the plan started it on the GPUs of victims asked to save a checkpoint first, or stopped "
                            "at their periodic checkpoint: it stays gated until their pods have ended (the controller)",
    # wait: the plan's own outcome
    "NotPlacedYet": "the plan chose it, but placing it found no room; it starts in a later plan",
    "PlanCutShort": "the plan's time limit ran out before it could be placed",
    "NoRuleApplies": "free GPUs would fit it, and no rule the plan knows keeps it waiting",
    # start, preempt
    "Admitted": "starts now on the plan's nodes",
    "Preempted": "preempted; its queue holds fewer GPUs after the plan",
}


@dataclass(frozen=True)
class Reason:
    """Why a job waits, starts, stops or moves: a code (the core's `CORE_CODES`, or one the rule that
    gives it declares; `gpu_policy.planner.codes.CODES` has them all) and the sentence with the numbers."""

    code: str
    text: str

    def __str__(self) -> str:
        return self.text

    def with_clause(self, clause: str | None) -> Reason:
        """The same reason, with `clause` said after it (itself when there is none)."""
        return Reason(self.code, f"{self.text}; {clause}") if clause else self


def gpu_count(n: float) -> str:
    """`n` GPUs in words for a reason: "1 GPU", "8 GPUs", "0.5 GPUs"."""
    return f"{n:g} GPU" + ("" if n == 1 else "s")
