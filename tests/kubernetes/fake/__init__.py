"""A small Kubernetes API server for the tests: the real `kubernetes` client talks to it.

Stdlib `ThreadingHTTPServer` on 127.0.0.1, port 0. It speaks the API's JSON for the
resources gpu-policy reads and writes (nodes, namespaces, pods, configmaps, secrets, leases,
events.k8s.io/v1 events, KAI queues), and any custom resource registered with
`add_resource` (any group/version/plural, cluster-scoped or namespaced):

- LIST with `limit` and `continue` (a consistent snapshot per list; tokens can be
  expired, then a continue answers 410), `resourceVersion`, `fieldSelector` and
  `labelSelector` (`=`, `==`, `!=`, `key`, `!key`, `in (...)`, `notin (...)`);
- WATCH (`watch=true`) of every resource (watch.py): chunked JSON lines of ADDED, MODIFIED,
  DELETED from a `resourceVersion`, selectors applied to events, `timeoutSeconds`, BOOKMARKs
  with `allowWatchBookmarks=true` (every `bookmark_interval_s`, or at once on
  `send_bookmarks()`), an ERROR event with a 410 Status for a version older than the kept
  `history`; hooks `drop_watches()`, `expire_history(plural)`, `watch_connections()`,
  `open_watches()`;
- GET, POST (409 when it exists; `generateName`), PUT and PATCH (JSON merge patch,
  strategic merge patch as the client sends for a dict, JSON patch (RFC 6902) for a list,
  422 on a failed `test`; 409 when a body carries a stale `metadata.resourceVersion`), DELETE;
- the API server's validation (rules.py): scheduling gates set at create only and only
  removed afterwards, pod spec immutable except nodeSelector additions while gated, no
  nodeName with gates; events.k8s.io/v1 Events' required fields and 1 kB note;
- the MutatingAdmissionPolicy of deploy/ (`gate_gpu_pods = True`, pods.py): GPU pods created
  in namespaces labelled `gpu-policy.io/managed: "true"` get the `gpu-policy.io/admission` gate;
- a stand-in kube-scheduler (`FakeScheduler`, scheduler.py) that tests drive with `schedule_once()`,
  and `on_change`, told of every change to the store (a benchmark's scheduler follows releases by it);
- `pods/eviction` (201; 429 while a disruption budget blocks, with or without
  Retry-After; the evicted pod gets a deletionTimestamp, a DisruptionTarget condition and, as
  deletionGracePeriodSeconds, the Eviction's deleteOptions.gracePeriodSeconds, else its own);
- injected faults (`inject`: any status, e.g. 429 with Retry-After, 500, 410) and RBAC
  refusals (`forbid`: 403 for a verb on a resource);
- latency: every request but a watch served `latency_s` late, those sent side by side side by
  side (`peak_in_flight`: the most served at once);
- finalizers: a DELETE of an object that has some only sets its `deletionTimestamp`;
- controllers and admission webhooks of a resource (`admission`, `after_read`), e.g. the CDI
  operator of tests/kubernetes/fake_cdi.py;
- a request log (`requests`, `calls`), from which tests read what an observation cost,
  and `permissions_used`: the (verb, group, resource) of every request (a watch as "watch").

Any number of clients may talk to it at once (a second controller is a second client).
It is a test helper, not shipped; `with FakeKubernetes() as api:` stops it on exit.
"""

from .pods import GATE
from .scheduler import FakeScheduler
from .server import BUILTIN, TOKEN, FakeKubernetes, Fault, Request, Resource, now_rfc3339

__all__ = ["BUILTIN", "GATE", "TOKEN", "FakeKubernetes", "FakeScheduler", "Fault", "Request", "Resource", "now_rfc3339"]
