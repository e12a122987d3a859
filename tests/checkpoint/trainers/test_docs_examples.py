"""The docs' ```python blocks that need transformers or Lightning run here (.venv-trainers)."""

import pytest

pytest.importorskip("transformers", reason="`make test` runs these in .venv-trainers")
pytest.importorskip("lightning")

from tests.docs_examples import blocks, described, run  # noqa: E402

TRAINERS = [b for b in blocks() if b.environment == "trainers" and not b.illustrative]


def test_the_docs_show_both_callbacks():
    assert {b.path.name for b in TRAINERS} == {"checkpointing.md"} and len(TRAINERS) == 2


@pytest.mark.parametrize("block", TRAINERS, ids=lambda b: b.id)
def test_trainer_example_runs(block, tmp_path):
    done = run(block, tmp_path, {"HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, described(done, block)
