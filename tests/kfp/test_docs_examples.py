"""The docs' ```python blocks that need kfp run here, and every pipeline they define compiles."""

import pytest

pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from tests.docs_examples import blocks, described, run  # noqa: E402


@pytest.mark.parametrize("block", [b for b in blocks() if b.environment == "kfp" and not b.illustrative],
                         ids=lambda b: b.id)
def test_kfp_example_runs_and_compiles(block, tmp_path):
    done = run(block, tmp_path)
    assert done.returncode == 0, described(done, block)
    if "@dsl.pipeline" in block.source:
        assert "compiled:" in done.stdout, described(done, block)


def test_the_docs_show_a_local_run():
    """docs/kubeflow.md has a kfp.local block (run above, with the others), not just words about one."""
    assert any("local.init(" in b.source and not b.illustrative for b in blocks() if b.path.name == "kubeflow.md")
