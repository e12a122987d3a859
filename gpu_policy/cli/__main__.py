"""`python -m gpu_policy.cli`: the same as the `gpu-policy` command."""

import sys

from gpu_policy.cli import main

sys.exit(main())
