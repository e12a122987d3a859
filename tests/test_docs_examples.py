"""Every ```python block in README.md, docs/*.md and components/*/README.md runs (tests/docs_examples.py).

Here the core ones run; tests/kfp/, tests/airflow/ and tests/checkpoint/trainers/ run (and
compile or import) the blocks that need kfp, Airflow or the trainers, in their own environments. The simulator's example
reads the openb trace from $GPU_POLICY_OPENB_DIR and the teams example the philly-vc
workload from $GPU_POLICY_PHILLY_DIR: here small traces the tests write.
"""

import re

import pytest

from tests.docs_examples import DOCS, ROOT, blocks, described, run
from tests.sim.conftest import write_trace
from tests.sim.teams.conftest import JOBS as TEAM_JOBS, write_trace as write_team_trace

ALL = blocks()


def test_every_python_block_is_found_and_accounted_for():
    with_python = {path for path in DOCS if re.search(r"^\s*```py", path.read_text(), re.MULTILINE)}
    assert {block.path for block in ALL} == with_python
    assert {"core", "kfp", "airflow", "trainers"} == {block.environment for block in ALL}
    for block in ALL:
        if block.illustrative is not None:
            assert len(block.illustrative.split()) >= 4, f"{block.id}: an illustrative block must say why it is not run"
    illustrative = [block.id for block in ALL if block.illustrative]
    print(f"{len(ALL)} blocks; not run (illustrative): {illustrative or 'none'}")


def test_an_illustrative_block_is_marked_by_the_line_before_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n<!-- docs-example: illustrative: needs a live GPU cluster -->\n```python\n"
                    "import missing_module\n```\n\n```python\nprint('ran')\n```\n")
    first, second = blocks([page])
    assert first.illustrative == "needs a live GPU cluster" and first.line == 4
    assert second.illustrative is None and second.source == "print('ran')\n"


@pytest.mark.parametrize("block", [b for b in ALL if b.environment == "core" and not b.illustrative],
                         ids=lambda b: b.id)
def test_core_example_runs(block, tmp_path):
    done = run(block, tmp_path, {"GPU_POLICY_OPENB_DIR": str(write_trace(tmp_path / "openb")),
                                 "GPU_POLICY_PHILLY_DIR": str(write_team_trace(tmp_path / "philly", TEAM_JOBS))})
    assert done.returncode == 0, described(done, block)


def test_a_failing_block_fails(tmp_path):
    broken = tmp_path / "broken.md"
    broken.write_text("```python\nimport gpu_policy\ngpu_policy.load_scenario('no/such/file.yaml')\n```\n")
    (block,) = blocks([broken])
    done = run(block, tmp_path)
    assert done.returncode != 0 and "no/such/file.yaml" in done.stderr
    assert ROOT.exists()
