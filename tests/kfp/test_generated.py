"""Generated component and pipeline files are fresh, load in kfp, and wire the plan's outputs."""

import sys
from pathlib import Path

import pytest
import yaml

kfp = pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from kfp import components  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import generate_kfp  # noqa: E402


def test_generated_files_are_fresh():
    stale = generate_kfp.stale(generate_kfp.expected_files())
    assert stale == [], f"regenerate with: .venv-kfp/bin/python scripts/generate_kfp.py ({stale})"


def test_every_component_yaml_loads():
    folders = sorted((ROOT / "components").iterdir())
    assert [f.name for f in folders] == sorted(generate_kfp.kfp_components.NAMES)
    for folder in folders:
        assert components.load_component_from_file(str(folder / "component.yaml")).name == folder.name.replace("_", "-")
        assert (folder / "README.md").read_text().startswith(f"# {folder.name}")


def test_training_gets_affinity_and_gpus_from_the_plan():
    docs = list(yaml.safe_load_all((ROOT / "pipelines" / "compiled" / "gpu_aware_training.yaml").read_text()))
    spec, platform = docs
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    trains = sorted(k for k in spec["deploymentSpec"]["executors"] if k.startswith("exec-checkpointed-train-step"))
    assert len(trains) == 3  # one per round
    for k, name in enumerate(trains, start=1):
        suffix = "" if k == 1 else f"-{k}"
        affinity = executors[name]["nodeAffinity"][0]["nodeAffinityJson"]["componentInputParameter"]
        assert affinity == f"pipelinechannel--plan-gpu-allocation{suffix}-node_affinity"
        resources = spec["deploymentSpec"]["executors"][name]["container"]["resources"]["accelerator"]
        assert resources["resourceCount"] == f"{{{{$.inputs.parameters['pipelinechannel--plan-gpu-allocation{suffix}-gpu_count']}}}}"
        assert resources["resourceType"] == "nvidia.com/gpu"
    # and those inputs of the round's condition come from the plan task's outputs
    dag = spec["root"]["dag"]["tasks"]["condition-1"]["inputs"]["parameters"]
    assert dag["pipelinechannel--plan-gpu-allocation-node_affinity"]["taskOutputParameter"] == {
        "producerTask": "plan-gpu-allocation", "outputParameterKey": "node_affinity"}
    assert dag["pipelinechannel--plan-gpu-allocation-gpu_count"]["taskOutputParameter"] == {
        "producerTask": "plan-gpu-allocation", "outputParameterKey": "gpu_count"}
