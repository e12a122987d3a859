"""Kubernetes resource quantities ("500m", "64Gi", "1e3") as numbers.

The `kubernetes` client's own `kubernetes.utils.parse_quantity` reads them, behind the bounds
an object from a hostile or broken cluster needs (docs/hostile.md): at most 64 characters,
a finite value, and below 10^30 (`1e9999999Ki` is no resource but an attack).
"""

from __future__ import annotations

from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext
from functools import cache
from typing import Callable

_LONGEST, _LARGEST = 64, Decimal("1e30")
#: the widest exponent range decimal has, for the client's arithmetic (its default stops at 10^999999)
_WIDEST = Context(Emax=MAX_EMAX, Emin=MIN_EMIN)
_NOT_A_QUANTITY = "must be a Kubernetes quantity such as 8, 500m or 64Gi, got {}"
_TOO_LARGE = "must be a Kubernetes quantity below 10^30, got {}"


def parse_quantity(value) -> Decimal:
    """The quantity's value in base units; ValueError when it is not a quantity."""
    text = "" if isinstance(value, bool) else str(value).strip()  # True is no quantity, though an int
    if not 0 < len(text) <= _LONGEST:
        raise ValueError(_NOT_A_QUANTITY.format(_shown(value)))
    parse = _client_parse()
    try:
        amount = parse(text)
    except (ValueError, ArithmeticError):  # not a quantity, or beyond decimal's default range (1e9999999Ki)
        amount = _widely(parse, text, value)
    if not amount.is_finite():
        raise ValueError(_NOT_A_QUANTITY.format(_shown(value)))
    if not -_LARGEST <= amount <= _LARGEST:  # comparisons: no arithmetic, so no context to overflow
        raise ValueError(_TOO_LARGE.format(_shown(value)))
    return amount


@cache
def _client_parse() -> Callable[[str], Decimal]:
    """The client's own parse_quantity (imported once, on first use: the client is large)."""
    from kubernetes.utils import parse_quantity as client_parse

    return client_parse


def _widely(parse: Callable[[str], Decimal], text: str, value) -> Decimal:
    """The quantity read again in decimal's widest context, so that an exponent beyond the
    default range reads as the number it is (too large), from every client alike (before
    37.x they raise decimal's Overflow, 37.x a ValueError)."""
    try:
        with localcontext(_WIDEST):
            return parse(text)
    except ValueError:
        raise ValueError(_NOT_A_QUANTITY.format(_shown(value))) from None
    except ArithmeticError:  # an exponent near 10^18 overflows even there
        raise ValueError(_TOO_LARGE.format(_shown(value))) from None


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def gib(value) -> float:
    """Bytes as GiB, the scenario's unit for memory."""
    return float(parse_quantity(value) / 2 ** 30)
