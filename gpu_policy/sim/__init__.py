"""Trace-driven simulation of GPU placement: the openb loaders, the FGD paper's
workload-inflation experiment, and the placement policies it compares
(docs/simulate.md)."""
