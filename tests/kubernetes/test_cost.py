"""What one observation costs the API server at the seed talk's scale (4,000 workloads)."""

import time

from tests.kubernetes.objects import large_scenario, load_into


def test_one_observation_at_1000_nodes_and_4200_pods(api, cluster):
    scenario = large_scenario(nodes=1000, pods=4200)
    load_into(api, scenario, time.time())
    api.reset_log()
    obs = cluster().observe()
    assert obs.observed["api_calls"] <= 20 and obs.observed["api_calls"] == len(api.requests) == 14
    assert obs.observed["objects"] == 1000 + 4200
    assert api.calls("/api/v1/nodes") == 2 and api.calls("/api/v1/pods") == 9  # pages of 500
    assert all(r.query.get("limit") == "500" for r in api.requests if r.verb == "list")
    assert not [r for r in api.requests if "secrets" in r.path]  # no Secret, ever
    assert not [r for r in api.requests if r.path.startswith("/api/v1/namespaces/jobs/pods")]  # nothing per pod
    assert len(obs.scenario.nodes) == 1000 and sum(j.replicas for j in obs.scenario.jobs) == 4200
    # DRA-only nodes' GPUs count on every look: one LIST of ResourceSlices, here a 404 (no
    # resource.k8s.io/v1 served) that costs nothing more and says nothing
    dra = [(r.path, r.status) for r in api.requests if r.path.startswith("/apis/resource.k8s.io/")]
    assert dra == [("/apis/resource.k8s.io/v1/resourceslices", 404)] and not obs.warnings
