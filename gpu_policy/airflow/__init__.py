"""An Airflow provider for gpu-policy (docs/airflow.md).

Airflow finds it through the ``apache_airflow_provider`` entry point, which calls
`get_provider_info`; importing this package does not import Airflow.
"""

import importlib.util

from gpu_policy._version import __version__
from gpu_policy.errors import MissingExtra

if importlib.util.find_spec("airflow") is None:  # the provider's modules need it; say which extra brings it
    raise MissingExtra("gpu_policy.airflow", "Apache Airflow", "airflow")

MODULES = {
    "hooks": ["gpu_policy.airflow.hooks.dcgm", "gpu_policy.airflow.hooks.cluster"],
    "operators": ["gpu_policy.airflow.operators.telemetry", "gpu_policy.airflow.operators.plan",
                  "gpu_policy.airflow.operators.training", "gpu_policy.airflow.operators.pod",
                  "gpu_policy.airflow.operators.gated_pod", "gpu_policy.airflow.operators.trainjob",
                  "gpu_policy.airflow.operators.apply"],
    "sensors": ["gpu_policy.airflow.sensors.plan"],
    "triggers": ["gpu_policy.airflow.triggers.admission"],
}


def get_provider_info() -> dict:
    return {
        "package-name": "gpu-policy",
        "name": "gpu-policy",
        "description": "GPU fair share, reclaim and packing before each training step, with DCGM telemetry "
                       "and preemption-safe checkpointed training.",
        "versions": [__version__],
        "integrations": [{"integration-name": "gpu-policy", "tags": ["software"]}],
        **{kind: [{"integration-name": "gpu-policy", "python-modules": modules}] for kind, modules in MODULES.items()},
        "connection-types": [{"hook-class-name": "gpu_policy.airflow.hooks.dcgm.DcgmHook",
                              "connection-type": "gpu_policy_dcgm"}],
    }
