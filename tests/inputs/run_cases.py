"""Run the reproducers of tests/inputs/cases.py in this one process, under the memory
and CPU limits given on the command line; print one JSON result per case.

Usage: python tests/inputs/run_cases.py FOLDER MEMORY_MIB CPU_SECONDS_PER_CASE
"""

import contextlib
import io
import json
import resource
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu_policy.cli import main  # noqa: E402
from tests.inputs.cases import build_cases  # noqa: E402


class TookTooLong(BaseException):
    """A case used more CPU time than its bound (a BaseException: main() must not catch it)."""


def _too_long(signum, frame):
    raise TookTooLong()


def run(folder: Path, memory_mib: int, cpu_s: float) -> None:
    limit = memory_mib << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGPROF, _too_long)
    for name, case in build_cases(folder).items():
        out, err = io.StringIO(), io.StringIO()
        before = resource.getrusage(resource.RUSAGE_SELF)
        signal.setitimer(signal.ITIMER_PROF, cpu_s)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = main(case.argv)
            failure = None
        except TookTooLong:
            status, failure = None, f"used more than {cpu_s:g} s of CPU"
        except MemoryError:
            status, failure = None, f"needed more than {memory_mib} MiB"
        except SystemExit as e:  # argparse's --help only; errors come back as exit status 2
            status, failure = e.code, None
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(json.dumps({"name": name, "status": status, "failure": failure, "stdout": out.getvalue()[:200_000],
                          "stderr": err.getvalue(), "cpu_s": round(cpu, 3),
                          "max_rss_mib": after.ru_maxrss // 1024}), flush=True)


if __name__ == "__main__":
    run(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
