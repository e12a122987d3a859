"""Kubernetes resource quantities ("500m", "64Gi", "1e3") as numbers.

The `kubernetes` client's own `kubernetes.utils.parse_quantity` reads them, behind the bounds
an object from a hostile or broken cluster needs (docs/hostile.md): at most 64 characters,
a finite value, and below 10^30 (`1e9999999Ki` is no resource but an attack).
"""

from __future__ import annotations

from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext

_LONGEST, _LARGEST = 64, Decimal("1e30")
#: the widest exponent range decimal has, for the client's arithmetic (its default stops at 10^999999)
_WIDEST = Context(Emax=MAX_EMAX, Emin=MIN_EMIN)


def parse_quantity(value) -> Decimal:
    """The quantity's value in base units; ValueError when it is not a quantity."""
    from kubernetes.utils import parse_quantity as client_parse

    text = "" if isinstance(value, bool) else str(value).strip()  # True is no quantity, though an int
    try:
        with localcontext(_WIDEST):  # 1e9999999Ki is a number, too large: the same answer from every client
            amount = client_parse(text) if 0 < len(text) <= _LONGEST else None
    except ValueError:  # not a number, or an unknown suffix
        amount = None
    except ArithmeticError:  # decimal's Overflow even so: an exponent near 10^18 (clients before 37 raise it)
        raise ValueError(f"must be a Kubernetes quantity below 10^30, got {_shown(value)}") from None
    if amount is None or not amount.is_finite():
        raise ValueError(f"must be a Kubernetes quantity such as 8, 500m or 64Gi, got {_shown(value)}")
    if amount.copy_abs() > _LARGEST:  # copy_abs: no arithmetic, so no context to overflow
        raise ValueError(f"must be a Kubernetes quantity below 10^30, got {_shown(value)}")
    return amount


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def gib(value) -> float:
    """Bytes as GiB, the scenario's unit for memory."""
    return float(parse_quantity(value) / 2 ** 30)
