"""docs/composition.md shows what the code does: its scenario loads, its ConfigMap is
accepted, its RBAC is what the code declares, its request is what gpu-policy writes, and
its commands run."""

import json
import re
import shlex
from pathlib import Path

import yaml

from gpu_policy import parse_scenario, plan
from gpu_policy.presentation.check import differences
from gpu_policy.cli import main
from gpu_policy.kubernetes import PERMISSIONS
from gpu_policy.kubernetes.write.attach import new_request
from gpu_policy.kubernetes.read.composable import settings_from_config_map
from gpu_policy.kubernetes.names import CRO_GROUP, CRO_PLURAL, PREVIOUS_SIZE_ANNOTATION, REQUESTED_AT_ANNOTATION

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "composition.md"


def blocks(language: str) -> list[str]:
    found = re.findall(r"^( *)```(\w+)\n(.*?)^\1```", DOC.read_text(), flags=re.S | re.M)
    return ["\n".join(line[len(indent):] for line in text.splitlines()) for indent, lang, text in found
            if lang == language]


def test_the_scenario_loads_and_says_what_it_expects():
    scenario = parse_scenario(yaml.safe_load(blocks("yaml")[0]), "docs/composition.md")
    c = scenario.composable
    assert [(n.name, n.max_gpus) for n in c.nodes] == [("node-3", 8), ("node-4", 2)] and c.pools[0].free == 6
    assert scenario.expect["compositions"] == {"node-3": 4}


def test_the_planner_decides_what_the_scenario_expects():
    scenario = parse_scenario(yaml.safe_load(blocks("yaml")[0]), "docs/composition.md")
    assert differences(plan(scenario), scenario.expect) == []


def test_the_config_map_is_accepted():
    (config_map,) = [yaml.safe_load(b) for b in blocks("yaml") if "kind: ConfigMap" in b]
    settings = settings_from_config_map(config_map)
    assert settings["pools"] == [{"model": "NVIDIA-A100-SXM4-80GB", "free": 6}]


def test_the_rbac_is_what_deploy_grants_and_covers_what_the_code_sends():
    (rule,) = [yaml.safe_load(b)[0] for b in blocks("yaml") if CRO_PLURAL in b]
    rbac = (ROOT / "deploy" / "base" / "rbac.yaml").read_text()
    (granted,) = [r for d in yaml.safe_load_all(rbac) if d["kind"] == "ClusterRole" for r in d["rules"]
                  if r["resources"] == [CRO_PLURAL]]
    declared = {p.verb for p in PERMISSIONS if p.resource == CRO_PLURAL and p.group == CRO_GROUP}
    assert rule == granted and declared <= set(rule["verbs"])


def test_the_request_is_what_gpu_policy_writes():
    (shown,) = [json.loads(b) for b in blocks("json") if "ComposabilityRequest" in b]
    written = new_request("node-3", "A100-80GB", 4, 0.0)
    for body in (shown, written):
        body["metadata"]["annotations"].pop(REQUESTED_AT_ANNOTATION)
    assert shown == written and written["metadata"]["annotations"] == {PREVIOUS_SIZE_ANNOTATION: "0"}


def test_the_commands_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    commands = [line for block in blocks("sh") for line in block.splitlines() if line.startswith("gpu-policy ")]
    assert len(commands) == 4
    for command in commands:
        argv = [arg.replace("tests/scenarios/", f"{ROOT}/tests/scenarios/") for arg in shlex.split(command)[1:]]
        assert main(argv) == 0, capsys.readouterr().err
    assert (tmp_path / "after.yaml").exists()
