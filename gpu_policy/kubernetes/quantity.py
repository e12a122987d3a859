"""Kubernetes resource quantities ("500m", "64Gi", "1e3") as numbers."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIX = {"": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": 10 ** 3, "M": 10 ** 6,
           "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30,
           "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(value) -> Decimal:
    """The quantity's value in base units; ValueError when it is not a quantity."""
    if isinstance(value, bool):
        raise ValueError(f"must be a Kubernetes quantity, got {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"must be a Kubernetes quantity such as 8, 500m or 64Gi, got {value!r}")
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except InvalidOperation as e:
        raise ValueError(f"must be a Kubernetes quantity, got {value!r}") from e


def gib(value) -> float:
    """Bytes as GiB, the scenario's unit for memory."""
    return float(parse_quantity(value) / 2 ** 30)

