"""What a GPU and a node hold: fractions share a GPU while their sizes sum to at most one,
and what runs on a node fits in its GPUs, CPUs and memory. The one place this is checked
(placing running replicas, the program's bounds, realising a plan, the greedy scope and
the reasons all ask here), and the one place its rows are written (`Room`: an integer
program's capacity rows in plain numbers, which a program turns into constraints over its
own variables: the simulator's `ours-*` window program does)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from gpu_policy.planner.rules.vocabulary import EPS


def fits_on_gpu(used: float, gpus: float) -> bool:
    """Whether a fraction of `gpus` fits beside the `used` part of one GPU."""
    return used + gpus <= 1 + EPS


def has_room(used: float) -> bool:
    """Whether a GPU holding the `used` part has any room left for a fraction."""
    return used < 1 - EPS


def per_gpu(gpus: float) -> int:
    """How many fractions of `gpus` one GPU holds."""
    return math.floor(1 / gpus + EPS)


@dataclass(frozen=True)
class Room:
    """One capacity row: sum(amount x decision) over `use` + `held` <= `capacity` +
    sum(amount x decision) over `grows`. What the plan's decisions put on a GPU or a node,
    beside what stays there, fits in what it has, which decisions may grow or shrink (GPUs
    attached or detached by composition). The decisions are the caller's (a program's
    variables, or any key it maps to one)."""

    use: dict[Hashable, float]
    held: float
    capacity: float
    grows: dict[Hashable, float] = field(default_factory=dict)

    def terms(self) -> dict[Hashable, float]:
        """The row's left side, with what grows the capacity moved over: <= capacity - held."""
        return {**self.use, **{v: -a for v, a in self.grows.items()}}


def gpu_room(fractions: Mapping[Hashable, float], held: float = 0.0, opened: Hashable | None = None,
             one: float = 1.0) -> Room:
    """`fits_on_gpu` as a row: the fractions placed on one GPU and the part it already holds
    sum to at most one GPU. `opened`: the 0/1 decision that opens a free GPU for fractions,
    so they fit there only where it is opened. `one`: one GPU in the caller's unit (1, or
    1,000 thousandths)."""
    if opened is None:
        return Room(dict(fractions), held, one)
    return Room(dict(fractions), held, 0.0, {opened: one})


def node_gpus_room(whole: Mapping[Hashable, float], opened: Iterable[Hashable], held: float, gpus: float,
                   attached: Mapping[Hashable, float] | None = None) -> Room:
    """A node's GPUs: whole GPUs taken, plus each GPU that holds fractions (`opened`, one
    GPU each: a shared GPU is not free for whole-GPU work), plus those that stay taken, at
    most its GPUs and those `attached` (+1 per GPU attached, -1 per GPU detached)."""
    return Room({**whole, **dict.fromkeys(opened, 1.0)}, held, gpus, dict(attached or {}))


def node_room(use: Mapping[Hashable, float], held: float, capacity: float) -> Room:
    """A node's CPUs or memory: what the placed work asks for, plus what stays, at most
    what the node has."""
    return Room(dict(use), held, capacity)
