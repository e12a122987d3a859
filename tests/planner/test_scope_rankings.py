"""The greedy scope's reclaim rankings (`rankings.ReclaimRankings`) look only at the nodes
holding victims of a legality the job admits, judging one victim for all alike, and find a
node's victims only when asked: the same victims, in the same order, as judging every
victim on every node."""

from gpu_policy import PlannerConfig, parse_scenario
from gpu_policy.model.layout import running_layout
from gpu_policy.planner.core.rule import PlanInputs
from gpu_policy.planner.core.rankings import ReclaimRankings
from gpu_policy.planner.rules.inside import may_preempt_inside
from gpu_policy.planner.rules.victims import victim_cost, victim_order_key
from gpu_policy.planner.ruleset import RuleSet
from tests.planner.random_clusters import rich_scenario


def every_victim_judged(layout, victims, job, givers, idle, age_s):
    """Per node in cluster order, the victims legal for `job` with the healthy GPUs each holds
    whole there, cheapest first: each victim on each node judged by the rules."""
    by_name = {v.name: v for v in victims}
    out = {}
    for n, nl in layout.nodes.items():
        held = {}
        for i, slot in enumerate(nl.slots):
            if slot.whole in by_name and nl.healthy(i):
                held[slot.whole] = held.get(slot.whole, 0) + 1
        legal = [(by_name[v], g) for v, g in held.items()
                 if by_name[v].is_preemptible and (by_name[v].queue in givers or may_preempt_inside(by_name[v], job))]
        legal.sort(key=lambda x: victim_order_key(x[0], victim_cost(x[0], age_s, x[0].name in idle)))
        if legal:
            out[n] = legal
    return out


def by_legality(rules, victims):
    """`victims` grouped as the scope groups its legal victims (`scope._Candidates.alike`)."""
    alike = {}
    for v in victims:
        alike.setdefault(rules.victim_key(v), []).append(v)
    return alike


def rankings_of(s, layout, free, victims, cost):
    rules = RuleSet.for_plan(PlanInputs(s, layout, None, PlannerConfig()))
    return ReclaimRankings(layout, free, by_legality(rules, victims), rules, cost)


def test_victims_are_those_of_judging_every_victim_on_every_node():
    compared = sum(compare(seed) for seed in range(60))
    assert compared > 100  # the seeds give victims to compare, not only empty rankings


def compare(seed: int) -> int:
    """Compare on one cluster; how many rankings had victims."""
    s = parse_scenario(rich_scenario(seed))
    layout = running_layout(s)
    cfg = PlannerConfig()
    running = [j for j in s.jobs if j.is_running]  # non-preemptible ones too: their legality differs
    idle = {j.name for j in running[::3]}
    free = {n: len(nl.free_indices()) for n, nl in layout.nodes.items()}
    rankings = rankings_of(s, layout, free, running,
                           lambda j: victim_cost(j, cfg.default_checkpoint_age_s, j.name in idle))
    queues = sorted({j.queue for j in s.jobs})
    compared = 0
    for job in (j for j in s.jobs if not j.is_running):
        for givers in (set(), set(queues[:1]), set(queues)):
            expected = every_victim_judged(layout, running, job, givers, idle, cfg.default_checkpoint_age_s)
            got = rankings.victims(job, givers)
            assert list(got) == list(expected)
            assert {n: [(v.name, g) for v, g in mine] for n, mine in got.items()} == \
                   {n: [(v.name, g) for v, g in mine] for n, mine in expected.items()}
            compared += bool(expected)
    return compared


def test_a_job_that_may_not_be_preempted_stands_for_none_alike_in_queue_and_priority():
    """a-keep and a-go share queue and priority, but only a-go may be preempted: a-new, of
    their queue and above them, may reclaim n1 alone."""
    s = parse_scenario({
        "nodes": [{"name": "n0", "gpus": 4}, {"name": "n1", "gpus": 4}],
        "queues": [{"name": "a", "deserved": 4}],
        "jobs": [{"name": "a-keep", "queue": "a", "gpus": 2, "priority": 10, "preemptible": False, "running": ["n0"]},
                 {"name": "a-go", "queue": "a", "gpus": 2, "priority": 10, "running": ["n1"]},
                 {"name": "a-new", "queue": "a", "gpus": 4, "priority": 50}]})
    layout = running_layout(s)
    running = [j for j in s.jobs if j.is_running]
    rankings = rankings_of(s, layout, {"n0": 2, "n1": 2}, running, lambda j: victim_cost(j, 1800, False))
    got = rankings.victims(s.jobs[2], set())
    assert {n: [(v.name, g) for v, g in mine] for n, mine in got.items()} == {"n1": [("a-go", 2)]}
