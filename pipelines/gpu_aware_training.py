"""Example pipeline: GPU-aware training in K checkpointed rounds (docs/kubeflow.md).

Each round observes (DCGM telemetry), plans (fair share, reclaim, packing) and, when
the plan grants GPUs, trains for a budget of steps on the planned node with the
planned GPU count, resuming from the checkpoints of the round before.

KFP has no loop whose exit depends on data, so the rounds are unrolled: a fixed K
(`ROUNDS`), each nested inside the previous round's "GPUs granted" condition.
Waiting is bounded inside plan_gpu_allocation (`max_wait_s`); if it ends without
GPUs, the later rounds do not run and a rerun of the pipeline resumes from the
checkpoints. Compile with `make components` (pipelines/compiled/).
"""

import json
from importlib import resources

import yaml
from kfp import dsl, kubernetes

from gpu_policy.kfp import Components, components

ROUNDS = 3
#: The embedded simulated cluster, the default so that the pipeline runs anywhere (kfp.local included);
#: run it with scenario_yaml="" to plan the live cluster named by `cluster` (k8s://: the pod's service
#: account). One line of JSON: kfp 2.17 writes defaults into the compiled file's header comment
#: unescaped, and a multi-line default would break the YAML.
EXAMPLE_CLUSTER = json.dumps(yaml.safe_load((resources.files("gpu_policy") / "examples" / "training-cluster.yaml").read_text()))
CHECKPOINT_MOUNT = "/checkpoints"


def build_pipeline(ops: "Components | None" = None, rounds: int = ROUNDS, accelerator_type: str = "nvidia.com/gpu"):
    """The pipeline function, with `ops` (default: the released components), `rounds` rounds, and
    the cluster's GPU resource name (fixed when compiling: kfp 2.17 does not carry a pipeline
    parameter used only in set_accelerator_type into a dsl.If group)."""
    ops = ops or components()

    @dsl.pipeline(name="gpu-aware-training",
                  description="Observe, plan and train in checkpointed rounds on the GPUs the plan grants.")
    def gpu_aware_training(cluster: str = "k8s://", scenario_yaml: str = EXAMPLE_CLUSTER, job_name: str = "train",
                           queue: str = "team-a", gpus: float = 1.0,
                           total_steps: int = 300, steps_per_round: int = 100,
                           checkpoint_uri: str = f"{CHECKPOINT_MOUNT}/train", checkpoint_pvc: str = "gpu-policy-checkpoints",
                           prometheus_url: str = "", max_wait_s: float = 600.0, poll_interval_s: float = 30.0):
        def round_(k: int, after=None):
            telemetry = ops.collect_gpu_telemetry(cluster=cluster, scenario_yaml=scenario_yaml,
                                                  prometheus_url=prometheus_url)
            telemetry.set_display_name(f"telemetry-{k}")
            if after is not None:
                telemetry.after(after)
            plan = ops.plan_gpu_allocation(cluster=cluster, scenario_yaml=scenario_yaml, job_name=job_name,
                                           queue=queue, gpus=gpus,
                                           telemetry=telemetry.outputs["telemetry"], max_wait_s=max_wait_s,
                                           poll_interval_s=poll_interval_s)
            plan.set_display_name(f"plan-{k}")
            gate = ops.step_may_start(can_start=plan.outputs["can_start"])  # a single output for dsl.If
            gate.set_display_name(f"may-start-{k}")
            with dsl.If(gate.output == True, name=f"gpus-granted-{k}"):  # noqa: E712 (a KFP condition)
                # gpu_count also goes in as an input: kfp 2.17 does not carry a channel used only in
                # set_accelerator_limit into a dsl.If group, and the step logs what it was granted
                train = ops.checkpointed_train_step(checkpoint_uri=checkpoint_uri, total_steps=total_steps,
                                                    steps_per_run=steps_per_round, gpu_count=plan.outputs["gpu_count"],
                                                    job_name=job_name, queue=queue)
                train.set_display_name(f"train-{k}")
                kubernetes.add_node_affinity_json(train, plan.outputs["node_affinity"])
                train.set_accelerator_type(accelerator_type)
                train.set_accelerator_limit(plan.outputs["gpu_count"])
                kubernetes.mount_pvc(train, pvc_name=checkpoint_pvc, mount_path=CHECKPOINT_MOUNT)
                if k < rounds:
                    round_(k + 1, after=train)

        round_(1)

    return gpu_aware_training


gpu_aware_training = build_pipeline()

if __name__ == "__main__":
    from kfp import compiler

    compiler.Compiler().compile(gpu_aware_training, "pipelines/compiled/gpu_aware_training.yaml")
