"""The model every part shares: the cluster snapshot (`scenario`), the Plan (`plan`), where
replicas sit on GPUs (`layout`), what telemetry says (`telemetry`, `signals`), the placement
and composition facts of a cluster (`placement`, `composition`), what observing and acting
give (`cluster`), reading and writing scenario files (`scenario_file`, `fields`,
`safe_load`), and the names of the checkpoint protocol between controller and trainer (`checkpointing`). Sources, the planner and actuators all depend on it, and it on none of them.

The snapshot's classes are named here (`from gpu_policy.model import Job, Scenario`);
everything else is imported from its module.
"""

from gpu_policy.model.scenario import (EPS, NON_PREEMPTIBLE_PRIORITY, TERMINATING_QUEUE, Composable, ComposableNode,
                                       ComposablePool, GpuSharing, Job, JobTopology, ModelQuota, Namespace, Node, Policy,
                                       Queue, Scenario, TopologyLevel, gpus_fit)

__all__ = ["EPS", "NON_PREEMPTIBLE_PRIORITY", "TERMINATING_QUEUE", "Composable", "ComposableNode", "ComposablePool",
           "GpuSharing", "Job", "JobTopology", "ModelQuota", "Namespace", "Node", "Policy", "Queue", "Scenario",
           "TopologyLevel", "gpus_fit"]
