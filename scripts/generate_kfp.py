"""Rebuild the generated KFP files: components/NAME/{component.yaml,metadata.yaml,README.md}
and pipelines/compiled/*.yaml, from gpu_policy.kfp and pipelines/*.py.

    .venv-kfp/bin/python scripts/generate_kfp.py                 # write them (make components)
    .venv-kfp/bin/python scripts/generate_kfp.py --image IMAGE   # naming your image (make components IMAGE=...)
    .venv-kfp/bin/python scripts/generate_kfp.py --check         # exit 1 if any is stale
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import sys
import tempfile
from pathlib import Path

import yaml
from kfp import compiler
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import constraints  # noqa: E402  (scripts/constraints.py)
import gpu_policy.kfp as kfp_components  # noqa: E402
from gpu_policy import DEFAULT_IMAGE, __version__  # noqa: E402
from pipelines.gpu_aware_training import build_pipeline  # noqa: E402

CONSTRAINTS = ROOT / "image-constraints.txt"
#: A complete pipeline per component, compiled by tests/kfp/test_docs_examples.py like every docs example.
EXAMPLES = {
    "collect_gpu_telemetry": """from kfp import dsl
from gpu_policy.kfp import collect_gpu_telemetry


@dsl.pipeline(name="observe-gpus")
def observe_gpus(snapshot: str, prometheus_url: str = "http://prometheus.monitoring:9090"):
    telemetry = collect_gpu_telemetry(scenario_yaml=snapshot, prometheus_url=prometheus_url, window_s=600.0)
    # telemetry.outputs["telemetry"] feeds plan_gpu_allocation; telemetry.output is a one-line summary""",
    "plan_gpu_allocation": """from kfp import dsl
from gpu_policy.kfp import collect_gpu_telemetry, plan_gpu_allocation


@dsl.pipeline(name="plan-a-step")
def plan_a_step(snapshot: str):
    telemetry = collect_gpu_telemetry(scenario_yaml=snapshot)
    plan = plan_gpu_allocation(scenario_yaml=snapshot, job_name="llm-finetune", queue="team-a", gpus=4.0,
                               telemetry=telemetry.outputs["telemetry"], max_wait_s=600.0)
    # the training step then takes kubernetes.add_node_affinity_json(train, plan.outputs["node_affinity"])
    # and train.set_accelerator_limit(plan.outputs["gpu_count"]): see docs/kubeflow.md""",
    "checkpointed_train_step": """from kfp import dsl, kubernetes
from gpu_policy.kfp import checkpointed_train_step


@dsl.pipeline(name="train-in-budgets")
def train_in_budgets(checkpoint_pvc: str = "training-checkpoints"):
    train = checkpointed_train_step(checkpoint_uri="/checkpoints/llm-finetune", total_steps=10_000,
                                    steps_per_run=1_000, step_function="my_project.train:step",
                                    init_function="my_project.train:init")  # your code, in your image
    kubernetes.mount_pvc(train, pvc_name=checkpoint_pvc, mount_path="/checkpoints")
    train.set_retry(3)  # a preempted step saves, then exits 143: the retry resumes it""",
    "step_may_start": """from kfp import dsl
from gpu_policy.kfp import checkpointed_train_step, plan_gpu_allocation, step_may_start


@dsl.pipeline(name="train-when-granted")
def train_when_granted(snapshot: str):
    plan = plan_gpu_allocation(scenario_yaml=snapshot, job_name="train", queue="team-a", gpus=1.0)
    gate = step_may_start(can_start=plan.outputs["can_start"])
    with dsl.If(gate.output == True):  # noqa: E712 (a KFP condition)
        checkpointed_train_step(checkpoint_uri="/checkpoints/train", total_steps=300, steps_per_run=100,
                                gpu_count=plan.outputs["gpu_count"])""",
    "run_gated_pod": """from kfp import dsl
from gpu_policy.kfp import run_gated_pod

TRAINING_POD = {"metadata": {"name": "llm-finetune-round-1"},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "train", "image": "registry.example.com/ml/trainer:1.0",
                     "command": ["python", "-m", "my_project.train"]}]}}


@dsl.pipeline(name="train-when-admitted")
def train_when_admitted():
    # created gated in the pipeline's namespace; gpu-policy's controller releases it onto a node
    run_gated_pod(pod_manifest=TRAINING_POD, job_name="llm-finetune", queue="team-a", gpus=4.0, max_wait_s=3600.0)""",
    "run_trainjob": """from kfp import dsl
from gpu_policy.kfp import run_trainjob

TRAIN_JOB = {"metadata": {"name": "llm-pretrain"},
             "spec": {"runtimeRef": {"name": "torch-distributed"},
                      "trainer": {"image": "registry.example.com/ml/trainer:1.0",
                                  "command": ["torchrun", "-m", "my_project.train"]}}}


@dsl.pipeline(name="train-job-when-admitted")
def train_job_when_admitted(nodes: int = 4):
    # its 4 pods are gated; gpu-policy's controller admits them together, as one gang
    run_trainjob(trainjob_manifest=TRAIN_JOB, job_name="llm-pretrain", queue="team-a", num_nodes=nodes,
                 gpus_per_node=8, max_wait_s=3600.0)""",
}
#: What metadata.yaml says beyond the dependencies: the Kubeflow component collections' fields.
METADATA = {
    "collect_gpu_telemetry": {"tags": ["gpu", "telemetry", "dcgm", "prometheus"], "external_services": [
        {"name": "Prometheus scraping NVIDIA dcgm-exporter (optional: simulated without it)", "version": ">=2"}]},
    "plan_gpu_allocation": {"tags": ["gpu", "scheduling", "fair_share", "preemption", "bin_packing"],
                            "external_services": []},
    "checkpointed_train_step": {"tags": ["gpu", "training", "checkpointing", "preemption"], "external_services": [
        {"name": "Checkpoint storage: a PersistentVolumeClaim or an fsspec object store (s3://, gs://)",
         "version": "any"}]},
    "step_may_start": {"tags": ["gpu", "control_flow"], "external_services": []},
    "run_gated_pod": {"tags": ["gpu", "scheduling", "admission", "training"], "external_services": [
        {"name": "gpu-policy's controller (deploy/): it releases the pod", "version": "==0.1.0"}]},
    "run_trainjob": {"tags": ["gpu", "scheduling", "admission", "training", "kubeflow_trainer"], "external_services": [
        {"name": "gpu-policy's controller (deploy/): it releases the pods", "version": "==0.1.0"},
        {"name": "Kubeflow Trainer: TrainJob trainer.kubeflow.org/v1alpha1 with runtimePatches", "version": ">=2.2"}]},
}
PIPELINES = {"gpu_aware_training.yaml": build_pipeline}


def _arg_docs(function) -> dict[str, str]:
    """`name: text` lines of a Google-style docstring (Args and Returns), joined per name."""
    docs, current = {}, None
    for line in (function.__doc__ or "").splitlines():
        stripped = line.strip()
        head, sep, rest = stripped.partition(": ")
        if sep and head.isidentifier() and line.startswith(" " * 8) and not line.startswith(" " * 12):
            current, docs[head] = head, rest
        elif current and line.startswith(" " * 12):
            docs[current] += " " + stripped
        else:
            current = None
    return docs


def readme(name: str, component, image: str) -> str:
    spec = component.component_spec
    fallback = _arg_docs(getattr(kfp_components.functions, name))
    lines = [f"# {name}", "", "<!-- generated by scripts/generate_kfp.py from gpu_policy/kfp/functions.py: do not edit -->",
             "", spec.description or "", "", "## Inputs", "", "| name | type | default | description |",
             "| --- | --- | --- | --- |"]
    for key, value in (spec.inputs or {}).items():
        default = "required" if value.default is None and not value.optional else repr(value.default)
        text = (value.description or fallback.get(key, "")).replace(chr(10), " ")
        lines.append(f"| `{key}` | {value.type} | {default} | {text} |")
    lines += ["", "## Outputs", "", "| name | type | description |", "| --- | --- | --- |"]
    for key, value in (spec.outputs or {}).items():
        text = (value.description or fallback.get(key, "")).replace(chr(10), " ")
        lines.append(f"| `{key}` | {value.type} | {text} |")
    lines += ["", "## Example", "", "```python", EXAMPLES[name], "```", "", "## Image", "",
              f"`component.yaml` runs in `{image}` and installs nothing when its pod starts. "
              + ("That name is a placeholder: build the image from a checkout, push it, and regenerate the "
                 "components with its name:" if image == DEFAULT_IMAGE else "Rebuild and push it from a checkout with:"),
              "", "```", f"make image IMAGE=registry.example.com/ml/gpu-policy:{__version__}",
              f"docker push registry.example.com/ml/gpu-policy:{__version__}",
              f"make components IMAGE=registry.example.com/ml/gpu-policy:{__version__}", "```", "",
              "From Python, `gpu_policy.kfp.components(image=...)` builds the components for your image, and "
              "`components(wheel=URL)` builds ones that install that exact gpu-policy wheel at start instead "
              "(docs/install.md).", ""]
    return "\n".join(lines)


def direct_dependencies() -> list[str]:
    """gpu-policy's own requirements and its [kfp] extra's: the names the image installs for it."""
    names = []
    for text in importlib.metadata.requires("gpu-policy") or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": constraints.IMAGE_EXTRAS}):
            names.append(constraints.normalise(requirement.name))
    return names


def kfp_range() -> str:
    """The Kubeflow Pipelines versions the [kfp] extra accepts, as setup.py states them."""
    for text in importlib.metadata.requires("gpu-policy") or []:
        requirement = Requirement(text)
        if requirement.name == "kfp":
            return ",".join(str(s) for s in sorted(requirement.specifier, key=lambda s: s.operator.startswith("<")))
    raise SystemExit("setup.py: extras_require.kfp: must name kfp, got no kfp requirement")


def metadata(name: str, image: str) -> str:
    """metadata.yaml as the Kubeflow component collections keep it; versions are the image's pins."""
    pinned = constraints.read(CONSTRAINTS)
    python = [{"name": "gpu-policy", "version": f"=={__version__}"}]
    for dependency in direct_dependencies():
        if dependency not in pinned.pins:
            raise SystemExit(f"{CONSTRAINTS.relative_to(ROOT)}: {dependency}: must be pinned, got no pin "
                             f"(run: make constraints)")
        python.append({"name": dependency, "version": f"=={pinned.pins[dependency]}"})
    verified = datetime.datetime.combine(pinned.resolved, datetime.time(), datetime.timezone.utc)
    data = {
        "name": name,
        "stability": "alpha",
        "dependencies": {"kubeflow": [{"name": "Pipelines", "version": kfp_range()}],
                         "python": python,
                         "external_services": METADATA[name]["external_services"]},
        "tags": METADATA[name]["tags"],
        "image": image,
        "lastVerified": verified.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "links": {"documentation": "../../docs/kubeflow.md", "readme": "README.md"},
    }
    header = ("# generated by scripts/generate_kfp.py: do not edit. Versions are the image's pins "
              "(image-constraints.txt);\n# lastVerified is when they were resolved, and CI has tested them since.\n")
    return header + yaml.safe_dump(data, sort_keys=False)


def expected_files(image: str = DEFAULT_IMAGE) -> dict[Path, str]:
    """Every generated file and the text it should hold, the components running in `image`."""
    ops = kfp_components.components(image=image)
    files: dict[Path, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in kfp_components.NAMES:
            component = getattr(ops, name)
            out = Path(tmp) / f"{name}.yaml"
            compiler.Compiler().compile(component, str(out))
            folder = ROOT / "components" / name
            files[folder / "component.yaml"] = out.read_text()
            files[folder / "metadata.yaml"] = metadata(name, image)
            files[folder / "README.md"] = readme(name, component, image)
        for filename, build in PIPELINES.items():
            out = Path(tmp) / filename
            compiler.Compiler().compile(build(ops), str(out))
            files[ROOT / "pipelines" / "compiled" / filename] = out.read_text()
    return files


#: Top-level fields kfp stamps with its own release: a patch release of kfp is not a change
KFP_STAMPS = ("sdkVersion",)


def _documents(text: str) -> list:
    """A YAML file's documents, without the fields kfp stamps with its release."""
    docs = list(yaml.safe_load_all(text))
    return [{k: v for k, v in doc.items() if k not in KFP_STAMPS} if isinstance(doc, dict) else doc for doc in docs]


def stale(files: dict[Path, str]) -> list[Path]:
    """Generated files whose content differs (YAML compared parsed, as documents, kfp's
    release stamp aside: the committed files must not change with each kfp patch release)."""
    out = []
    for path, text in files.items():
        if not path.exists():
            out.append(path)
        elif path.suffix == ".yaml":
            if _documents(path.read_text()) != _documents(text):
                out.append(path)
        elif path.read_text() != text:
            out.append(path)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale")
    parser.add_argument("--image", default=DEFAULT_IMAGE,
                        help=f"the image the components run in (default: the placeholder {DEFAULT_IMAGE})")
    args = parser.parse_args()
    files = expected_files(args.image or DEFAULT_IMAGE)
    if args.check:
        behind = stale(files)
        for path in behind:
            print(f"stale: {path.relative_to(ROOT)} (run: make components)")
        return 1 if behind else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
