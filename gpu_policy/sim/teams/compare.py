"""Every policy on the same arrivals, one after the other, and what they share:
the protocol's options and the sharing-safety comparison with `static`."""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpu_policy.errors import GpuPolicyError
from gpu_policy.sim.teams.engine import SimConfig, simulate
from gpu_policy.sim.teams.kai import KaiLikePolicy
from gpu_policy.sim.teams.kai_time import KaiTimePolicy
from gpu_policy.sim.teams.metrics import PolicyMetrics, measure
from gpu_policy.sim.teams.ours import PlannerPolicy
from gpu_policy.sim.teams.policies import FifoPolicy, StaticPolicy
from gpu_policy.sim.teams.trace import DAY_S, TeamTrace

#: Most nodes a run may have, and the last day it may measure.
MAX_NODES = 100_000
MAX_DAY = 3660.0
#: Largest seed of the draw of cooperating trainers (numpy's and Python's seeds alike)
MAX_SEED = 2 ** 32 - 1
#: Largest usage weight (`--usage-weight`)
MAX_USAGE_WEIGHT = 1000.0

POLICIES: dict[str, Callable[[], object]] = {
    "static": StaticPolicy,
    "fifo": FifoPolicy,
    "kai-like": KaiLikePolicy,
    "kai-time": KaiTimePolicy,
    "gpu-policy": PlannerPolicy,
    "gpu-policy-no-history": functools.partial(PlannerPolicy, history=False),
}


@dataclass
class Protocol:
    """The experiment's settings, as `simulate teams` takes them."""

    nodes: int = 96
    days: tuple[float, float] = (21.0, 35.0)
    warmup_days: float = 7.0
    checkpoint_every_s: float | None = 1800.0
    restart_cost_s: float = 60.0
    round_s: float = 300.0
    save_s: float | None = None     # None: 20 s + 5 s per GPU
    saves_on_request: float = 0.5
    seed: int = 0
    reclaim_wait_s: float = 300.0
    min_runtime_s: float = 0.0
    usage_half_life_s: float | None = None  # None: gpu-policy counts no history, kai-time's does not decay
    usage_weight: float = 1.0

    def default_policies(self) -> list[str]:
        """Every policy; `gpu-policy-no-history` only where gpu-policy counts history (else
        the two are one)."""
        return [p for p in POLICIES if p != "gpu-policy-no-history" or self.usage_half_life_s is not None]

    def check(self) -> None:
        """Options a parser cannot judge alone, named as the command line names them.
        The bounds keep a run's memory and number of rounds bounded."""
        if not 1 <= self.nodes <= MAX_NODES:
            raise GpuPolicyError(f"--nodes: must be in 1..{MAX_NODES}, got {self.nodes}")
        if not 0 <= self.warmup_days <= self.days[0]:
            raise GpuPolicyError(f"--warmup-days: must be in 0..{self.days[0]:g} (the first day of --days), "
                                 f"got {self.warmup_days:g}")
        if not 0 <= self.restart_cost_s <= DAY_S:
            raise GpuPolicyError(f"--restart-cost: must be seconds in 0..{DAY_S:g}, got {self.restart_cost_s:g}")
        if not 1 <= self.round_s <= DAY_S:
            raise GpuPolicyError(f"--round-every: must be seconds in 1..{DAY_S:g}, got {self.round_s:g}")
        for option, seconds in (("--save-s", self.save_s), ("--reclaim-wait", self.reclaim_wait_s),
                                ("--min-runtime", self.min_runtime_s)):
            if seconds is not None and not 0 <= seconds <= DAY_S:
                raise GpuPolicyError(f"{option}: must be seconds in 0..{DAY_S:g}, got {seconds:g}")
        if not 0 <= self.saves_on_request <= 1:
            raise GpuPolicyError(f"--saves-on-request: must be a share in 0..1, got {self.saves_on_request:g}")
        if not 0 <= self.seed <= MAX_SEED:
            raise GpuPolicyError(f"--seed: must be a whole number in 0..{MAX_SEED}, got {self.seed}")
        if self.usage_half_life_s is not None and not 1 <= self.usage_half_life_s <= MAX_DAY * DAY_S:
            raise GpuPolicyError(f"--usage-half-life: must be seconds in 1..{MAX_DAY * DAY_S:g}, "
                                 f"got {self.usage_half_life_s:g}")
        if not 0 <= self.usage_weight <= MAX_USAGE_WEIGHT:
            raise GpuPolicyError(f"--usage-weight: must be in 0..{MAX_USAGE_WEIGHT:g}, got {self.usage_weight:g}")

    def config(self) -> SimConfig:
        d0, d1 = self.days
        return SimConfig(nodes=self.nodes, round_s=self.round_s, checkpoint_every_s=self.checkpoint_every_s,
                         restart_cost_s=self.restart_cost_s, start_s=(d0 - self.warmup_days) * DAY_S,
                         window=(d0 * DAY_S, d1 * DAY_S), save_s=self.save_s,
                         saves_on_request=self.saves_on_request, seed=self.seed,
                         reclaim_wait_s=self.reclaim_wait_s, min_runtime_s=self.min_runtime_s,
                         usage_half_life_s=self.usage_half_life_s, usage_weight=self.usage_weight)


@dataclass
class TeamsComparison:
    protocol: Protocol
    quotas: dict[str, int]
    policies: list[PolicyMetrics]
    worse_than_static: dict[str, list[str]]  # policy -> teams; empty without static
    wall_s: dict[str, float]


def parse_policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown:
        raise GpuPolicyError(f"--policies: must name policies of {', '.join(POLICIES)}, got {unknown[0]!r}")
    if not names or len(set(names)) != len(names):
        raise GpuPolicyError(f"--policies: must name each policy once, got {text!r}")
    return names


def parse_days(text: str) -> tuple[float, float]:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)\s*", text)
    if not match or not float(match[1]) < float(match[2]) <= MAX_DAY:
        raise GpuPolicyError(f"--days: must be a range FIRST-LAST of days with FIRST < LAST <= {MAX_DAY:g}, "
                             f"e.g. 21-35, got {text!r}")
    return float(match[1]), float(match[2])


def parse_checkpoint(text: str) -> float | None:
    if text.strip().lower() == "never":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < math.inf:
        raise GpuPolicyError(f"--checkpoint-every: must be seconds > 0 or 'never', got {text!r}")
    return value


def sharing_safety(results: list[PolicyMetrics]) -> dict[str, list[str]]:
    """Per policy, the teams whose mean queueing delay is worse than under
    `static` (HiveD's sharing safety); nothing when `static` did not run."""
    static = next((r for r in results if r.policy == "static"), None)
    if static is None:
        return {}
    out = {}
    for r in results:
        out[r.policy] = sorted(
            team for team, m in r.teams.items()
            if m.queueing.mean is not None and static.teams[team].queueing.mean is not None
            and m.queueing.mean > static.teams[team].queueing.mean + 1e-6)
    return out


def compare(trace: TeamTrace, names: list[str], protocol: Protocol,
            progress: Callable[[int, int], None] | None = None) -> TeamsComparison:
    """Each policy in `names` on the same arrivals. `progress(done, 100)`: the
    percent of all runs done (jobs finished), once per step."""
    protocol.check()
    config = protocol.config()
    quotas = trace.quotas(config.gpus)
    jobs = trace.between(config.start_s, config.window[1])
    results, wall = [], {}
    for i, name in enumerate(names):
        tick = _ticker(progress, i, len(names), len(jobs))
        began = time.perf_counter()
        run = simulate(jobs, quotas, POLICIES[name](), config, tick)
        wall[name] = time.perf_counter() - began
        results.append(measure(run))
        if progress:
            progress(100 * (i + 1) // len(names), 100)
    return TeamsComparison(protocol, quotas, results, sharing_safety(results), wall)


def _ticker(progress, index: int, count: int, jobs: int):
    """A per-run callback for the engine (jobs finished so far) that calls
    `progress` once per percent."""
    if progress is None:
        return None
    last = [-1]

    def tick(finished: int) -> None:
        percent = min(99, (100 * index + 100 * finished // max(jobs, 1)) // count)
        if percent != last[0]:
            last[0] = percent
            progress(percent, 100)

    return tick
