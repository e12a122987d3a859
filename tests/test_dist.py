"""The release build: `make dist`, the version's one home, and the Dockerfile as far as this
machine allows (no container engine runs here; CI builds the image, .github/workflows/ci.yml).

The Dockerfile is read with Docker's own parser (the `dockerfile` package wraps BuildKit's),
and its install stage's RUN is run here, into a fresh venv outside the checkout, with the
paths it copies to mapped to a temporary folder: the same wheel, pins and pip command the
image build uses, on this machine's Python instead of the image's.
"""

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpu_policy import DEFAULT_IMAGE, __version__
from tests.conftest import ROOT

dockerfile = pytest.importorskip("dockerfile", reason="the [release] extra is not installed; `make test` has it")
sys.path.insert(0, str(ROOT / "scripts"))
import constraints  # noqa: E402

WHEEL = f"gpu_policy-{__version__}-py3-none-any.whl"
INSTRUCTIONS = {"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
                "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}


def stages() -> list[list]:
    """The Dockerfile's build stages, each a list of parsed instructions starting at its FROM."""
    out: list[list] = []
    for command in dockerfile.parse_file(str(ROOT / "Dockerfile")):
        assert command.cmd in INSTRUCTIONS, f"Dockerfile:{command.start_line}: unknown instruction {command.cmd}"
        if command.cmd == "FROM":
            out.append([])
        if out:
            out[-1].append(command)
    return out


def args(commands) -> dict[str, str]:
    """The ARGs among `commands`, with their defaults."""
    return dict(c.value[0].split("=", 1) for c in commands if c.cmd == "ARG")


def base_image() -> str:
    bases = {stage[0].value[0] for stage in stages()}
    assert bases == {"${PYTHON_IMAGE}"}
    return args(dockerfile.parse_file(str(ROOT / "Dockerfile")))["PYTHON_IMAGE"]


def test_version_has_one_home(dist_dir):
    out = subprocess.run([sys.executable, "-m", "gpu_policy.cli", "--version"], capture_output=True, text=True)
    assert sorted(p.name for p in dist_dir.iterdir()) == sorted([f"gpu_policy-{__version__}.tar.gz", WHEEL])
    make = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "image", "ENGINE=docker"], capture_output=True,
                          text=True, check=True).stdout
    assert f"docker build --tag '{DEFAULT_IMAGE}' ." in make and DEFAULT_IMAGE == f"gpu-policy:{__version__}"
    make = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "image", "ENGINE=docker", "IMAGE_EXTRAS=kfp,s3"],
                          capture_output=True, text=True, check=True).stdout
    assert f"docker build --build-arg EXTRAS='kfp,s3' --tag '{DEFAULT_IMAGE}' ." in make
    make = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "constraints", "IMAGE_EXTRAS=kfp,s3"],
                          capture_output=True, text=True, check=True).stdout
    assert "scripts/constraints.py --extras 'kfp,s3' --write image-constraints.txt" in make  # the pins for that set
    make = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "components", "IMAGE=registry.example.com/g:1"],
                          capture_output=True, text=True, check=True).stdout
    assert "scripts/generate_kfp.py --image 'registry.example.com/g:1'" in make
    assert out.returncode == 0 and out.stdout.strip() == f"gpu-policy {__version__}"


def test_dockerfile_copies_the_wheel_make_dist_builds_and_the_pins(dist_dir):
    install, final = stages()
    copies = [c for c in install if c.cmd == "COPY"]
    sources = {c.value[0] for c in copies}
    assert sources == {"image-constraints.txt", "dist/gpu_policy-*-py3-none-any.whl"}
    assert fnmatch.filter(os.listdir(dist_dir), "gpu_policy-*-py3-none-any.whl") == [WHEEL]
    ignore = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    rules = [line for line in ignore if line and not line.startswith("#")]
    assert rules[0] == "*" and set(rules[1:]) == {f"!{source}" for source in sources}  # the context: these only
    run = " ".join(c.value[0] for c in install if c.cmd == "RUN")
    assert "--constraint /tmp/constraints.txt" in run and "[${EXTRAS}]" in run
    assert args(install)["EXTRAS"] == constraints.IMAGE_EXTRAS  # what the pins were resolved for
    assert "--only-binary=:all:" in run  # nothing compiled: no build tools needed, none left behind


def test_final_stage_is_slim_non_root_and_holds_no_build_tools():
    assert base_image().startswith("python:3.11-") and base_image().endswith("-slim")
    install, final = stages()
    assert final[0].value == ("${PYTHON_IMAGE}",)
    for command in final[1:]:
        assert command.cmd in {"COPY", "RUN", "ENV", "USER", "WORKDIR", "CMD", "LABEL"}, command.original
        if command.cmd == "COPY":
            assert command.flags == ("--from=install",), command.original
        if command.cmd == "RUN":
            for tool in ("apt-get", "pip", "gcc", "make", "build-essential", "curl"):
                assert tool not in command.value[0], command.original
    user = [c.value[0] for c in final if c.cmd == "USER"]
    assert len(user) == 1 and user[0].split(":")[0].isdigit() and int(user[0].split(":")[0]) > 0
    env = dict(zip(*[iter(next(c.value for c in final if c.cmd == "ENV"))] * 2))
    assert env["PATH"].startswith("/opt/gpu-policy/bin:")


def test_image_install_runs_demo_outside_the_checkout(dist_dir, tmp_path):
    """The install stage's RUN, on this machine: the wheel with its pins, then the demo."""
    install, final = stages()
    root = tmp_path / "image"
    context = {"image-constraints.txt": ROOT / "image-constraints.txt", "dist/gpu_policy-*-py3-none-any.whl": dist_dir / WHEEL}
    paths = {}
    for copy in (c for c in install if c.cmd == "COPY"):
        source, dest = copy.value
        target = root / dest.lstrip("/")
        if dest.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(context[source], target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(context[source], target)
        paths[dest.rstrip("/")] = str(target)
    venv = next(c.value[0] for c in final if c.cmd == "COPY")
    paths[venv] = str(root / venv.lstrip("/"))
    run = " && ".join(c.value[0] for c in install if c.cmd == "RUN")
    for image_path in sorted(paths, key=len, reverse=True):
        run = run.replace(image_path, paths[image_path])
    run = run.replace("--no-cache-dir", "")  # the image drops pip's cache for size; here it saves downloads
    python_dir = tmp_path / "python-bin"
    python_dir.mkdir()
    (python_dir / "python").symlink_to(getattr(sys, "_base_executable", sys.executable))
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["PATH"] = f"{python_dir}:{env['PATH']}"
    env.update(args(install))  # a RUN sees the stage's ARGs as environment variables
    done = subprocess.run(["sh", "-ec", run], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    bin_dir = Path(paths[venv]) / "bin"
    stale = "regenerate with: make constraints"
    assert constraints.installed(bin_dir / "python") == constraints.read(ROOT / "image-constraints.txt").pins, stale
    assert not (bin_dir / "pip").exists()
    env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    where = subprocess.run(["python", "-c", "import gpu_policy; print(gpu_policy.__file__)"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(bin_dir.parent)) and str(ROOT) not in where
    version = subprocess.run(["gpu-policy", "--version"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert version.stdout.strip() == f"gpu-policy {__version__}"
    demo = subprocess.run(["gpu-policy", "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "resumed" in demo.stdout and "1 empty node" in demo.stdout, demo.stdout[-3000:]


def test_ci_runs_the_test_command_and_builds_the_release():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers and triggers["push"]["tags"] == ["v*"]
    runs = {name: [step.get("run", "") for step in job["steps"]] for name, job in workflow["jobs"].items()}
    assert "bash .ci/run" in runs["test"] and workflow["jobs"]["test"]["timeout-minutes"] <= 90
    assert "make dist" in runs["image"] and any(run.startswith("make image IMAGE=") for run in runs["image"])
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:  # pinned by commit: a moved tag cannot change what CI runs
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step["uses"]


def test_docs_name_this_version():
    """Install commands and image names in the docs follow gpu_policy/_version.py."""
    pattern = re.compile(r"gpu_policy-(\d+\.\d+\.\d+[\w.]*)-py3|gpu-policy:(\d+\.\d+\.\d+[\w.]*)")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "components").glob("*/README.md"))]
    named = {(page.name, m[1] or m[2]) for page in pages for m in pattern.finditer(page.read_text())}
    assert named and {version for _, version in named} == {__version__}, sorted(named)
