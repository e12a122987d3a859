"""Small hand-made philly-vc traces, and running one policy over jobs directly."""

from __future__ import annotations

import pytest

from gpu_policy.sim.teams import POLICIES, SimConfig, TraceJob, simulate

TEAMS = "vc,nodes,gpus\na,1,8\nb,1,8\n"


def job(name: str, team: str, arrival: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(name, team, float(arrival), gpus, float(duration))


def run(policy: str, jobs: list[TraceJob], quotas: dict[str, int], nodes: int = 2, **config):
    """One policy over `jobs`, everything measured (the window is all time). Unless `config`
    says otherwise, no trainer saves on request and no stop waits for a checkpoint: a victim
    leaves at once and goes back to its last checkpoint."""
    config = {"saves_on_request": 0.0, "reclaim_wait_s": 0.0, **config}
    return simulate(jobs, quotas, POLICIES[policy](), SimConfig(nodes=nodes, **config))


def by_name(sim_run) -> dict:
    return {j.name: j for j in sim_run.jobs}


def write_trace(folder, jobs: str, teams: str = TEAMS):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "jobs.csv").write_text(jobs)
    (folder / "vcs.csv").write_text(teams)
    return folder


JOBS = """job,vc,arrival_s,gpus,duration_s,model
a-0,a,0,4,7200,ResNet-50
a-1,a,0,4,7200,ResNet-50
a-2,a,600,8,3600,LM
b-0,b,86400,1,600,A3C
b-1,b,90000,16,3600,Transformer
"""


@pytest.fixture
def trace_dir(tmp_path):
    return write_trace(tmp_path / "trace", JOBS)
