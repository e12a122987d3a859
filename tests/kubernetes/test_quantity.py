"""Quantities through the client's own parse_quantity, behind gpu-policy's bounds: the same
answers from kubernetes 30.x (.venv-kfp) and 36.x (.venv-airflow), as both suites run this."""

import re
from decimal import Decimal

import pytest

from gpu_policy.kubernetes.read.quantity import gib, parse_quantity


@pytest.mark.parametrize("text,value", [
    ("8", 8), ("500m", Decimal("0.5")), ("64Gi", 64 * 2 ** 30), ("1e3", 1000), ("2Ei", 2 * 2 ** 60),
    ("1Pi", 2 ** 50), ("250m", Decimal("0.25")), (" 16Gi ", 16 * 2 ** 30), (4, 4), (1.5, Decimal("1.5")),
    ("1e30", Decimal("1e30")), ("5n", Decimal("5e-9")),
])
def test_quantities(text, value):
    assert parse_quantity(text) == value


SYNTAX, LARGE = "must be a Kubernetes quantity such as 8, 500m or 64Gi", "must be a Kubernetes quantity below 10^30"


@pytest.mark.parametrize("value,message", [
    ("lots", SYNTAX), ("nan", SYNTAX), (float("nan"), SYNTAX), ("inf", SYNTAX), ("Infinity", SYNTAX), ("", SYNTAX),
    (True, SYNTAX), (None, SYNTAX), ("8Xi", SYNTAX), ("1ki", SYNTAX), ("1" * 65, SYNTAX),  # over 64 characters
    ("1e9999999Ki", LARGE), ("1e31", LARGE), ("-1e31", LARGE), (1e308, LARGE),
])
def test_what_is_no_quantity_is_one_message(value, message):
    with pytest.raises(ValueError, match=rf"^{re.escape(message)}, got "):
        parse_quantity(value)


def test_gib():
    assert gib("64Gi") == 64.0 and gib("512Mi") == 0.5
