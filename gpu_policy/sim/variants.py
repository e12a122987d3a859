"""Workload variants: pod lists derived from a trace's own pods, reproducibly by seed,
that stress what the FGD paper's evaluation stresses (docs/simulate.md, "Variants").

- `gpuspec:S`: a share S of the GPU pods may run only on one to three GPU models.
- `multigpu:S`: pods of 2, 4 or 8 GPUs ask for a share S of the GPU capacity asked for.
- `gpushare:S`: pods of part of one GPU ask for a share S of the GPU capacity asked for.
- `cpu:X`: X times as many CPU-only pods, so X times the CPU they ask for.

A pod changes kind by becoming a copy of a pod of that kind drawn from the same list
(its CPU, memory and GPU request, and its model constraint), so every derived pod is
one the trace could have held. Several variants apply in the order given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpu_policy.errors import UsageError
from gpu_policy.packing.fragmentation import MILLI
from gpu_policy.sim.cluster import is_share
from gpu_policy.sim.openb import NodeList, PodList, PodType

#: Each kind and the amount it means when none is given.
KINDS = {"gpuspec": 0.33, "multigpu": 0.5, "gpushare": 1.0, "cpu": 2.5}

#: How many GPU models a constrained pod may use: one, two or three, with these
#: chances. 84% of the constrained pods of the publisher's gpuspec33 list name a single
#: model; we keep about that.
MODEL_COUNT_CHANCES = (0.85, 0.10, 0.05)


@dataclass(frozen=True)
class Variant:
    kind: str
    amount: float

    def __str__(self) -> str:
        return f"{self.kind}:{self.amount:g}"

    def apply(self, nodes: NodeList, pods: PodList, rng: np.random.Generator) -> PodList:
        change = {"gpuspec": _constrain, "multigpu": _multigpu, "gpushare": _gpushare, "cpu": _cpu_only}[self.kind]
        return pod_list(change([pods.types[t] for t in pods.type_of_pod], self, nodes, rng))


def parse_variants(text: str) -> list[Variant]:
    """'gpuspec:0.33' or 'gpuspec' (its default amount), several joined by commas."""
    variants = []
    for part in (p.strip() for p in text.split(",")):
        kind, _, amount = part.partition(":")
        if kind not in KINDS:
            raise UsageError(f"--variant: unknown kind {kind!r} in {text!r}; choose from {', '.join(KINDS)}")
        try:
            value = float(amount) if amount else KINDS[kind]
        except ValueError:
            raise UsageError(f"--variant: {kind}: expected a number after ':', got {amount!r}") from None
        if not np.isfinite(value) or value < 0 or (kind != "cpu" and value > 1):
            limit = "a factor >= 0" if kind == "cpu" else "a share in 0..1"
            raise UsageError(f"--variant: {kind}: must be {limit}, got {amount}")
        variants.append(Variant(kind, value))
    return variants


def derive(nodes: NodeList, pods: PodList, variants: list[Variant], seed: int) -> PodList:
    """The pod list of `seed`: each variant applied in turn (none: the list itself)."""
    rng = np.random.default_rng([seed, 2])
    for v in variants:
        pods = v.apply(nodes, pods, rng)
    return pods


def pod_list(pods: list[PodType]) -> PodList:
    """Pods as distinct types and the type of each pod, in order of first appearance."""
    types: dict[PodType, int] = {}
    type_of_pod = np.array([types.setdefault(p, len(types)) for p in pods], dtype=np.int64)
    return PodList(list(types), type_of_pod)


def _demand_share(pods: list[PodType], variant: Variant, rng: np.random.Generator, kind, others) -> list[PodType]:
    """Pods of `kind` asking for `variant.amount` of the GPU capacity asked for: pods of
    the `others` kind, in random order, become copies of random pods of `kind` (or the
    other way round, when `kind` asks for more)."""
    mine = sum(p.gpu_milli for p in pods if kind(p))
    total = sum(p.gpu_milli for p in pods)
    if mine == variant.amount * total:
        return pods
    grow = mine < variant.amount * total
    source, target = (others, kind) if grow else (kind, others)
    donors = [p for p in pods if target(p)]
    if not donors:
        raise UsageError(f"--variant {variant}: the pod list has no pods of the kind to copy")
    pods = list(pods)
    for i in rng.permutation(len(pods)):
        if (mine >= variant.amount * total) if grow else (mine <= variant.amount * total):
            break
        if source(pods[i]):
            new = donors[rng.integers(len(donors))]
            mine += (new.gpu_milli if grow else -pods[i].gpu_milli)
            total += new.gpu_milli - pods[i].gpu_milli
            pods[i] = new
    return pods


def _multigpu(pods, variant, nodes, rng):
    return _demand_share(pods, variant, rng, lambda p: p.gpus > 1, lambda p: p.gpus == 1)


def _gpushare(pods, variant, nodes, rng):
    return _demand_share(pods, variant, rng, is_share, lambda p: p.gpus >= 1 and not is_share(p))


def _cpu_only(pods, variant, nodes, rng):
    cpu_only = [i for i, p in enumerate(pods) if p.gpus == 0]
    goal = round(variant.amount * len(cpu_only))
    if goal <= len(cpu_only):
        drop = set(rng.choice(cpu_only, size=len(cpu_only) - goal, replace=False).tolist())
        return [p for i, p in enumerate(pods) if i not in drop]
    extra = rng.choice(cpu_only, size=goal - len(cpu_only), replace=True)
    return pods + [pods[i] for i in extra]


def model_weights(nodes: NodeList) -> np.ndarray:
    """How likely each GPU model is to be named by a constrained pod: its node count,
    discounted by its nodes' mean GPU count (nodes squared over GPUs). Pins follow
    nodes, and the models of many small nodes (the inference cards) draw the most,
    as in production (docs/simulate.md)."""
    count = np.bincount(nodes.model[nodes.model >= 0], minlength=len(nodes.models)).astype(float)
    gpus = np.bincount(nodes.model[nodes.model >= 0], weights=nodes.gpus[nodes.model >= 0],
                       minlength=len(nodes.models))
    return count ** 2 / np.maximum(gpus, 1)


def _constrain(pods, variant, nodes, rng):
    """Restrict unconstrained GPU pods until `amount` of the GPU pods are; each to one to
    three models drawn by `model_weights`, among those with a node that could hold it."""
    gpu_pods = [i for i, p in enumerate(pods) if p.gpus > 0]
    goal = round(variant.amount * len(gpu_pods)) - sum(pods[i].spec is not None for i in gpu_pods)
    free = [i for i in gpu_pods if pods[i].spec is None]
    weights = model_weights(nodes)
    pods = list(pods)
    for i in rng.permutation(free)[:max(0, goal)]:
        pod = pods[i]
        able = weights * _models_that_hold(nodes, pod)
        if not able.any():
            continue
        count = min(1 + int(rng.choice(len(MODEL_COUNT_CHANCES), p=MODEL_COUNT_CHANCES)), int((able > 0).sum()))
        picked = rng.choice(len(able), size=count, replace=False, p=able / able.sum())
        pods[i] = replace(pod, spec=frozenset(nodes.models[k] for k in picked))
    return pods


def _models_that_hold(nodes: NodeList, pod: PodType) -> np.ndarray:
    """Per model, whether an empty node of it could hold the pod."""
    holds = (nodes.gpus >= pod.gpus) & (nodes.cpu >= pod.cpu) & (nodes.memory >= pod.memory) & (nodes.model >= 0)
    return np.bincount(nodes.model[holds], minlength=len(nodes.models)) > 0


def confined_demand(nodes: NodeList, pods: PodList) -> dict[str, float]:
    """Per GPU model, the GPU capacity asked by pods that may use only that model, over
    the model's capacity: above 1, those pods alone oversubscribe it (during a run to
    100% of capacity, pods arrive in these proportions)."""
    counts = pods.counts
    total = sum(t.gpu_milli * c for t, c in zip(pods.types, counts))
    capacity = nodes.gpu_capacity * MILLI
    out = {}
    for k, name in enumerate(nodes.models):
        mine = sum(t.gpu_milli * c for t, c in zip(pods.types, counts) if t.spec == frozenset({name}))
        model_capacity = int(nodes.gpus[nodes.model == k].sum()) * MILLI
        out[name] = float(mine / total / (model_capacity / capacity)) if total and model_capacity else 0.0
    return out
