"""Edges of the command line that need a real pipe, a real socket or a missing library."""

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_policy.cli import main

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "scenarios" / "seed1-greedy-team.yaml"


def test_a_closed_pipe_ends_quietly():
    """`gpu-policy plan --format json | head -1`: no BrokenPipeError traceback, status 141."""
    proc = subprocess.Popen([sys.executable, "-m", "gpu_policy.cli", "plan", str(SEED), "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # the reader goes away before the plan is printed, as `head` does after its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_a_taken_port_is_one_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["dcgm-exporter-sim", str(SEED), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"--port: cannot listen on 127.0.0.1:{port}: Address already in use" in err


@pytest.mark.parametrize("url, module, extra", [("s3://bucket/run", "s3fs", "s3"), ("gs://bucket/run", "gcsfs", "gcs")])
def test_object_store_without_its_backend_names_the_extra(url, module, extra, capsys):
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here, so the missing-extra message cannot show")
    assert main(["train-example", "--checkpoint-dir", url, "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"needs {module}: install gpu-policy with its [{extra}] extra, from a checkout or its wheel" in err


BLOCK_MATPLOTLIB = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("blocked for the test")
sys.meta_path.insert(0, Block())
from gpu_policy.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_plot_without_matplotlib_fails_before_the_runs(tmp_path):
    from tests.sim.conftest import write_trace

    trace = write_trace(tmp_path / "trace")
    done = subprocess.run([sys.executable, "-c", BLOCK_MATPLOTLIB, "simulate", "openb", "--trace-dir", str(trace),
                           "--seeds", "0", "--policies", "fgd", "--workers", "1", "--plot", str(tmp_path / "x.png")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert done.stdout == ""  # no table: nothing ran
    assert done.stderr == ("gpu-policy: --plot needs matplotlib: install gpu-policy with its [report] extra, "
                           "from a checkout or its wheel (docs/install.md)\n")


def test_airflow_modules_without_airflow_name_the_extra():
    if importlib.util.find_spec("airflow") is not None:
        pytest.skip("Airflow is installed in this environment")
    with pytest.raises(ImportError, match=r"gpu_policy.airflow needs Apache Airflow: install gpu-policy with its \[airflow\] extra"):
        import gpu_policy.airflow.hooks.dcgm  # noqa: F401


def test_every_subcommand_help_has_a_description():
    """`gpu-policy step --help` (and every other, nested ones too) says what the command does."""
    from tests.inputs.test_cli_numbers import subcommands

    for name, parser in subcommands():
        assert parser.description, name
        assert parser.description in " ".join(parser.format_help().split()), name
