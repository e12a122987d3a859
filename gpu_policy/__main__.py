"""`python -m gpu_policy`: the same as `python -m gpu_policy.cli` and the `gpu-policy` command."""

import runpy

runpy.run_module("gpu_policy.cli", run_name="__main__", alter_sys=True)
