"""Workload variants: what each derives, that a seed reproduces it, and bad options."""

import json
from collections import Counter

import pytest

from gpu_policy.cli import main
from gpu_policy.sim.openb import load_trace
from gpu_policy.sim.variants import Variant, confined_demand, derive, parse_variants, pod_list
from tests.sim.conftest import NODES, OPENB, PODS, write_trace

#: The small trace's pods, 40 times over: enough pods for shares to mean something.
MANY = PODS.splitlines()[0] + "\n" + "".join(
    f"q{i}-{line}\n" for i in range(40) for line in PODS.splitlines()[1:])


@pytest.fixture
def trace(tmp_path):
    return load_trace(write_trace(tmp_path / "many", NODES, MANY))


def pods_of(pod_list_):
    return [pod_list_.types[t] for t in pod_list_.type_of_pod]


def asked_share(pods, which):
    return sum(p.gpu_milli for p in pods if which(p)) / sum(p.gpu_milli for p in pods)


def test_parse_names_kinds_amounts_and_defaults():
    assert parse_variants("gpuspec") == [Variant("gpuspec", 0.33)]
    assert parse_variants("multigpu:0.4,cpu:2") == [Variant("multigpu", 0.4), Variant("cpu", 2.0)]
    assert str(Variant("cpu", 2.5)) == "cpu:2.5"


@pytest.mark.parametrize("text, message", [
    ("magic", r"--variant: unknown kind 'magic' in 'magic'; choose from gpuspec, multigpu, gpushare, cpu"),
    ("gpuspec:lots", r"--variant: gpuspec: expected a number after ':', got 'lots'"),
    ("gpushare:1.5", r"--variant: gpushare: must be a share in 0..1, got 1.5"),
    ("cpu:-1", r"--variant: cpu: must be a factor >= 0, got -1"),
    ("cpu:nan", r"--variant: cpu: must be a factor >= 0, got nan"),
])
def test_bad_variants_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_variants(text)


def test_a_seed_reproduces_its_list_and_another_seed_differs(trace):
    nodes, pods = trace
    variants = parse_variants("gpuspec:0.5,gpushare:0.6")
    first, again, other = (pods_of(derive(nodes, pods, variants, s)) for s in (3, 3, 4))
    assert first == again and first != other


def test_no_variant_is_the_list_itself(trace):
    nodes, pods = trace
    assert derive(nodes, pods, [], 0) is pods


def test_gpuspec_restricts_that_share_of_gpu_pods_to_models_that_can_hold_them(trace):
    nodes, pods = trace
    derived = pods_of(derive(nodes, pods, parse_variants("gpuspec:0.5"), 0))
    gpu = [p for p in derived if p.gpus]
    pinned = [p for p in gpu if p.spec is not None]
    assert len(pinned) == round(0.5 * len(gpu))
    assert all(1 <= len(p.spec) <= 2 for p in pinned)             # this cluster has two models
    assert all(p.spec == frozenset({"G2"}) for p in pinned if p.gpus == 8)   # no T4 node has 8 GPUs
    assert [p.spec for p in derived if not p.gpus] == [None] * 40    # CPU-only pods keep no model
    # the rest of each pod is unchanged
    assert Counter((p.cpu, p.memory, p.gpus, p.milli) for p in derived) == \
        Counter((p.cpu, p.memory, p.gpus, p.milli) for p in pods_of(pods))


def test_multigpu_turns_one_gpu_pods_into_copies_of_multi_gpu_pods(trace):
    nodes, pods = trace
    before = pods_of(pods)
    derived = pods_of(derive(nodes, pods, parse_variants("multigpu:0.8"), 1))
    assert len(derived) == len(before)
    assert asked_share(before, lambda p: p.gpus > 1) < 0.8 <= asked_share(derived, lambda p: p.gpus > 1)
    assert set(derived) <= set(before)                              # every pod is one of the trace's
    assert sum(p.gpus == 0 for p in derived) == sum(p.gpus == 0 for p in before)
    # and back: fewer multi-GPU pods than the trace has
    fewer = pods_of(derive(nodes, pods, parse_variants("multigpu:0.2"), 1))
    assert 0.2 - 0.3 < asked_share(fewer, lambda p: p.gpus > 1) <= 0.2


def test_gpushare_one_makes_every_gpu_pod_a_share(trace):
    nodes, pods = trace
    derived = pods_of(derive(nodes, pods, parse_variants("gpushare:1.0"), 2))
    assert all(p.gpus == 1 and p.milli < 1000 for p in derived if p.gpus)
    assert {p.milli for p in derived if p.gpus} <= {500, 250, 810}
    # a list already there is left as it is (it has no whole-GPU pods left to copy)
    twice = derive(nodes, pod_list(derived), parse_variants("gpushare:1.0"), 2)
    assert pods_of(twice) == derived


def test_cpu_scales_the_cpu_only_pods_and_leaves_gpu_pods(trace):
    nodes, pods = trace
    before = pods_of(pods)
    for factor, expected in (("2.5", 100), ("0.5", 20), ("0", 0)):
        derived = pods_of(derive(nodes, pods, parse_variants(f"cpu:{factor}"), 0))
        assert sum(p.gpus == 0 for p in derived) == expected
        assert Counter(p for p in derived if p.gpus) == Counter(p for p in before if p.gpus)


def test_a_kind_the_list_lacks_cannot_be_copied(trace):
    nodes, _ = trace
    whole_only = pod_list([p for p in pods_of(trace[1]) if p.gpus == 1 and p.milli == 1000])
    with pytest.raises(ValueError, match=r"--variant multigpu:0.5: the pod list has no pods of the kind to copy"):
        derive(nodes, whole_only, parse_variants("multigpu:0.5"), 0)


@pytest.mark.skipif(not OPENB.is_dir(), reason=f"the openb trace is not at {OPENB}: set GPU_POLICY_OPENB_DIR")
def test_on_openb_gpuspec_oversubscribes_a_small_node_model():
    nodes, pods = load_trace(OPENB)
    small = {m for k, m in enumerate(nodes.models) if nodes.gpus[nodes.model == k].max() <= 2 and
             nodes.gpus[nodes.model == k].sum() >= 100}                      # P100, T4: 2-GPU nodes
    for seed in range(3):
        ratio = confined_demand(nodes, derive(nodes, pods, parse_variants("gpuspec:0.33"), seed))
        assert max(ratio[m] for m in small) > 1.05, ratio


def test_cli_runs_a_variant_and_names_it(trace_dir, capsys):
    assert main(["simulate", "openb", "--trace-dir", str(trace_dir), "--seeds", "0", "--policies", "fgd",
                 "--variant", "gpuspec:0.5", "--format", "json", "--workers", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["trace"]["workload"] == "gpuspec:0.5"
    assert main(["simulate", "openb", "--trace-dir", str(trace_dir), "--seeds", "0", "--policies", "fgd",
                 "--variant", "cpu:2", "--workers", "1"]) == 0
    assert capsys.readouterr().out.startswith("openb (cpu:2): 5 nodes")


def test_cli_bad_variant_is_one_line_and_exit_2(trace_dir, capsys):
    assert main(["simulate", "openb", "--trace-dir", str(trace_dir), "--variant", "gpuspec:2"]) == 2
    err = capsys.readouterr().err
    assert err == "gpu-policy: --variant: gpuspec: must be a share in 0..1, got 2\n"

