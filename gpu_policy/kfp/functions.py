"""The bodies of the KFP components: parse inputs, call the core, write outputs.

KFP serialises each function's source into the component, so every import is
inside the body. The logic lives in `gpu_policy.actions.cycle` (observe ->
decide), `gpu_policy.actions.step` and `gpu_policy.checkpoint`. gpu-policy's own errors
end the component with one line (no traceback).
"""

from typing import NamedTuple

from kfp.dsl import Artifact, Input, Output


def collect_gpu_telemetry(telemetry: Output[Artifact], cluster: str = "k8s://", scenario_yaml: str = "",
                          prometheus_url: str = "", window_s: float = 600.0, prometheus_client: str = "") -> str:
    """Collect DCGM GPU telemetry and judge it: idle, unhealthy and busy GPUs, memory headroom.

    Args:
        telemetry: The per-GPU and per-job signals as JSON, for plan_gpu_allocation.
        cluster: The cluster: k8s:// (the pod's service account), k8s://CONTEXT, or a scenario file path.
        scenario_yaml: A cluster snapshot as scenario YAML or JSON (the embedded simulated cluster);
            when given it replaces `cluster`, and its telemetry section is simulated unless a Prometheus URL is given.
        prometheus_url: A Prometheus that scrapes dcgm-exporter; empty for simulated telemetry (embedded cluster only).
        window_s: Seconds of telemetry judged (idle means below 5% for the whole window).
        prometheus_client: 'module:function' of your code that returns a prometheus_api_client PrometheusConnect
            (your auth, headers, TLS, proxy), instead of prometheus_url; its module must be under a trusted
            prefix ($GPU_POLICY_TRUSTED_MODULES in your image).

    Returns:
        Output: One line: what was seen, or why monitoring is unavailable (never a failure).
    """
    import json

    from gpu_policy.cluster import ScenarioCluster, open_cluster
    from gpu_policy.actions.cycle import observe
    from gpu_policy.checkpoint.budget import resolve
    from gpu_policy.errors import GpuPolicyError, UsageError
    from gpu_policy.telemetry import PrometheusDcgmSource, TelemetrySettings

    settings = TelemetrySettings(window_s=window_s)
    try:
        if prometheus_client and prometheus_url:
            raise UsageError("give prometheus_url or prometheus_client, not both")
        prometheus = PrometheusDcgmSource(resolve(prometheus_client, "prometheus_client")(), settings) \
            if prometheus_client else prometheus_url or None
        source = ScenarioCluster.from_text(scenario_yaml, "scenario_yaml") if scenario_yaml else open_cluster(cluster)
        obs = observe(source, prometheus, settings)
    except GpuPolicyError as e:
        raise SystemExit(f"gpu-policy: {e}") from None
    if obs.signals is None:
        why = obs.telemetry_unavailable or "no Prometheus URL given for a live cluster"
        data, summary = {"unavailable": why}, why
    else:
        data, summary = obs.signals.to_dict(), json.dumps(obs.signals.describe())
    with open(telemetry.path, "w") as f:
        json.dump(data, f)
    return summary


def plan_gpu_allocation(job_name: str, queue: str, gpus: float, plan: Output[Artifact], cluster: str = "k8s://",
                        scenario_yaml: str = "", telemetry: Input[Artifact] = None, replicas: int = 1,
                        priority: int = 50, max_wait_s: float = 0.0, poll_interval_s: float = 30.0,
                        execute: bool = True) -> NamedTuple(
        "StepPlan", [("node_affinity", dict), ("gpu_count", int), ("can_start", bool), ("reason", str)]):
    """Plan GPUs for the next training step: fair share, reclaim and packing as one integer program.

    Args:
        job_name: The training job this step belongs to (NAMESPACE/NAME on Kubernetes; a bare NAME lives in the
            pipeline's namespace); added to the snapshot as waiting unless there.
        queue: The team (queue) the job runs for.
        gpus: GPUs per replica; below 1 is a fraction of one GPU.
        plan: The whole Plan as JSON.
        cluster: The cluster: k8s:// (the pod's service account), k8s://CONTEXT, or a scenario file path.
        scenario_yaml: A cluster snapshot as scenario YAML or JSON (the embedded simulated cluster, for a local
            run); when given it replaces `cluster`.
        telemetry: Signals from collect_gpu_telemetry; without them telemetry is simulated on the embedded
            cluster and left out on a live one.
        replicas: Replicas of the job (a gang: all start or none).
        priority: The job's priority (100 and above is non-preemptible).
        max_wait_s: Seconds to keep observing and re-planning while the step may not start (0: decide once).
        poll_interval_s: Seconds between looks at the cluster while waiting.
        execute: Carry the plan out on a live cluster, holding the planning lease: evict its victims (through
            the Eviction API, honouring disruption budgets) and reserve the step's GPUs until its pods run. False
            only plans. The embedded cluster of scenario_yaml is never changed.

    Returns:
        node_affinity: Node affinity JSON for the training step (kfp-kubernetes add_node_affinity_json).
        gpu_count: GPUs per replica for the training step's accelerator limit.
        can_start: Whether the step may start now.
        reason: Why it waits, or where it starts.
    """
    import json
    from collections import namedtuple

    from gpu_policy import Job
    from gpu_policy.cluster import ScenarioCluster, open_cluster
    from gpu_policy.actions.cycle import wait_for_step
    from gpu_policy.errors import GpuPolicyError
    from gpu_policy.telemetry import ClusterSignals

    signals, warning = None, None
    if telemetry is not None:
        with open(telemetry.path) as f:
            data = json.load(f)
        signals = None if "unavailable" in data else ClusterSignals.from_dict(data)
        warning = data.get("unavailable")
    job = Job(name=job_name, queue=queue, gpus=gpus, replicas=replicas, priority=priority)
    try:
        source = ScenarioCluster.from_text(scenario_yaml, "scenario_yaml") if scenario_yaml else open_cluster(cluster)
        decision = wait_for_step(source, job, telemetry=signals, max_wait_s=max_wait_s, poll_interval_s=poll_interval_s,
                                 execute=execute and not scenario_yaml)
    except GpuPolicyError as e:
        raise SystemExit(f"gpu-policy: {e}") from None
    result = decision.plan.to_dict()
    if warning:
        result["warnings"].append(warning)
    with open(plan.path, "w") as f:
        json.dump(result, f, indent=2)
    outputs = namedtuple("StepPlan", ["node_affinity", "gpu_count", "can_start", "reason"])
    return outputs(decision.node_affinity, decision.gpu_count, decision.can_start, decision.reason)


def checkpointed_train_step(checkpoint_uri: str, total_steps: int, steps_per_run: int, gpu_count: int = 0,
                            step_function: str = "gpu_policy.checkpoint.example:example_step",
                            init_function: str = "gpu_policy.checkpoint.example:initial_state",
                            grace_period_s: float = 30.0, keep_last: int = 3, job_name: str = "",
                            queue: str = "") -> NamedTuple(
        "TrainStep", [("step_reached", int), ("checkpoint_uri", str), ("preempted", bool)]):
    """Train for a budget of steps, resuming from the newest checkpoint, safe against preemption.

    Args:
        checkpoint_uri: Where checkpoints live: a path (on a PVC) or an fsspec URL (s3://, gs://).
        total_steps: Steps of the whole training; a step that reaches it only confirms.
        steps_per_run: Most steps this pipeline step runs.
        gpu_count: GPUs the plan granted this step (logged; the pod's accelerator limit carries it).
        step_function: 'module:function' of the training step, called as f(state, k) -> state.
        init_function: 'module:function' returning the state before step 0.
        grace_period_s: Seconds between SIGTERM and SIGKILL (the pod's terminationGracePeriodSeconds).
        keep_last: Checkpoints to keep.
        job_name: The job plan_gpu_allocation planned (its job_name); in a cluster the pod labels itself with it
            and its queue, so the plan finds it and drops its reservation. Empty: no labels.
        queue: The job's team (queue), as given to plan_gpu_allocation.

    Returns:
        step_reached: Steps done when this pipeline step ended.
        checkpoint_uri: Where the checkpoints are.
        preempted: Always False here: a preempted step saves, then exits 128 + the signal so that a retry resumes it.
    """
    from collections import namedtuple

    from gpu_policy.checkpoint.budget import run_step_budget
    from gpu_policy.kubernetes.write.own_pod import OwnPod

    pod = OwnPod.here()  # in a cluster: this step's pod, told its job and each checkpoint (best effort)
    if job_name and queue:
        pod.label_job(job_name, queue)
    summary = run_step_budget(checkpoint_uri, total_steps, steps_per_run, step_function, init_function,
                              grace_period_s, keep_last, pod=pod)
    print(f"steps {summary.first_step} -> {summary.last_step} on {gpu_count} planned GPU(s); "
          f"checkpoints written: {summary.checkpoints_written}")
    if summary.preempted:
        raise SystemExit(128 + summary.signal)
    outputs = namedtuple("TrainStep", ["step_reached", "checkpoint_uri", "preempted"])
    return outputs(summary.last_step, checkpoint_uri, False)


def step_may_start(can_start: bool) -> bool:
    """Pass plan_gpu_allocation's can_start on as this task's single output, for a dsl.If.

    kfp.local 2.17 evaluates a dsl.If only on a task's single output, not on one
    field of a NamedTuple; this pick component keeps the pipeline runnable locally.

    Args:
        can_start: plan_gpu_allocation's can_start output.

    Returns:
        Output: The same value.
    """
    return can_start


def run_gated_pod(pod_manifest: dict, job_name: str, queue: str, gpus: float, cluster: str = "k8s://",
                  scenario_yaml: str = "", replicas: int = 1, priority: int = 50, max_wait_s: float = 3600.0,
                  poll_interval_s: float = 10.0, run_timeout_s: float = 86400.0, saves_on_request: bool = False,
                  checkpoint_every_s: float = 0.0) -> NamedTuple(
        "GatedPod", [("released", bool), ("node", str), ("reason", str), ("phase", str)]):
    """Run a training pod that gpu-policy's controller admits: created gated, released onto the node it chose.

    Args:
        pod_manifest: The training pod as a Kubernetes Pod manifest (image, command, volumes; metadata.name
            required, metadata.namespace defaults to the pipeline's). Its first container gets the GPUs.
        job_name: The training job the pod belongs to (the label gpu-policy.io/job).
        queue: The team (queue) the job runs for (the label gpu-policy.io/queue).
        gpus: GPUs the pod asks for; below 1 is a fraction of one GPU (the gpu-policy.io/gpu-fraction annotation).
        cluster: The cluster: k8s:// (the pod's service account) or k8s://CONTEXT.
        scenario_yaml: A cluster snapshot as scenario YAML or JSON (the embedded simulated cluster): when given,
            the step is planned in-process and no pod is created.
        replicas: Pods of the job (a gang): the controller waits until that many exist.
        priority: The job's priority, for the embedded cluster's plan (on a live cluster, the pod's own).
        max_wait_s: Seconds to wait for the release; then the task fails with gpu-policy's last reason and the
            pod stays queued (a retry of the task waits for the same pod).
        poll_interval_s: Seconds between looks at the pod and its Events.
        run_timeout_s: Seconds the released pod may run before the task stops waiting for it.
        saves_on_request: The trainer uses gpu-policy's PreemptionGuard (run_training_steps or a trainer callback):
            the pod is declared to save on request and shown its annotations (docs/checkpointing.md), so a
            preemption asks it to checkpoint first.
        checkpoint_every_s: Seconds between the trainer's periodic checkpoints (0: unknown).

    Returns:
        released: Whether the controller released the pod (on the embedded cluster: whether the plan starts it).
        node: The node it was released onto (the plan's first node on the embedded cluster).
        reason: gpu-policy's reason, from the newest Event about the pod (the plan's on the embedded cluster).
        phase: The pod's phase when the task stopped waiting (Succeeded); empty on the embedded cluster.
    """
    from collections import namedtuple

    from gpu_policy.errors import GpuPolicyError

    outputs = namedtuple("GatedPod", ["released", "node", "reason", "phase"])
    try:
        if scenario_yaml:  # the embedded cluster: planned in-process, as plan_gpu_allocation does
            from gpu_policy import Job
            from gpu_policy.cluster import ScenarioCluster
            from gpu_policy.actions.cycle import wait_for_step

            job = Job(name=job_name, queue=queue, gpus=gpus, replicas=replicas, priority=priority)
            decision = wait_for_step(ScenarioCluster.from_text(scenario_yaml, "scenario_yaml"), job, execute=False)
            print(f"{'start' if decision.can_start else 'not yet'}: {decision.reason}")
            return outputs(decision.can_start, (decision.nodes or [""])[0], decision.reason, "")
        from gpu_policy.kubernetes.write.gated_step import await_finish, run_gated, with_checkpoint_protocol
        from gpu_policy.kubernetes.write.step_client import open_step_client

        client, namespace = open_step_client(cluster)
        pod = {**pod_manifest, "metadata": {"namespace": namespace, **(pod_manifest.get("metadata") or {})}}
        if saves_on_request:
            pod = with_checkpoint_protocol(pod, checkpoint_every_s or None)
        admission = run_gated(client, pod, job_name, queue, replicas, max_wait_s, poll_interval_s, progress=print,
                              gpus=gpus)
        if not admission.released:
            raise SystemExit(f"gpu-policy: {admission.line()}: not admitted within {max_wait_s:g} s")
        phase = await_finish(client, *admission.pod.split("/"), run_timeout_s, poll_interval_s)
    except GpuPolicyError as e:
        raise SystemExit(f"gpu-policy: {e}") from None
    print(f"pod {admission.pod} ended {phase} (its log: kubectl -n {admission.pod.replace('/', ' logs ')})")
    if phase != "Succeeded":
        raise SystemExit(f"gpu-policy: pod {admission.pod} ended {phase}, not Succeeded")
    return outputs(True, admission.node, admission.reason, phase)


def run_trainjob(trainjob_manifest: dict, job_name: str, queue: str, cluster: str = "k8s://", num_nodes: int = 0,
                 gpus_per_node: int = 0, max_wait_s: float = 3600.0, poll_interval_s: float = 10.0,
                 run_timeout_s: float = 86400.0) -> NamedTuple(
        "TrainJobRun", [("released", bool), ("node", str), ("reason", str), ("phase", str)]):
    """Run a Kubeflow Trainer TrainJob whose pods gpu-policy's controller admits together, as one gang.

    Args:
        trainjob_manifest: The TrainJob (trainer.kubeflow.org/v1alpha1) as a manifest: metadata.name, spec.runtimeRef,
            spec.trainer; metadata.namespace defaults to the pipeline's. gpu-policy adds one runtimePatches entry that
            gates its trainer pods and labels them with the job and queue.
        job_name: The training job its pods belong to (the label gpu-policy.io/job).
        queue: The team (queue) the job runs for (the label gpu-policy.io/queue).
        cluster: The cluster: k8s:// (the pod's service account) or k8s://CONTEXT.
        num_nodes: Nodes (pods) of the TrainJob, its spec.trainer.numNodes; 0 keeps the manifest's.
        gpus_per_node: GPUs each pod asks for, in spec.trainer.resourcesPerNode; 0 keeps the manifest's.
        max_wait_s: Seconds to wait for the release of all its pods; then the task fails with gpu-policy's last
            reason and the TrainJob stays queued (a retry of the task waits for the same TrainJob).
        poll_interval_s: Seconds between looks at the TrainJob, its pods and their Events.
        run_timeout_s: Seconds the released TrainJob may run before the task stops waiting for it.

    Returns:
        released: Whether the controller released all the TrainJob's pods.
        node: The nodes they were released onto, comma-separated, in the pods' order.
        reason: gpu-policy's reason, from the newest Event about its pods.
        phase: How the TrainJob ended (Complete).
    """
    from collections import namedtuple

    from gpu_policy.errors import GpuPolicyError
    from gpu_policy.kubernetes.write.step_client import open_step_client
    from gpu_policy.kubernetes.write.trainjob_step import admitted_train_job, await_gang_release, await_train_job_end

    try:
        body = admitted_train_job(trainjob_manifest, job_name, queue, num_nodes, gpus_per_node)
        client, namespace = open_step_client(cluster)
        meta = body["metadata"] = {"namespace": namespace, **body["metadata"]}
        client.create_train_job(meta["namespace"], body)
        admission = await_gang_release(client, meta["namespace"], meta["name"], max_wait_s, poll_interval_s,
                                       progress=print)
        if not admission.released:
            raise SystemExit(f"gpu-policy: {admission.line()}: not admitted within {max_wait_s:g} s")
        end = await_train_job_end(client, meta["namespace"], meta["name"], run_timeout_s, poll_interval_s,
                                  progress=print)
    except GpuPolicyError as e:
        raise SystemExit(f"gpu-policy: {e}") from None
    if end.phase != "Complete":
        raise SystemExit(f"gpu-policy: {end.line()}" + ("" if end.phase else f": not ended within {run_timeout_s:g} s"))
    outputs = namedtuple("TrainJobRun", ["released", "node", "reason", "phase"])
    return outputs(True, ",".join(admission.nodes), admission.reason, end.phase)
