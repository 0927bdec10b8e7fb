"""The repository's scripts and benchmarks as modules, for tests (they are no package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_script(path: str):
    """The script at `path` (relative to the repository: `benchmarks/optimizer_update.py`)
    imported as a module named after its file."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
