"""How a stopped job leaves its GPUs, and what that costs: its trainer's side (how long it
takes to save, whether it saves when asked) and the policy's (the grace period its eviction
gives, and whether it asks the trainer to save first), the same model for every policy.

A trainer that cooperates (`Trainer.saves_on_request`) saves when it is asked and also on
SIGTERM; one that does not dies on SIGTERM. A save that ends before the victim is killed keeps
all its work: the victim loses the seconds it saved, its GPUs busy meanwhile. A save cut short
is lost: the victim goes back to its last periodic checkpoint, having held its GPUs for nothing
until it was killed. A victim stopped at its periodic checkpoint (`evict_after_s`) runs on until
then and loses nothing. docs/simulate.md, "Preemption that loses no work", gives the reasons
for each default.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gpu_policy.model.checkpointing import POD_GRACE_S, answer_deadline_s, eviction_grace_s

#: A save's fixed part, seconds (writing a checkpoint's files, whatever the job's size)
SAVE_BASE_S = 20.0
#: A save's part per GPU, seconds (a larger job has more state to write)
SAVE_PER_GPU_S = 5.0


def default_save_s(gpus: int) -> float:
    """Seconds a job of `gpus` GPUs takes to save a checkpoint: 25 s for one GPU, 100 s for 16."""
    return SAVE_BASE_S + SAVE_PER_GPU_S * gpus


@dataclass(frozen=True)
class Trainer:
    """What a job's training loop does when it is stopped."""

    save_s: float            # seconds it takes to save a checkpoint
    saves_on_request: bool   # it saves when asked, and on SIGTERM; else it dies on SIGTERM


def draw_trainer(name: str, gpus: int, share: float, seed: int, save_s: float | None = None) -> Trainer:
    """Job `name`'s trainer: it cooperates with probability `share`, drawn from `seed` and the
    name alone, so a job's draw does not depend on which other jobs a run simulates; it saves
    in `save_s` seconds (None: `default_save_s`)."""
    cooperates = random.Random(f"{seed}:{name}").random() < share
    return Trainer(default_save_s(gpus) if save_s is None else save_s, cooperates)


@dataclass(frozen=True)
class Eviction:
    """How a policy stops a victim."""

    name: str
    asks_first: bool    # a cooperating trainer is asked to save, and evicted once it has
    sized_grace: bool   # the grace period fits the save (the contract's); else the pod's own, 30 s

    def save_budget_s(self, trainer: Trainer) -> float:
        """Seconds the victim's trainer may spend saving before it is killed: none for one that
        does not cooperate; else the grace period, after the wait for its answer when asked."""
        if not trainer.saves_on_request:
            return 0.0
        grace = eviction_grace_s(trainer.save_s) if self.sized_grace else POD_GRACE_S
        return grace + (answer_deadline_s(trainer.save_s) if self.asks_first else 0.0)


#: Kubernetes' eviction as a scheduler issues it: SIGTERM, then SIGKILL after the pod's 30 s
KUBERNETES = Eviction("kubernetes", asks_first=False, sized_grace=False)
#: The contract's (spec/kubernetes.md, "Preemption that loses no work"): ask, then evict with a
#: grace period sized to the save
CONTRACT = Eviction("gpu-policy", asks_first=True, sized_grace=True)


@dataclass(frozen=True)
class Departure:
    """When a stopped job's GPUs are free, and what it keeps and loses (seconds per GPU)."""

    at: float
    kept_s: float            # progress it restarts from
    restart_s: float = 0.0   # restart time its run had spent (after an earlier stop)
    redone_s: float = 0.0    # work since its last checkpoint, thrown away
    saving_s: float = 0.0    # seconds its GPUs spent saving, kept or not
    finished: bool = False   # it finished before its checkpoint came


def departure(job, now: float, every: float | None, eviction: Eviction,
              evict_after_s: float | None) -> Departure:
    """How running `job` (a `SimJob`) leaves when a policy stops it at `now`: at its next
    periodic checkpoint when the stop waits for it (`evict_after_s`), else through `eviction`."""
    if evict_after_s is not None:
        checkpoint, end = job.next_checkpoint(now, every), job.finish_time()
        if end <= checkpoint:
            return Departure(end, job.spec.duration_s, job.delay_s, finished=True)
        return Departure(checkpoint, job.progress(checkpoint), job.restart_spent(checkpoint))
    restart, save = job.restart_spent(now), job.trainer.save_s
    budget = eviction.save_budget_s(job.trainer)
    if budget > 0 and save <= budget:
        return Departure(now + save, job.progress(now), restart, saving_s=save)
    kept = job.last_checkpoint(now, every)
    return Departure(now + budget, kept, restart, redone_s=job.progress(now) - kept, saving_s=budget)

