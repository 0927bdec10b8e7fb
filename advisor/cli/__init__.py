"""`advisor` command line. Each command group lives in its own module."""

from __future__ import annotations

import importlib

from advisor.cli.app import app

# Imported for their registrations; each keeps heavy imports (pandas, sklearn) inside functions
# so that `advisor recommend` starts fast.
COMMAND_MODULES = ("recommend", "catalog", "data", "fit", "evaluate")


def main() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"advisor.cli.{name}")
    app()
