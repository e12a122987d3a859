"""Issue 17's reproducers, as files and command lines: each must end in exit 0 with a plan,
or exit 2 with one line naming the file (or option) and field.

`build_cases(folder)` writes the inputs under `folder` and returns name -> `Case`. The
test (tests/inputs/test_reproducers.py) runs them all in one process under memory and
CPU limits; bench/bad_inputs.py runs each in its own process and prints time and memory.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "scenarios" / "seed1-greedy-team.yaml"
NODES = "nodes: [{name: n1, gpus: 4}]\n"
QUEUES = "queues: [{name: q1, deserved: 2}]\n"
JOB = "jobs: [{name: j, queue: q1, gpus: 1}]\n"
TRACE_NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,G2\nn1,32000,131072,4,T4\n"
TRACE_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
               "scheduled_time\n"
TRACE_PODS = TRACE_HEADER + "p0,8000,16384,1,1000,,LS,Running,0,10,0\np1,4000,8192,1,500,,LS,Running,0,10,0\n" \
                            "p2,16000,32768,4,1000,,LS,Running,0,10,0\n"


@dataclass(frozen=True)
class Case:
    argv: list[str]
    error: str | None = None
    """A regex the one line on standard error must match (exit 2); None: exit 0 with a plan."""


def _alias_bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _scenario_files() -> dict[str, tuple[str | bytes, str | None]]:
    """name -> (file content, expected error regex or None for a plan)."""
    chain = "queues:\n" + "".join(f"  - {{name: q{i}{', parent: q' + str(i - 1) if i else ''}}}\n" for i in range(500))
    rng = random.Random(17)
    return {
        # PyYAML from 6.0.4 refuses deep flow nesting itself, before gpu-policy's limit: the
        # behaviour (one line naming the file and line, exit 2) is checked, not either wording
        "deep nesting (YAML)": ("nodes: " + "[" * 100_000 + "]" * 100_000 + "\n", r".*\bline 1\b"),
        "deep nesting (JSON)": ('{"nodes": ' + "[" * 100_000 + "]" * 100_000 + "}", r"nests deeper than 64 levels"),
        "500-queue parent chain": (NODES + chain + "jobs: []\n", r"queues\[\d+\]\.parent: departments must nest at most 32"),
        "401-digit number": (NODES + QUEUES + "jobs: [{name: j, queue: q1, gpus: " + "1" * 401 + "}]\n",
                             r"line 3: a number spelt in 401 characters; at most 64"),
        "401-digit number (JSON)": ('{"nodes": [{"name": "n", "gpus": ' + "9" * 401 + "}]}",
                                    r"a number spelt in 401 characters"),
        "YAML date": (NODES + QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, submitted_at: 2024-01-01}]\n",
                      r"line 3: dates and times are not accepted, got '2024-01-01'"),
        "expect.jobs is a list": (NODES + QUEUES + JOB + "expect: {jobs: [j]}\n",
                                  r"expect\.jobs: must be a mapping, got \['j'\]"),
        "telemetry.jobs is a list": (NODES + QUEUES + JOB + "telemetry: {jobs: [j]}\n",
                                     r"telemetry\.jobs: must be a mapping"),
        "alias bomb": (_alias_bomb(), r"aliases expand to more than 10000 nodes"),
        "gpus: 1000000 on one node": ("nodes: [{name: n1, gpus: 1000000}]\n" + QUEUES + "jobs: []\n",
                                      r"nodes\[0\]\.gpus: must be at most 1,024, got 1000000"),
        "non-UTF-8 file": (NODES.encode() + b"queues: [{name: q\xff1}]\n", r"line 2: is not UTF-8 text: byte 0xff"),
        "key with a newline": (NODES + QUEUES + 'jobs: [{name: j, queue: q1, gpus: 1, "gp\\nus": 2}]\n',
                               r"jobs\[0\] \(name: j\)\.gp\\nus: unknown field"),
        "huge value in a message": (NODES + QUEUES + "jobs: [{name: j, queue: q1, gpus: [" + ", ".join(["1"] * 200_000)
                                    + "]}]\n", r"jobs\[0\] \(name: j\)\.gpus: must be a number, got \[1, 1, 1, 1, 1, 1, \.\.\.\]"),
        "valid scenario with no jobs": (NODES + QUEUES, None),
        "100,008 GPUs in all": ("nodes:\n" + "".join(f"  - {{name: n{i}, gpus: 8}}\n" for i in range(12_501)) + QUEUES,
                                r"nodes: must hold at most 100,000 GPUs in all, got 100,008"),
        "duplicate keys": (NODES + QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, gpus: 2}]\n",
                           r"line 3: duplicate key \"gpus\""),
        "binary garbage": (bytes(rng.randrange(256) for _ in range(4096)), r"(is not UTF-8|is not allowed in YAML|not valid)"),
        "NaN GPUs": (NODES + QUEUES + "jobs: [{name: j, queue: q1, gpus: .nan}]\n",
                     r"line 3: jobs\[0\]\.gpus: numbers must be finite"),
        "a 50 MB file": (b"# padding\n" * 5_000_000, r"is larger than 20 MB, the input limit"),
        "python tag": (NODES + QUEUES + "jobs: !!python/object/apply:os.system [ls]\n",
                       r"line 3: the tag !!python/object/apply:os.system is not accepted"),
        "control character": (NODES + QUEUES + "jobs: [{name: \"j\x1b[31m\", queue: q1, gpus: 1}]\n",
                              r"line 3: character 0x1b is not allowed in YAML"),
    }


def _traces() -> dict[str, tuple[str, str | None]]:
    return {
        "openb: inf cell": (TRACE_PODS.replace("p0,8000,", "p0,inf,"), r"line 2: cpu_milli: must be a number, got 'inf'"),
        "openb: 1e400 cell": (TRACE_PODS.replace("p0,8000,", "p0,1e400,"), r"cpu_milli: must be a number, got '1e400'"),
        "openb: 200,000-character field": (TRACE_PODS.replace("p1,", "p" + "x" * 200_000 + ","),
                                           r"line 3: not valid CSV: field larger than field limit"),
        "openb: unbalanced quote": (TRACE_PODS.replace("p1,", '"p1,'), r"not valid CSV"),
        "openb: every pod asks 0 GPUs": (TRACE_HEADER + "p0,1000,1000,0,0,,BE,Running,0,1,0\n",
                                         r"num_gpu: no pod asks for a GPU"),
        "openb: 1.5 GPUs": (TRACE_PODS.replace("p2,16000,32768,4,", "p2,16000,32768,1.5,"),
                            r"line 4: num_gpu: must be a whole number, got '1.5'"),
        "openb: only the needed columns": ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1000,1,500\n"
                                           "p1,2000,2000,2,1000\n", None),
    }


def build_cases(folder: Path) -> dict[str, Case]:
    folder.mkdir(parents=True, exist_ok=True)
    cases: dict[str, Case] = {}
    for i, (name, (content, error)) in enumerate(_scenario_files().items()):
        path = folder / f"scenario-{i}.yaml"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        where = re.escape(str(path)) + (": " if error is None or error.startswith("line") else r": (line \d+: )?")
        cases[name] = Case(["plan", str(path), "--format", "json"], None if error is None else where + error)
    for i, (name, (pods, error)) in enumerate(_traces().items()):
        trace = folder / f"trace-{i}"
        trace.mkdir(exist_ok=True)
        (trace / "openb_node_list_all_node.csv").write_text(TRACE_NODES)
        (trace / "openb_pod_list_default.csv").write_text(pods)
        cases[name] = Case(["simulate", "openb", "--trace-dir", str(trace), "--seeds", "0", "--policies", "fgd",
                            "--workers", "1", "--format", "json"], error)
    tiny = folder / "trace-tiny-shares"  # 8,000 GPUs and pods asking a thousandth of one: 80 million arrivals
    tiny.mkdir(exist_ok=True)
    (tiny / "openb_node_list_all_node.csv").write_text(
        TRACE_NODES.splitlines()[0] + "\n" + "".join(f"n{i},64000,262144,8,G2\n" for i in range(1000)))
    (tiny / "openb_pod_list_default.csv").write_text(TRACE_HEADER + "p0,1000,1000,1,1,,LS,Running,0,1,0\n")
    cases["openb: pods asking a thousandth of a GPU"] = Case(
        ["simulate", "openb", "--trace-dir", str(tiny), "--seeds", "0", "--policies", "fgd", "--inflate", "10"],
        r"--inflate: this trace needs about 80,000,000 pod arrivals per run")
    trace = folder / "trace-0"
    simulate = ["simulate", "openb", "--trace-dir", str(trace), "--seeds", "0", "--policies", "fgd", "--workers", "1"]
    seed = str(SEED)
    cases.update({
        "simulate --inflate nan": Case(simulate + ["--inflate", "nan"], r"--inflate: must be a finite number > 0"),
        "simulate --inflate inf": Case(simulate + ["--inflate", "inf"], r"--inflate: must be a finite number > 0"),
        "simulate --seeds 0-99999999999": Case(simulate[:-4] + ["--seeds", "0-99999999999"], r"--seeds: "),
        "simulate --plot into a missing folder": Case(simulate + ["--plot", "/nonexistent/x.png"],
                                                      r"--plot: the folder '/nonexistent' does not exist"),
        "plan --time-limit nan": Case(["plan", seed, "--time-limit", "nan"], r"--time-limit: must be a finite number > 0"),
        "plan --apply-to into a missing folder": Case(["plan", seed, "--apply-to", str(folder / "no" / "x.yaml")],
                                                      r"--apply-to: the folder '.*/no' does not exist"),
        "plan --apply-to /dev/full": Case(["plan", seed, "--apply-to", "/dev/full"],
                                          r"--apply-to: cannot write /dev/full: No space left on device"),
        "plan /dev/zero": Case(["plan", "/dev/zero"], r"/dev/zero: is larger than 20 MB, the input limit"),
        "plan a folder": Case(["plan", str(folder)], r": cannot read the file: Is a directory"),
        "plan --prometheus not-a-url": Case(["plan", seed, "--prometheus", "ftp://u:secret@h"],
                                            r"--prometheus: must be an http:// or https:// URL with a host, "
                                            r"got 'ftp://u:\*\*\*@h'"),
        "dcgm-exporter-sim --port 99999": Case(["dcgm-exporter-sim", seed, "--port", "99999"],
                                               r"--port: must be a whole number >= 0 and <= 65,535, got '99999'"),
        "train-example --steps 0": Case(["train-example", "--checkpoint-dir", str(folder / "ck"), "--steps", "0"],
                                        r"--steps: must be a whole number >= 1"),
        "train-example --step-seconds -1": Case(["train-example", "--checkpoint-dir", str(folder / "ck"), "--steps", "1",
                                                 "--step-seconds", "-1"], r"--step-seconds: must be a finite number >= 0"),
        "train-example into an unknown protocol": Case(["train-example", "--checkpoint-dir", "nope://x", "--steps", "1"],
                                                       r"nope://x: unknown storage protocol 'nope'"),
    })
    return cases
