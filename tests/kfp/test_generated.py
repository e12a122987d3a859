"""Generated component and pipeline files are fresh, load in kfp, and wire the plan's outputs."""

import sys
from pathlib import Path

import pytest
import yaml

kfp = pytest.importorskip("kfp", reason="kfp is not installed here; `make test` runs these in .venv-kfp")

from kfp import components  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import constraints  # noqa: E402
import generate_kfp  # noqa: E402
from gpu_policy import DEFAULT_IMAGE, __version__  # noqa: E402

SHIPPED = sorted((ROOT / "components").glob("*/component.yaml")) + sorted((ROOT / "pipelines" / "compiled").glob("*.yaml"))


def executors(text: str) -> dict:
    spec = next(yaml.safe_load_all(text))
    return spec["deploymentSpec"]["executors"]


def test_generated_files_are_fresh():
    stale = generate_kfp.stale(generate_kfp.expected_files())
    assert stale == [], f"regenerate with: make components ({stale})"


def test_freshness_ignores_the_kfp_release_that_compiled_a_file(tmp_path):
    """A kfp patch release (sdkVersion) does not make a committed file stale; any other change does."""
    compiled = "# PIPELINE DEFINITION\npipelineInfo:\n  name: p\nsdkVersion: kfp-2.17.3\n"
    committed = tmp_path / "p.yaml"
    committed.write_text(compiled.replace("kfp-2.17.3", "kfp-2.17.0"))
    assert generate_kfp.stale({committed: compiled}) == []
    committed.write_text(compiled.replace("name: p", "name: q"))
    assert generate_kfp.stale({committed: compiled}) == [committed]


def test_shipped_components_run_in_the_image_and_install_nothing():
    assert len(SHIPPED) == len(generate_kfp.kfp_components.NAMES) + 1
    for path in SHIPPED:
        for name, executor in executors(path.read_text()).items():
            container = executor["container"]
            assert container["image"] == DEFAULT_IMAGE, (path, name)
            assert "pip install" not in " ".join(container["command"]), (path, name)


def test_make_components_image_names_that_image_everywhere():
    image = "registry.example.com/ml/gpu-policy:7"
    files = generate_kfp.expected_files(image)
    for path, text in files.items():
        if path.name == "component.yaml" or path.parent.name == "compiled":
            assert {e["container"]["image"] for e in executors(text).values()} == {image}, path
        elif path.name == "metadata.yaml":
            assert yaml.safe_load(text)["image"] == image
        else:
            assert f"runs in `{image}`" in text and f"`{DEFAULT_IMAGE}`" not in text


def test_metadata_names_the_image_pins():
    pinned = constraints.read(ROOT / "image-constraints.txt")
    for folder in sorted((ROOT / "components").iterdir()):
        data = yaml.safe_load((folder / "metadata.yaml").read_text())
        assert data["name"] == folder.name and data["stability"] in {"alpha", "beta", "stable"}
        assert data["lastVerified"] == f"{pinned.resolved.isoformat()}T00:00:00Z"
        assert data["dependencies"]["kubeflow"] == [{"name": "Pipelines", "version": ">=2.17,<3"}]
        python = {d["name"]: d["version"] for d in data["dependencies"]["python"]}
        assert python.pop("gpu-policy") == f"=={__version__}"
        assert {"kfp", "pulp", "pyyaml"} <= set(python)
        assert python == {name: f"=={pinned.pins[name]}" for name in python}
        assert data["tags"] and data["image"] == DEFAULT_IMAGE


def test_every_component_yaml_loads():
    folders = sorted((ROOT / "components").iterdir())
    assert [f.name for f in folders] == sorted(generate_kfp.kfp_components.NAMES)
    for folder in folders:
        assert components.load_component_from_file(str(folder / "component.yaml")).name == folder.name.replace("_", "-")
        readme = (folder / "README.md").read_text()
        assert readme.startswith(f"# {folder.name}") and "make image IMAGE=" in readme and "docker push" in readme


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
