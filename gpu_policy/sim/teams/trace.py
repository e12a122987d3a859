"""The philly-vc workload: jobs of teams ("virtual clusters") and each team's share.

`jobs.csv`: job, vc, arrival_s, gpus, duration_s (and columns not read, e.g. model).
`vcs.csv`: vc, nodes (the team's share of the original cluster, in nodes; 0 for
teams without a quota). A bad row is a `TraceError` naming the file, line and
field; files are read through `gpu_policy.sim.tables` (size limit, UTF-8, one-line
CSV errors) and refused past `MAX_ROWS` rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from gpu_policy.errors import TraceError
from gpu_policy.planner.core.fair_share import round_largest_remainder
from gpu_policy.model.safe_load import DEFAULT_LIMITS, InputLimits
from gpu_policy.sim.tables import cell_number, cell_text, read_rows

JOB_FILE = "jobs.csv"
TEAM_FILE = "vcs.csv"
GPUS_PER_NODE = 8
#: Most rows read from one file (the real workload has 15,264 jobs and 15 teams).
MAX_ROWS = 200_000
#: Most teams: every team costs the metrics a row of time bins.
MAX_TEAMS = 1000
#: Most GPUs one job may ask (the real workload's largest asks 64).
MAX_JOB_GPUS = 65_536
DAY_S = 86_400.0


@dataclass(frozen=True)
class TraceJob:
    name: str
    team: str
    arrival_s: float
    gpus: int
    duration_s: float  # run time when never interrupted

    @property
    def replicas(self) -> int:
        """Jobs above one node's GPUs run as a gang over whole nodes."""
        return max(1, math.ceil(self.gpus / GPUS_PER_NODE))

    @property
    def gpus_per_replica(self) -> int:
        return self.gpus if self.gpus <= GPUS_PER_NODE else GPUS_PER_NODE

    @property
    def held_gpus(self) -> int:
        """GPUs the job holds while it runs: a gang holds its nodes whole
        (12 GPUs asked take two nodes, 16 GPUs)."""
        return self.replicas * self.gpus_per_replica


@dataclass(frozen=True)
class Team:
    name: str
    nodes: int  # share of the original cluster, in nodes


@dataclass(frozen=True)
class TeamTrace:
    jobs: list[TraceJob]  # by arrival, then name
    teams: list[Team]     # as listed in the team file
    source: str

    def quotas(self, gpus: int) -> dict[str, int]:
        """Each team's deserved GPUs on a cluster of `gpus`: its share of the
        original cluster's nodes, scaled, with largest remainders."""
        total = sum(t.nodes for t in self.teams)
        raw = [gpus * t.nodes / total if total else 0.0 for t in self.teams]
        return dict(zip((t.name for t in self.teams), round_largest_remainder(raw, gpus, raw)))

    def between(self, start_s: float, end_s: float) -> list[TraceJob]:
        """The jobs that arrive in [start_s, end_s)."""
        return [j for j in self.jobs if start_s <= j.arrival_s < end_s]


def load_team_trace(trace_dir: str | Path, limits: InputLimits = DEFAULT_LIMITS) -> TeamTrace:
    folder = Path(trace_dir)
    if not folder.is_dir():
        raise TraceError(f"{folder}: not a folder (expected the philly-vc CSVs: {JOB_FILE}, {TEAM_FILE})")
    teams = _load_teams(folder / TEAM_FILE, limits)
    known = {t.name for t in teams}
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    path = folder / JOB_FILE
    for line, row in read_rows(path, ("job", "vc", "arrival_s", "gpus", "duration_s"), limits, MAX_ROWS):
        name = cell_text(path, line, row, "job")
        if name in seen:
            raise TraceError(f"{path}: line {line}: job: duplicate name {name!r}")
        seen.add(name)
        team = cell_text(path, line, row, "vc")
        if team not in known:
            raise TraceError(f"{path}: line {line}: vc: must be a team of {TEAM_FILE}, got {team!r}")
        arrival = cell_number(path, line, row, "arrival_s", low=0)
        gpus = int(cell_number(path, line, row, "gpus", low=1, high=MAX_JOB_GPUS, whole=True))
        duration = cell_number(path, line, row, "duration_s", low=0, above=True)
        jobs.append(TraceJob(name, team, arrival, gpus, duration))
    jobs.sort(key=lambda j: (j.arrival_s, j.name))
    return TeamTrace(jobs, teams, str(folder))


def _load_teams(path: Path, limits: InputLimits) -> list[Team]:
    teams: list[Team] = []
    names: set[str] = set()
    for line, row in read_rows(path, ("vc", "nodes"), limits, MAX_TEAMS):
        name = cell_text(path, line, row, "vc")
        if name in names:
            raise TraceError(f"{path}: line {line}: vc: duplicate team {name!r}")
        names.add(name)
        teams.append(Team(name, int(cell_number(path, line, row, "nodes", low=0, whole=True))))
    return teams
