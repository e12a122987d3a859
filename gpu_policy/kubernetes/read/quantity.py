"""Kubernetes resource quantities ("500m", "64Gi", "1e3") as numbers."""

from __future__ import annotations

import re
from decimal import Decimal

_SUFFIX = {"": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": 10 ** 3, "M": 10 ** 6,
           "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30,
           "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
#: longer quantity texts and larger values are not resources but attacks (1e9999999Ki)
_LONGEST, _LARGEST = 64, Decimal("1e30")
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(value) -> Decimal:
    """The quantity's value in base units; ValueError when it is not a quantity."""
    if isinstance(value, bool):
        raise ValueError(f"must be a Kubernetes quantity, got {value!r}")
    text = str(value).strip()
    match = _QUANTITY.match(text) if len(text) <= _LONGEST else None
    if not match:
        raise ValueError(f"must be a Kubernetes quantity such as 8, 500m or 64Gi, got {_shown(value)}")
    try:
        amount = Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except ArithmeticError:  # decimal's Overflow: the exponent is beyond any context
        amount = None
    if amount is None or not amount.is_finite() or abs(amount) > _LARGEST:
        raise ValueError(f"must be a Kubernetes quantity below 10^30, got {_shown(value)}")
    return amount


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."



def gib(value) -> float:
    """Bytes as GiB, the scenario's unit for memory."""
    return float(parse_quantity(value) / 2 ** 30)

