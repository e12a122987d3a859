"""Issue 17's and issue 29's reproducers, each in its own process: exit status, wall time, peak memory.

Each reproducer (tests/inputs/cases.py: malformed scenarios, openb traces, CLI options; and a
hostile API server per class of issue 29: drip, endless body, gzip bomb, huge body, deep JSON,
HTML with 200, endless empty pages, endless pages of one item, a token that does not advance,
resets, items null) must end in exit 0 with a plan or exit 2 with one line, within 5 s and
500 MB. Then one pod asking 2,000 GPUs on a 1,000-node cluster: every other pod is planned
and the odd pod waits, named in a warning. This prints one row per case (exit status, wall
and CPU seconds, peak memory, the bound that ends a hostile case) and a summary; the figures
go to docs/benchmarks.md with this command:

    nice .venv/bin/python bench/bad_inputs.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WALL_S, MEMORY_MIB = 5.0, 500
#: Writes the inputs in a child process: a process started by this one inherits this one's
#: peak memory as its own starting peak, so this one stays small.
BUILD = """
import json, sys
from pathlib import Path
from tests.inputs.cases import build_cases
print(json.dumps({name: [case.argv, case.error] for name, case in build_cases(Path(sys.argv[1])).items()}))
"""


def run(argv: list[str], out=subprocess.DEVNULL) -> tuple[int, float, float, float, str]:
    """Exit status, wall seconds, CPU seconds, peak resident MiB and standard error of one
    command (its standard output goes to `out`). CPU time says what a loaded machine's wall
    time does not: how much work the command itself did."""
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpu_policy.cli", *argv], stdout=out,
                            stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - began, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err


#: issue 29: a hostile API server per class, the options `snapshot` of it runs with, and the
#: bound that ends it (a KubernetesSettings field, docs/security.md); it must end in one line.
#: The drip and the resets are ended by the deadline, so they run with `--api-deadline 2`:
#: without it they end at the default 30 s / 60 s, with it the row shows the bound (wall time
#: is the deadline plus the command's start-up) and leaves the 5 s target honest.
HOSTILE = {"api-drip": ("drip", ["--api-deadline", "2"], "--api-deadline 2 (timeout_s)"),
           "api-endless-body": ("endless", [], "max_response_bytes 64 MiB"),
           "api-gzip-bomb": ("gzip-bomb", [], "max_response_bytes 64 MiB"),
           "api-huge-body": ("huge", ["--api-deadline", "3"], "max_response_bytes 64 MiB"),
           "api-deep-json": ("deep", [], "recursion limit"), "api-html-200": ("html", [], "not JSON"),
           "api-endless-pages": ("endless-pages", [], "max_empty_pages 10"),
           "api-endless-items": ("endless-items", [], "max_pages 400"),
           "api-same-token": ("same-token", [], "token must advance"),
           "api-resets": ("reset", ["--api-deadline", "2"], "--api-deadline 2 (deadline_s)"),
           "api-items-null": ('json:{"items": null}', [], "items must be a list")}


def hostile_rows() -> list[tuple[str, int, float, float, float, str, str]]:
    """Each hostile mode served by a child process, `snapshot` against it in another."""
    rows = []
    for name, (mode, options, bound) in HOSTILE.items():
        server = subprocess.Popen([sys.executable, "-m", "tests.kubernetes.hostile_api", mode], cwd=ROOT,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            kubeconfig = server.stdout.readline().strip()
            status, wall, cpu, rss, err = run(["snapshot", "--cluster", "k8s://", "--kubeconfig", kubeconfig,
                                               *options])
        finally:
            server.stdin.close()
            server.wait(timeout=30)
        ok = status == 2 and err.count("\n") == 1 and "Traceback" not in err
        rows.append((name, status, wall, cpu, rss, "yes" if ok and wall <= WALL_S and rss <= MEMORY_MIB else "NO",
                     bound))
    return rows


def odd_pod_on_a_large_cluster() -> None:
    """One pod asking 2,000 GPUs among 4,200 on 1,000 nodes: every other pod is planned."""
    sys.path.insert(0, str(ROOT))
    from gpu_policy.kubernetes import names
    from tests.kubernetes.fake_api import FakeKubernetes
    from tests.kubernetes.objects import gpu_pod, large_scenario, load_into

    with FakeKubernetes() as api, tempfile.TemporaryDirectory() as folder:
        scenario = large_scenario(nodes=1000, pods=4200)
        load_into(api, scenario, time.time())
        api.put(gpu_pod("jobs", "typo", gpus=2000, labels={names.QUEUE_LABEL: "team-0"}))
        kubeconfig = api.kubeconfig(Path(folder) / "kubeconfig")
        out = Path(folder) / "plan.json"
        with open(out, "w") as f:
            status, wall, _, rss, err = run(["plan", "--cluster", "k8s://", "--kubeconfig", kubeconfig, "--format",
                                          "json"], f)
        result = json.loads(out.read_text()) if status == 0 else {}
    planned = result.get("jobs", [])
    named = [line for line in err.splitlines() + result.get("warnings", []) if "pod jobs/typo" in line]
    print(f"\none pod asking 2,000 GPUs on a 1,000-node cluster ({len(scenario.jobs)} jobs): exit {status}, "
          f"{len(planned)} jobs planned, typo planned: {any(j['name'] == 'jobs/typo' for j in planned)}, "
          f"{wall:.1f} s, {rss:.0f} MiB; warning: {named[0] if named else 'NONE'}")


def loader_speed(runs: int = 5) -> None:
    """The safe loader against PyYAML's own C loader on the scale benchmark's scenario."""
    import statistics

    import yaml

    sys.path.insert(0, str(ROOT))
    from bench.instances import scale_instance
    from gpu_policy.model.scenario_file import load_scenario, parse_scenario

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scale.yaml"
        path.write_text(yaml.safe_dump(scale_instance(), default_flow_style=None))

        def timed(load) -> float:
            times = []
            for _ in range(runs):
                began = time.perf_counter()
                load()
                times.append(time.perf_counter() - began)
            return statistics.median(times)

        ours = timed(lambda: load_scenario(path))
        plain = timed(lambda: parse_scenario(yaml.load(path.read_text(), Loader=yaml.CSafeLoader), str(path)))
        size = path.stat().st_size
    print(f"\nloading the scale benchmark's scenario ({size / 1e6:.2f} MB YAML, 4,200 jobs), median of "
          f"{runs}: safe loader {ours:.3f} s, PyYAML's CSafeLoader {plain:.3f} s, ratio {ours / plain:.2f}")


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        built = subprocess.run([sys.executable, "-c", BUILD, folder], capture_output=True, text=True, cwd=ROOT,
                               check=True)
        rows, within = [], 0
        for name, (argv, error) in json.loads(built.stdout).items():
            status, wall, cpu, rss, err = run(argv)
            ok = status == (0 if error is None else 2) and (error is None or err.count("\n") == 1)
            inside = ok and wall <= WALL_S and rss <= MEMORY_MIB
            within += inside
            rows.append((name, status, wall, cpu, rss, "yes" if inside else "NO", ""))
    rows += hostile_rows()
    within += sum(r[5] == "yes" for r in rows[-len(HOSTILE):])
    width = max(len(r[0]) for r in rows)
    print(f"{'case':{width}}  exit  wall s  CPU s  peak MiB  within {WALL_S:g} s and {MEMORY_MIB} MB  bound")
    for name, status, wall, cpu, rss, inside, bound in rows:
        print(f"{name:{width}}  {status:4d}  {wall:6.2f}  {cpu:5.2f}  {rss:8.0f}  {inside:26}  {bound}".rstrip())
    walls = sorted(r[2] for r in rows)
    print(f"\n{len(rows)} cases; {within} end as expected within {WALL_S:g} s and {MEMORY_MIB} MB; wall time "
          f"median {walls[len(walls) // 2]:.2f} s, max {walls[-1]:.2f} s; peak memory max "
          f"{max(r[4] for r in rows):.0f} MiB")
    loader_speed()
    odd_pod_on_a_large_cluster()
    return 0 if within == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
