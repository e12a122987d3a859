"""Issue 17's reproducers, each in its own process: exit status, wall time, peak memory.

Each reproducer (tests/inputs/cases.py: malformed scenarios, openb traces, CLI options) must
end in exit 0 with a plan or exit 2 with one line, within 5 s and 500 MB. This prints one
row per case and a summary; the figures go to docs/benchmarks.md with this command:

    .venv/bin/python bench/bad_inputs.py
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


def run(argv: list[str]) -> tuple[int, float, float, str]:
    """Exit status, wall seconds, peak resident MiB and standard error of one command."""
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpu_policy.cli", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - began, usage.ru_maxrss / 1024, err


def loader_speed(runs: int = 5) -> None:
    """The safe loader against PyYAML's own C loader on the scale benchmark's scenario."""
    import statistics

    import yaml

    sys.path.insert(0, str(ROOT))
    from bench.instances import scale_instance
    from gpu_policy.scenario import load_scenario, parse_scenario

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
            status, wall, rss, err = run(argv)
            ok = status == (0 if error is None else 2) and (error is None or err.count("\n") == 1)
            inside = ok and wall <= WALL_S and rss <= MEMORY_MIB
            within += inside
            rows.append((name, status, wall, rss, "yes" if inside else "NO"))
    width = max(len(r[0]) for r in rows)
    print(f"{'case':{width}}  exit  wall s  peak MiB  within {WALL_S:g} s and {MEMORY_MIB} MB")
    for name, status, wall, rss, inside in rows:
        print(f"{name:{width}}  {status:4d}  {wall:6.2f}  {rss:8.0f}  {inside}")
    walls = sorted(r[2] for r in rows)
    print(f"\n{len(rows)} cases; {within} end as expected within {WALL_S:g} s and {MEMORY_MIB} MB; wall time "
          f"median {walls[len(walls) // 2]:.2f} s, max {walls[-1]:.2f} s; peak memory max "
          f"{max(r[3] for r in rows):.0f} MiB")
    loader_speed()
    return 0 if within == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
