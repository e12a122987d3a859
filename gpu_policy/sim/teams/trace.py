"""The philly-vc workload: jobs of teams ("virtual clusters") and each team's share.

`jobs.csv`: job, vc, arrival_s, gpus, duration_s (and columns not read, e.g. model).
`vcs.csv`: vc, nodes (the team's share of the original cluster, in nodes; 0 for
teams without a quota). A bad row is a `TraceError` naming the file, line and
field; files are read row by row and refused past `MAX_ROWS` rows, so a huge or
endless file costs bounded time and memory.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from gpu_policy.errors import TraceError
from gpu_policy.fair_share import round_largest_remainder

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


def load_team_trace(trace_dir: str | Path) -> TeamTrace:
    folder = Path(trace_dir)
    if not folder.is_dir():
        raise TraceError(f"{folder}: not a folder (expected the philly-vc CSVs: {JOB_FILE}, {TEAM_FILE})")
    teams = _load_teams(folder / TEAM_FILE)
    known = {t.name for t in teams}
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    path = folder / JOB_FILE
    for line, row in _rows(path, ("job", "vc", "arrival_s", "gpus", "duration_s")):
        name = _text(path, line, row, "job")
        if name in seen:
            raise TraceError(f"{path}: line {line}: job: duplicate name {name!r}")
        seen.add(name)
        team = _text(path, line, row, "vc")
        if team not in known:
            raise TraceError(f"{path}: line {line}: vc: must be a team of {TEAM_FILE}, got {team!r}")
        arrival = _number(path, line, row, "arrival_s")
        if arrival < 0:
            raise TraceError(f"{path}: line {line}: arrival_s: must be >= 0, got {arrival:g}")
        gpus = _number(path, line, row, "gpus")
        if gpus != int(gpus) or not 1 <= gpus <= MAX_JOB_GPUS:
            raise TraceError(f"{path}: line {line}: gpus: must be a whole number in 1..{MAX_JOB_GPUS}, "
                             f"got {row['gpus'].strip()}")
        duration = _number(path, line, row, "duration_s")
        if duration <= 0:
            raise TraceError(f"{path}: line {line}: duration_s: must be > 0, got {duration:g}")
        jobs.append(TraceJob(name, team, arrival, int(gpus), duration))
    jobs.sort(key=lambda j: (j.arrival_s, j.name))
    return TeamTrace(jobs, teams, str(folder))


def _load_teams(path: Path) -> list[Team]:
    teams: list[Team] = []
    for line, row in _rows(path, ("vc", "nodes")):
        name = _text(path, line, row, "vc")
        if any(t.name == name for t in teams):
            raise TraceError(f"{path}: line {line}: vc: duplicate team {name!r}")
        nodes = _number(path, line, row, "nodes")
        if nodes != int(nodes) or nodes < 0:
            raise TraceError(f"{path}: line {line}: nodes: must be a whole number >= 0, got {row['nodes'].strip()}")
        teams.append(Team(name, int(nodes)))
        if len(teams) > MAX_TEAMS:
            raise TraceError(f"{path}: line {line}: must have at most {MAX_TEAMS} teams")
    return teams


def _rows(path: Path, columns: tuple[str, ...]):
    """(line number, row) for each data row; the header must name `columns`."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with handle:
        try:
            reader = csv.DictReader(handle)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise TraceError(f"{path}: header: missing column {missing[0]!r}")
            count = 0
            for row in reader:
                count += 1
                if count > MAX_ROWS:
                    raise TraceError(f"{path}: line {reader.line_num}: must have at most {MAX_ROWS:,} rows")
                yield reader.line_num, row
        except UnicodeDecodeError as exc:
            raise TraceError(f"{path}: must be UTF-8 text, got byte {exc.object[exc.start]:#x}") from None
        except csv.Error as exc:
            raise TraceError(f"{path}: line {reader.line_num + 1}: not CSV: {exc}") from None
    if not count:
        raise TraceError(f"{path}: no rows")


def _text(path: Path, line: int, row: dict, field: str) -> str:
    value = (row.get(field) or "").strip()
    if not value:
        raise TraceError(f"{path}: line {line}: {field}: must not be empty")
    return value


def _number(path: Path, line: int, row: dict, field: str) -> float:
    text = (row.get(field) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{path}: line {line}: {field}: expected a number, got {text[:40]!r}") from None
    if not math.isfinite(value):
        raise TraceError(f"{path}: line {line}: {field}: must be finite, got {text}")
    return value
