"""Pinned dependencies: the component image's and each test environment's.

    python scripts/constraints.py --write image-constraints.txt dist/gpu_policy-VERSION-py3-none-any.whl

resolves ``gpu-policy[kfp]`` from that wheel in a fresh virtual environment and writes
every installed distribution, pinned, with the date it was resolved (``make constraints``
does this). The Dockerfile installs with these pins; the components' ``metadata.yaml``
takes its ``lastVerified`` date from here; tests/test_dist.py checks that the file
installs and is the complete set the wheel needs.

    python scripts/constraints.py --lock core --extras dev,release --write requirements/core.lock .

does the same for one test environment from the checkout (``make lock`` writes all three);
the Makefile builds each environment with its lock, so a fresh machine installs exactly
what CI tested, whatever the package index serves that day.
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: The extras the image installs: kfp runs the components' executor.
IMAGE_EXTRAS = "kfp"
HEADER = """\
# The component image's dependencies, pinned: gpu-policy[{extras}] resolved from the wheel in a
# fresh Python {python} virtual environment. Regenerate with `make constraints` after a change
# to setup.py's requirements; tests/test_dist.py fails while this file is stale.
# resolved: {date}
"""
LOCK_HEADER = """\
# The {lock} test environment's dependencies, pinned: gpu-policy[{extras}] resolved from the
# checkout in a fresh Python {python} virtual environment. The Makefile installs with it
# (pip install -c). Regenerate with `make lock` after a change to setup.py's requirements.
# resolved: {date}
"""
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


@dataclass(frozen=True)
class Constraints:
    resolved: datetime.date
    """When the pins were last resolved (and, from then on, tested by CI)."""
    pins: dict[str, str]
    """Distribution name, normalised (PEP 503), to its exact version."""


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read(path: Path) -> Constraints:
    """The pins and resolution date of a constraints file written by `write`."""
    resolved, pins = None, {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.startswith("# resolved: "):
            resolved = datetime.date.fromisoformat(line.removeprefix("# resolved: ").strip())
        elif line and not line.startswith("#"):
            match = _PIN.match(line.strip())
            if not match:
                raise SystemExit(f"{path}:{number}: must be NAME==VERSION, got {line!r}")
            pins[normalise(match[1])] = match[2]
    if resolved is None:
        raise SystemExit(f"{path}: must have a '# resolved: YYYY-MM-DD' line (written by make constraints)")
    return Constraints(resolved, pins)


def installed(python: Path) -> dict[str, str]:
    """Every distribution installed for `python` but gpu-policy, pip and setuptools: name to version."""
    code = "import importlib.metadata as m; print('\\n'.join(f\"{d.metadata['Name']}=={d.version}\" for d in m.distributions()))"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout
    pins = dict(_PIN.match(line).groups() for line in out.split())
    return {normalise(k): v for k, v in pins.items() if normalise(k) not in {"gpu-policy", "pip", "setuptools", "wheel"}}


def write(out: Path, source: Path, extras: str = IMAGE_EXTRAS, lock: str | None = None,
          require: tuple[str, ...] = ()) -> None:
    """Resolve ``source[extras]`` (a wheel, or the checkout) with the requirements `require`
    in a fresh venv and write its pins to `out`."""
    with tempfile.TemporaryDirectory(prefix="gpu-policy-constraints-") as tmp:
        subprocess.run([sys.executable, "-m", "venv", tmp], check=True)
        python = Path(tmp) / "bin" / "python"
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"{source.resolve()}[{extras}]", *require],
                       check=True)
        pins = installed(python)
    header = (HEADER if lock is None else LOCK_HEADER).format(
        lock=lock, extras=extras, python=f"{sys.version_info.major}.{sys.version_info.minor}",
        date=datetime.date.today().isoformat())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + "".join(f"{name}=={pins[name]}\n" for name in sorted(pins)))
    print(f"wrote {out}: {len(pins)} pins")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, required=True, metavar="OUT", help="the constraints file to write")
    parser.add_argument("--extras", default=IMAGE_EXTRAS, help=f"the extras resolved (default {IMAGE_EXTRAS})")
    parser.add_argument("--lock", metavar="ENV", help="write a test environment's lock (named ENV), not the image's")
    parser.add_argument("--require", action="append", default=[], metavar="SPEC",
                        help="a requirement resolved with it, e.g. torch==2.13.0 (the CPU build this machine has)")
    parser.add_argument("source", type=Path, help="the gpu-policy wheel `make dist` built, or the checkout")
    args = parser.parse_args()
    write(args.write, args.source, args.extras, args.lock, tuple(args.require))
    return 0


if __name__ == "__main__":
    sys.exit(main())
