"""The fake API server's first home, kept so `from tests.kubernetes.fake_api import
FakeKubernetes` goes on working: it lives in the package tests/kubernetes/fake/."""

from tests.kubernetes.fake import (BUILTIN, GATE, TOKEN, FakeKubernetes, FakeScheduler, Fault, Request, Resource,
                                   now_rfc3339)

__all__ = ["BUILTIN", "GATE", "TOKEN", "FakeKubernetes", "FakeScheduler", "Fault", "Request", "Resource", "now_rfc3339"]
