"""`profiler` command line. Each command group lives in its own module."""

from __future__ import annotations

import importlib

from profiler.cli.app import app

# Imported for their @app.command registrations; each keeps heavy imports inside functions.
COMMAND_MODULES = ("card", "sweep", "runs", "cleanup")


def main() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"profiler.cli.{name}")
    app()
