"""Optional libraries and the extra that brings each (docs/install.md says how to install one).

A missing optional library is bad input, not a bug: `require` turns the
ImportError into `MissingExtra`, one line naming the extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gpu_policy.errors import MissingExtra

#: Import name -> the gpu-policy extra that installs it.
EXTRA_OF = {
    "accelerate": "hf",
    "airflow": "airflow",
    "gcsfs": "gcs",
    "highspy": "highs",
    "kfp": "kfp",
    "lightning": "lightning",
    "matplotlib": "report",
    "s3fs": "s3",
    "transformers": "hf",
}


def require(module: str, what: str) -> ModuleType:
    """Import `module` for `what` (e.g. ``--plot``), or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(what, module.split(".")[0], EXTRA_OF[module.split(".")[0]]) from None


def pyplot(what: str) -> ModuleType:
    """matplotlib's pyplot on the file-only Agg backend, for `what` (e.g. ``--plot``),
    or one line saying which extra brings matplotlib."""
    require("matplotlib", what).use("Agg")
    return require("matplotlib.pyplot", what)


__all__ = ["EXTRA_OF", "pyplot", "require"]
