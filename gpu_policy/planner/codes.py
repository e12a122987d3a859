"""Every code a reason may carry (`CODES`): the core's, then each rule's, in the rules' order.
Events, metrics, `gpu-policy status` and scripts match on them; docs/scenario.md lists them."""

from __future__ import annotations

from gpu_policy.planner.core.codes import CORE_CODES
from gpu_policy.planner.rules import RULES

#: Code -> what it means.
CODES: dict[str, str] = {**CORE_CODES, **{code: meaning for rule in RULES for code, meaning in rule.codes.items()}}
