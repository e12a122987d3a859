"""Every rejected case of the contract: one line naming file and field, exit 2."""

import pytest

from gpu_policy import ScenarioError, load_scenario
from gpu_policy.cli import main

BASE_NODES = "nodes: [{name: n1, gpus: 4}]\n"
BASE_QUEUES = "queues: [{name: q1, deserved: 2}]\n"

CASES = {
    "mig layout": ("nodes: [{name: n1, gpus: 1, mig: {1g.10gb: -1}}]\n" + BASE_QUEUES + "jobs: []\n",
                   r"nodes\[0\]\.mig: 1g.10gb: must be >= 0, got -1"),
    "mig profile": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 0.5, mig_profile: [3g]}]\n",
                    r"jobs\[0\] \(name: j\)\.mig_profile: must be a MIG profile name such as 1g.10gb, got \['3g'\]"),
    "mig slice above one gpu": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 2, mig_profile: 7g.80gb}]\n",
                                r"jobs\[0\] \(name: j\)\.gpus: a MIG slice is at most one GPU, got 2"),
    "mig slices overused": ("nodes: [{name: n1, gpus: 1, mig: {3g.40gb: 2}}]\n" + BASE_QUEUES +
                            "jobs: [{name: j, queue: q1, gpus: 0.5, mig_profile: 3g.40gb, replicas: 3, "
                            "running: [n1, n1, n1]}]\n",
                            r"jobs\[0\] \(name: j\)\.running\[2\]: node \"n1\" has 2 3g.40gb slices; its running jobs use more"),
    "whole job on mig node": ("nodes: [{name: n1, gpus: 1, mig: {3g.40gb: 2}}]\n" + BASE_QUEUES +
                              "jobs: [{name: j, queue: q1, gpus: 1, running: [n1]}]\n",
                              r"jobs\[0\] \(name: j\)\.running\[0\]: node \"n1\" has MIG slices only; the job asks for none"),
    "sharing strategy": ("nodes: [{name: n1, gpus: 4, gpu_sharing: {strategy: vgpu, replicas: 4}}]\n" + BASE_QUEUES
                         + "jobs: []\n", r"nodes\[0\]\.gpu_sharing: strategy must be one of time-slicing, mps, "
                                          r"got \"vgpu\""),
    "sharing replicas": ("nodes: [{name: n1, gpus: 4, gpu_sharing: {strategy: mps, replicas: 1}}]\n" + BASE_QUEUES
                         + "jobs: []\n", r"nodes\[0\]\.gpu_sharing: replicas must be >= 2, got 1"),
    "sharing shape": ("nodes: [{name: n1, gpus: 4, gpu_sharing: 4}]\n" + BASE_QUEUES + "jobs: []\n",
                      r"nodes\[0\]\.gpu_sharing: must be a mapping with strategy and replicas, got 4"),
    "unknown top-level key": (BASE_NODES + BASE_QUEUES + "jobs: []\nextra: 1\n",
                              r"extra: unknown field"),
    "unknown job key": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, gpu: 2}]\n",
                        r"jobs\[0\] \(name: j\)\.gpu: unknown field \(did you mean gpus\? allowed: checkpoint_age_s, "),
    "unknown key far from any field": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, zzz: 2}]\n",
                                       r"jobs\[0\] \(name: j\)\.zzz: unknown field \(allowed: checkpoint_age_s, "),
    "a long unknown key is not compared": (BASE_NODES + BASE_QUEUES + "jobs: []\n" + "p" * 65 + "olicy: 1\n",
                                           r"p{65}olicy: unknown field \(allowed: apiVersion, "),
    "unknown queue": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: nope, gpus: 1}]\n",
                      r"jobs\[0\] \(name: j\)\.queue: unknown queue \"nope\""),
    "negative gpus": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1}, {name: k, queue: q1, gpus: -1}]\n",
                      r"jobs\[1\] \(name: k\)\.gpus: must be > 0, got -1"),
    "1e30 GPUs (YAML reads it as JSON does)": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1e30}]\n",
                                               r"jobs\[0\] \(name: j\)\.gpus: must be at most 1,024, got 1e\+30"),
    "non-numeric gpus": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: many}]\n",
                         r"jobs\[0\] \(name: j\)\.gpus: must be a number, got \"many\""),
    "fraction above 1": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1.5}]\n",
                         r"jobs\[0\] \(name: j\)\.gpus: a fraction of a GPU must be below 1, got 1.5"),
    "subnormal fraction": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 4.9e-324}]\n",
                           r"jobs\[0\] \(name: j\)\.gpus: a fraction of a GPU must be at least 0.001 \(the planner counts "
                           r"thousandths\), got 5e-324"),
    "fraction below a thousandth": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 0.0004}]\n",
                                    r"jobs\[0\] \(name: j\)\.gpus: a fraction of a GPU must be at least 0.001"),
    "more running than replicas": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, running: [n1, n1]}]\n",
                                   r"jobs\[0\] \(name: j\)\.running: names 2 nodes but the job has 1 replicas"),
    "no room on node": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 3, running: [n1]}, "
                        "{name: k, queue: q1, gpus: 2, running: [n1]}]\n",
                        r"jobs\[0\] \(name: j\)\.running: node \"n1\" has no room: its running jobs use 5 gpus of 4"),
    "duplicate job": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1}, {name: j, queue: q1, gpus: 1}]\n",
                      r"jobs\[1\] \(name: j\)\.name: duplicate name \"j\""),
    "duplicate node": ("nodes: [{name: n1, gpus: 4}, {name: n1, gpus: 2}]\n" + BASE_QUEUES + "jobs: []\n",
                       r"nodes\[1\]\.name: duplicate name \"n1\""),
    "parent cycle": (BASE_NODES + "queues: [{name: a, parent: b}, {name: b, parent: a}]\njobs: []\n",
                     r"queues\[0\]\.parent: makes a cycle through \"a\""),
    "unknown parent": (BASE_NODES + "queues: [{name: a, parent: ghost}]\njobs: []\n",
                       r"queues\[0\]\.parent: unknown queue \"ghost\""),
    "running on unknown node": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, running: [n9]}]\n",
                                r"jobs\[0\] \(name: j\)\.running\[0\]: unknown node \"n9\""),
    "partial gang": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, replicas: 2, running: [n1]}]\n",
                     r"jobs\[0\] \(name: j\)\.running: a gang runs all 2 replicas or none"),
    "index out of range": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, running: [n1], gpu_indices: [[7]]}]\n",
                           r"jobs\[0\] \(name: j\)\.gpu_indices\[0\]: GPU 7 does not exist on n1"),
    "shared whole GPU": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, running: [n1], gpu_indices: [[0]]}, "
                         "{name: k, queue: q1, gpus: 1, running: [n1], gpu_indices: [[0]]}]\n",
                         r"jobs\[1\] \(name: k\)\.gpu_indices\[0\]: GPU 0 of n1 is already fully used"),
    "job on a department": (BASE_NODES + "queues: [{name: d}, {name: t, parent: d}]\njobs: [{name: j, queue: d, gpus: 1}]\n",
                            r"jobs\[0\] \(name: j\)\.queue: \"d\" is a department"),
    "bad expect action": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1}]\nexpect: {jobs: {j: run}}\n",
                          r"expect\.jobs\.j: must be one of keep, start, preempt, move, wait, got \"run\""),
    "wrong kind": ("kind: Plan\n" + BASE_NODES + BASE_QUEUES + "jobs: []\n", r"kind: must be Scenario, got \"Plan\""),
    "not yaml": ("nodes: [\n", r"not valid YAML or JSON at line"),
    "not a mapping": ("- 1\n- 2\n", r"must be a mapping with nodes, queues and jobs"),
    "negative deserved": (BASE_NODES + "queues: [{name: q1, deserved: -2}]\njobs: []\n",
                          r"queues\[0\]\.deserved: must be >= 0, got -2"),
    "missing gpus": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1}]\n", r"jobs\[0\] \(name: j\)\.gpus: is required"),
    "telemetry unknown key": (BASE_NODES + BASE_QUEUES + "jobs: []\ntelemetry: {jobz: {}}\n",
                              r"telemetry\.jobz: unknown field"),
    "telemetry profile of a waiting job": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1}]\n"
                                           "telemetry: {jobs: {j: {utilization: 5}}}\n",
                                           r"telemetry\.jobs\.j: names no running job"),
    "telemetry utilization above 100": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, running: [n1]}]\n"
                                        "telemetry: {jobs: {j: {utilization: 150}}}\n",
                                        r"telemetry\.jobs\.j\.utilization: must be a percentage from 0 to 100, got 150"),
    "telemetry gpu out of range": (BASE_NODES + BASE_QUEUES + "jobs: []\ntelemetry: {gpus: [{node: n1, gpu: 9, xid: 79}]}\n",
                                   r"telemetry\.gpus\[0\]\.gpu: GPU 9 does not exist on n1"),
    "unknown affinity operator": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, node_affinity: "
                                  "[{match_expressions: [{key: zone, operator: Near, values: [a]}]}]}]\n",
                                  r"jobs\[0\] \(name: [^)]+\)\.node_affinity\[0\]\.match_expressions\[0\]\.operator: must be one of "
                                  r"In, NotIn, Exists, DoesNotExist, Gt, Lt, got \"Near\""),
    "Gt with a word": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, node_affinity: "
                       "[{match_expressions: [{key: gpus, operator: Gt, values: [many]}]}]}]\n",
                       r"jobs\[0\] \(name: [^)]+\)\.node_affinity\[0\]\.match_expressions\[0\]\.values: must be one whole number for Gt"),
    "In without values": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, node_affinity: "
                          "[{match_expressions: [{key: zone, operator: In}]}]}]\n",
                          r"node_affinity\[0\]\.match_expressions\[0\]\.values: must list at least one value for In"),
    "empty affinity": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, node_affinity: []}]\n",
                       r"jobs\[0\] \(name: [^)]+\)\.node_affinity: must not be empty"),
    "match field other than the name": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, node_affinity: "
                                        "[{match_fields: [{key: metadata.uid, operator: In, values: [x]}]}]}]\n",
                                        r"match_fields\[0\]\.key: must be metadata\.name"),
    "toleration Exists with a value": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, tolerations: "
                                       "[{key: k, operator: Exists, value: v}]}]\n",
                                       r"jobs\[0\] \(name: [^)]+\)\.tolerations\[0\]\.value: must be empty with operator Exists"),
    "toleration unknown key": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, tolerations: "
                               "[{key: k, seconds: 3}]}]\n", r"jobs\[0\] \(name: [^)]+\)\.tolerations\[0\]\.seconds: unknown field"),
    "taint without effect": ("nodes: [{name: n1, gpus: 4, taints: [{key: k}]}]\n" + BASE_QUEUES + "jobs: []\n",
                             r"nodes\[0\]\.taints\[0\]\.effect: is required"),
    "node selector not a mapping": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, node_selector: [a]}]\n",
                                    r"jobs\[0\] \(name: [^)]+\)\.node_selector: must be a mapping of label names to values"),
    "namespace unlike the name": (BASE_NODES + BASE_QUEUES + "jobs: [{name: a/j, queue: q1, gpus: 1, namespace: b}]\n",
                                  r"jobs\[0\] \(name: [^)]+\)\.namespace: must be the namespace its name gives \(\"a\"\), got \"b\""),
    "namespace selector without matchLabels": (BASE_NODES + "queues: [{name: q1, namespace_selector: {team: a}}]\njobs: []\n",
                                               r"queues\[0\]\.namespace_selector\.team: unknown field"),
    "namespaces not a list": (BASE_NODES + "queues: [{name: q1, namespaces: ml}]\njobs: []\n",
                              r"queues\[0\]\.namespaces: must be a list of namespace names"),
    "negative usage": (BASE_NODES + "queues: [{name: q1, usage_gpu_h: -3}]\njobs: []\n",
                       r"queues\[0\]\.usage_gpu_h: must be >= 0, got -3"),
    "usage half-life of 0": (BASE_NODES + BASE_QUEUES + "jobs: []\npolicy: {usage_half_life_s: 0}\n",
                             r"policy\.usage_half_life_s: must be > 0, got 0"),
    "negative usage weight": (BASE_NODES + BASE_QUEUES + "jobs: []\npolicy: {usage_half_life_s: 60, usage_weight: -1}\n",
                              r"policy\.usage_weight: must be >= 0, got -1"),
    "topology level unknown": (BASE_NODES + BASE_QUEUES + "topology: [{name: rack, label: r}]\n"
                               "jobs: [{name: j, queue: q1, gpus: 1, topology: {required: row}}]\n",
                               r"jobs\[0\] \(name: j\)\.topology\.required: names no topology level \(levels: rack\), "
                               r"got \"row\""),
    "topology without levels": (BASE_NODES + BASE_QUEUES + "jobs: [{name: j, queue: q1, gpus: 1, topology: {preferred: rack}}]\n",
                                r"jobs\[0\] \(name: j\)\.topology\.preferred: names no topology level \(levels: none"),
    "preferred wider than required": (BASE_NODES + BASE_QUEUES + "topology: [{name: block, label: b}, {name: rack, label: r}]\n"
                                      "jobs: [{name: j, queue: q1, gpus: 1, topology: {required: rack, preferred: block}}]\n",
                                      r"jobs\[0\] \(name: j\)\.topology\.preferred: must be a level narrower than the "
                                      r"required \"rack\", got \"block\""),
    "empty job topology": (BASE_NODES + BASE_QUEUES + "topology: [{name: rack, label: r}]\n"
                           "jobs: [{name: j, queue: q1, gpus: 1, topology: {}}]\n",
                           r"jobs\[0\] \(name: j\)\.topology: must name a required level, a preferred level or both"),
    "two levels, one label": (BASE_NODES + BASE_QUEUES + "topology: [{name: block, label: r}, {name: rack, label: r}]\n"
                              "jobs: []\n", r"topology\[1\]\.label: \"r\" is already the label of \"block\""),
    "topology level without label": (BASE_NODES + BASE_QUEUES + "topology: [{name: rack}]\njobs: []\n",
                                     r"topology\[0\]\.label: is required"),
    "duplicate namespace": (BASE_NODES + BASE_QUEUES + "jobs: []\nnamespaces: [{name: a}, {name: a}]\n",
                            r"namespaces\[1\]\.name: duplicate name \"a\""),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rejected_with_field_path(case, write_scenario):
    text, pattern = CASES[case]
    path = write_scenario(text)
    with pytest.raises(ScenarioError, match=pattern) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message


@pytest.mark.parametrize("case", ["negative gpus", "parent cycle", "not yaml"])
def test_cli_exit_2_one_line_no_traceback(case, write_scenario, capsys):
    path = write_scenario(CASES[case][0])
    assert main(["plan", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpu-policy: {path}: ")
    assert "Traceback" not in captured.err


def test_missing_file(capsys, tmp_path):
    assert main(["plan", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read the file" in capsys.readouterr().err


def test_json_is_accepted(write_scenario):
    path = write_scenario('{"nodes": [{"name": "n", "gpus": 1}], "queues": [{"name": "q"}],'
                          ' "jobs": [{"name": "j", "queue": "q", "gpus": 1}]}', "s.json")
    assert load_scenario(path).jobs[0].gpus == 1


def test_bad_solver_option(capsys):
    from tests.conftest import scenario_files

    assert main(["plan", str(scenario_files()[0]), "--time-limit", "0"]) == 2
    assert "--time-limit: must be a finite number > 0 and <= 86,400, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize("option,value", [("--priority", "1e30"), ("--priority", str(2 ** 63)),
                                          ("--max-wait", "nan"), ("--max-wait", "inf"), ("--max-wait", "1e308")])
def test_a_step_option_that_would_stop_planning_is_one_line(option, value, capsys):
    """Issue 29: `--priority 1e30` wrote a reservation every later plan refused for 600 s, and
    `--max-wait nan` or `inf` looped forever; both are refused before anything is looked at."""
    argv = ["step", "--cluster", "k8s://", "--kubeconfig", "/nonexistent", "--job", "ml/j", "--queue", "q",
            "--gpus", "1", "--execute", option, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpu-policy: {option}: must be ") and err.count("\n") == 1 and "Traceback" not in err, err
