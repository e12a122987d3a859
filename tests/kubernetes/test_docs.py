"""Every code block of docs/kubernetes.md runs: `sh` blocks are gpu-policy commands run
against the fake API server (through $KUBECONFIG), `python` blocks are executed, `yaml` and
`json` blocks parse, and the RBAC rules they show grant only what the code declares."""

import contextlib
import io
import json
import re
import shlex
import time
from pathlib import Path

import pytest
import yaml

from gpu_policy import load_scenario
from gpu_policy.cli import main
from gpu_policy.kubernetes import names
from gpu_policy.kubernetes.read.usage import read_usage
from gpu_policy.kubernetes.write.usage import usage_data
from tests.conftest import SCENARIOS
from tests.kubernetes.conftest import declared
from tests.kubernetes.objects import load_into

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kubernetes.md"
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def blocks(language: str) -> list[str]:
    return [text for lang, text in BLOCKS if lang == language]


@pytest.fixture
def live(api, tmp_path, monkeypatch):
    load_into(api, load_scenario(SCENARIOS / "seed1-greedy-team.yaml"), time.time())
    monkeypatch.setenv("KUBECONFIG", api.kubeconfig(tmp_path / "kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return api


def test_the_doc_has_code():
    assert {lang for lang, _ in BLOCKS} >= {"sh", "python", "yaml", "json", "text"}


@pytest.mark.parametrize("block", blocks("sh"), ids=lambda b: b.split("\n")[0][:40])
def test_shell_blocks_run(live, block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert words[0] == "gpu-policy", line
        args, out = words[1:], None
        if ">" in args:
            args, out = args[:args.index(">")], args[args.index(">") + 1]
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            assert main(args) == 0, line
        if out:
            Path(out).write_text(captured.getvalue())


@pytest.mark.parametrize("block", blocks("python"), ids=lambda b: b.split("\n")[0][:40])
def test_python_blocks_run(live, block, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(block, str(DOC), "exec"), {})


def test_yaml_and_json_blocks_parse_and_grant_only_declared_permissions():
    for text in blocks("json"):
        json.loads(text)
    for text in blocks("yaml"):
        for doc in yaml.safe_load_all(text):
            assert doc["apiVersion"] and doc["kind"]
            for rule in doc.get("rules", []) if doc["kind"] in ("Role", "ClusterRole") else []:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            assert (verb, group, resource) in declared(), (doc["metadata"]["name"], verb, resource)


def test_the_usage_history_shown_is_what_the_leader_writes():
    (example,) = [doc for text in blocks("yaml") for doc in yaml.safe_load_all(text)
                  if doc["metadata"]["name"] == names.USAGE_CONFIGMAP]
    at = 1_800_000_000.0  # its `at`
    read = read_usage(example, at, 604_800, names.DEFAULT_NAMESPACE)
    assert read.problem is None and example["data"] == usage_data(read.history)
