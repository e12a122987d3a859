"""Property-based fuzzing of the scenario loader and the command line (hypothesis).

Run by tests/inputs/test_fuzz.py in a child process under a memory limit; every
example also has a CPU-time bound. Each generated input must end in exit 0 with a
valid plan (strict JSON, every job once) or exit 2 with one clean line naming the
file or the option. Derandomised with a fixed number of examples, so every run tries
the same inputs: the bound is the example count, not a deadline.

Usage: python tests/inputs/fuzz_worker.py FOLDER MEMORY_MIB CPU_SECONDS_PER_EXAMPLE EXAMPLES
"""

import contextlib
import io
import json
import resource
import signal
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu_policy.cli import main  # noqa: E402
from gpu_policy.errors import MESSAGE_LIMIT  # noqa: E402

SEED = Path(__file__).resolve().parents[1] / "scenarios" / "seed1-greedy-team.yaml"
#: A cluster with room, departments, a gang, fractions and telemetry: mutations of it often stay valid.
BASE = {
    "nodes": [{"name": "n1", "gpus": 8, "gpu_model": "A100"}, {"name": "n2", "gpus": 8, "unhealthy_gpus": [7]},
              {"name": "n3", "gpus": 4, "cpu": 32, "memory_gib": 256}],
    "queues": [{"name": "dept"}, {"name": "a", "parent": "dept", "deserved": 8}, {"name": "b", "parent": "dept"},
               {"name": "c", "deserved": 4, "limit": 12, "priority": 1}],
    "jobs": [{"name": "j1", "queue": "a", "gpus": 4, "running": ["n1"], "gpu_indices": [[0, 1, 2, 3]]},
             {"name": "j2", "queue": "b", "gpus": 0.5, "running": ["n2"], "checkpoint_age_s": 60},
             {"name": "j3", "queue": "c", "gpus": 2, "replicas": 2, "priority": 120},
             {"name": "j4", "queue": "a", "gpus": 1, "gpu_model": ["A100"], "cpu": 4, "memory_gib": 16}],
    "telemetry": {"jobs": {"j1": {"utilization": 2, "for_s": 900}}, "gpus": [{"node": "n2", "gpu": 3, "xid": 79}]},
    "expect": {"jobs": {"j4": "start"}},
}


class TookTooLong(BaseException):
    """An example used more CPU time than its bound."""


def _too_long(signum, frame):
    raise TookTooLong()


def run_cli(argv: list[str], cpu_s: float) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
    except TookTooLong:
        raise AssertionError(f"{argv}: used more than {cpu_s:g} s of CPU") from None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    return status, out.getvalue(), err.getvalue()


def _no_nan(name):
    raise AssertionError(f"the plan holds {name}: not JSON")


OUTCOMES = {0: 0, 2: 0}


def check(argv: list[str], names: str, cpu_s: float) -> None:
    """Exit 0 with a valid plan, or exit 2 with one clean line that starts with `names`."""
    status, out, err = run_cli(argv, cpu_s)
    if status in OUTCOMES:
        OUTCOMES[status] += 1
    if status == 0:
        plan = json.loads(out, parse_constant=_no_nan)
        assert plan["kind"] == "Plan", out[:300]
        jobs = [j["name"] for j in plan["jobs"]]
        assert len(jobs) == len(set(jobs)), "a job appears twice"
        return
    assert status == 2, (argv, status, err[-2000:])
    assert err.count("\n") == 1 and err.endswith("\n"), err[-2000:]
    line = err[:-1]
    assert len(line) <= MESSAGE_LIMIT and line.isprintable(), line
    assert line.startswith(f"gpu-policy: {names}"), line


# ---- values a clumsy user or an attacker might write ---------------------------------------

WEIRD_TEXT = st.sampled_from(["", "a\nb", "\x1b[31m", "\u202e", "é", "x" * 500, "null", "~", "1e400", "-0", "0x10",
                              "2024-01-01", "!!binary aGk=", "*a", "&a", "<<", "yes", ".nan"])
PLAUSIBLE = st.one_of(st.integers(0, 9), st.sampled_from([0.25, 0.5, 1.0, 2.0, 100, 1e3]),
                      st.sampled_from(["n1", "n2", "n3", "a", "b", "c", "dept", "j1", "A100", "start"]),
                      st.lists(st.integers(0, 8), max_size=3), st.sampled_from([["n1"], ["n2", "n3"], [[0], [1]]]))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70),
                    st.sampled_from([0, 1, -1, 2 ** 63, 1024, 1025, 100_000, 100_001, 10 ** 400]),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), WEIRD_TEXT)
VALUES = st.one_of(PLAUSIBLE, st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=12))
FIELDS = {"nodes": ["name", "gpus", "gpu_model", "cpu", "memory_gib", "labels", "unhealthy_gpus"],
          "queues": ["name", "parent", "deserved", "limit", "over_quota_weight", "priority"],
          "jobs": ["name", "queue", "gpus", "replicas", "priority", "preemptible", "gpu_model", "cpu", "memory_gib",
                   "running", "gpu_indices", "submitted_at", "checkpoint_age_s"]}


@st.composite
def mutated_scenarios(draw):
    """The seed scenario with a few fields replaced, removed or added, anywhere."""
    data = json.loads(json.dumps(BASE))
    for _ in range(draw(st.integers(0, 3))):
        section = draw(st.sampled_from(["nodes", "queues", "jobs"] * 3 + ["top", "expect", "telemetry"]))
        action = draw(st.sampled_from(["set", "drop", "copy"]))
        if section == "top":
            key = draw(st.sampled_from(list(data) + ["extra", "expect", "telemetry", "apiVersion", "kind"]))
            if action == "drop":
                data.pop(key, None)
            else:
                data[key] = draw(VALUES)
        elif section in ("expect", "telemetry"):
            data[section] = draw(st.one_of(VALUES, st.fixed_dictionaries(
                {draw(st.sampled_from(["jobs", "queues", "summary", "gpus", "memory_mib"])): VALUES})))
        elif isinstance(data.get(section), list) and data[section]:
            item = data[section][draw(st.integers(0, len(data[section]) - 1))]
            if not isinstance(item, dict):
                continue
            if action == "copy":  # one more node, queue or job like this one
                item = {**item, "name": f"{item.get('name')}-{len(data[section])}"}
                data[section].append(item)
            field = draw(st.sampled_from(FIELDS[section] + ["unknown"]))
            if action == "drop":
                item.pop(field, None)
            else:
                item[field] = draw(VALUES)
    return data


def render(draw_format: str, data) -> str:
    if draw_format == "json":
        return json.dumps(data, allow_nan=True)
    return yaml.safe_dump(data, allow_unicode=True)


def fuzz(folder: Path, cpu_s: float, examples: int) -> None:
    path = folder / "fuzzed.yaml"
    options = settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                       suppress_health_check=list(HealthCheck), print_blob=False)

    @options
    @given(mutated_scenarios(), st.sampled_from(["yaml", "json"]))
    def structured(data, fmt):
        path.write_text(render(fmt, data))
        check(["plan", str(path), "--format", "json"], str(path), cpu_s)

    @options
    @given(st.one_of(st.binary(max_size=400),
                     st.text(alphabet=st.sampled_from(list("{}[]:,-&*!|>'\"#\n\t ?<=.0123456789abcxyz\\")),
                             max_size=300)))
    def raw(content):
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        check(["plan", str(path), "--format", "json"], str(path), cpu_s)

    option_values = st.one_of(st.sampled_from(["nan", "inf", "-1", "0", "1e400", "99999999999999999999", "", "x",
                                               "0x10", "1_000", " 5", "3.5", "2"]), st.text(max_size=8))

    @options
    @given(st.sampled_from(["--time-limit", "--candidate-nodes", "--max-moves", "--window", "--max-input-mb",
                            "--prometheus", "--solver", "--format"]), option_values)
    def options_fuzz(option, value):
        # the fuzzed option first: a valid `--format table` must not override the JSON the check reads
        check(["plan", str(SEED), option, value, "--format", "json"], "", cpu_s)

    for test in (structured, raw, options_fuzz):
        OUTCOMES.update({0: 0, 2: 0})
        test()
        print(f"{test.__name__}: {examples} examples passed ({OUTCOMES[0]} runs planned, {OUTCOMES[2]} rejected "
              "in one line)", flush=True)


if __name__ == "__main__":
    folder, memory_mib, cpu_s, examples = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    limit = memory_mib << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGPROF, _too_long)
    fuzz(folder, cpu_s, examples)
