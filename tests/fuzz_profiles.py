"""How many examples each property-based fuzz test tries (docs/contributing.md, "Fuzzing").

``GPU_POLICY_FUZZ`` picks the profile: ``ci`` (the default when ``CI=true``) keeps the
suite's run time bounded with a fixed budget, ``dev`` (the default elsewhere) is the
budget each test names, and ``long`` tries ten times that, for a local run before a
release. Every profile is derandomised, so a run tries the same inputs each time.
"""

import os

FACTORS = {"ci": 0.25, "dev": 1.0, "long": 10.0}


def profile() -> str:
    chosen = os.environ.get("GPU_POLICY_FUZZ") or ("ci" if os.environ.get("CI") == "true" else "dev")
    if chosen not in FACTORS:
        raise ValueError(f"GPU_POLICY_FUZZ: must be one of {', '.join(FACTORS)}, got {chosen!r}")
    return chosen


def examples(dev: int) -> int:
    """The example count for a test whose `dev` budget is `dev`, in the chosen profile."""
    return max(1, round(dev * FACTORS[profile()]))
