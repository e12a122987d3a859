"""The example trainer (`gpu-policy train-example`'s, gpu_policy.checkpoint.example) as a real
process in a pod of the fake API server: it reads its pod's annotations from the downward-API
file `--pod-info` (which the test rewrites as the kubelet does) and notes each checkpoint on its
pod through the API server, as `OwnPod.here()` does inside a cluster with the pod's service
account (here: the test's kubeconfig). It prints its summary and exits as `train-example` does."""

import argparse
import json
import os
import sys

from gpu_policy.checkpoint.example import train_example
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.transport.client import KubeClient
from gpu_policy.kubernetes.transport.connect import connect
from gpu_policy.kubernetes.write.own_pod import OwnPod
from gpu_policy.model.checkpointing import POD_INFO_ENV


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--pod", required=True, help="NAMESPACE/NAME")
    p.add_argument("--pod-info", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--step-seconds", type=float, default=0.01)
    p.add_argument("--checkpoint-every", type=float, default=1e9)
    p.add_argument("--grace-period", type=float, default=30.0)
    args = p.parse_args()
    os.environ[POD_INFO_ENV] = args.pod_info
    api_client, _ = connect(None, args.kubeconfig, "k8s://")
    namespace, _, name = args.pod.partition("/")
    pod = OwnPod(KubeClient(api_client, "k8s://", KubernetesSettings(deadline_s=10, timeout_s=5)), namespace, name)
    summary = train_example(args.dir, args.steps, step_seconds=args.step_seconds, interval_s=args.checkpoint_every,
                            grace_period_s=args.grace_period, pod=pod)
    print(json.dumps(summary.to_dict()), flush=True)
    return 128 + summary.signal if summary.preempted else 0


if __name__ == "__main__":
    sys.exit(main())
