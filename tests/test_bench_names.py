"""A bench script run by its path (`python bench/x.py`) has bench/ first on sys.path, so a
bench module named as a library hides that library from every bench script
(bench/prometheus_client.py once made `bench/webhook.py --help` fail with an ImportError)."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.py")), ids=lambda p: p.stem)
def test_no_bench_module_is_named_as_an_importable_module(script):
    assert importlib.util.find_spec(script.stem) is None, f"{script.name} hides the module {script.stem}"
