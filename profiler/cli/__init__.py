"""`profiler` command line. Each command group lives in its own module."""

from __future__ import annotations

import importlib
import sys

from gpuadvisor.cli.app import run_app
from profiler.cli.app import app

# Imported for their @app.command registrations; each keeps heavy imports inside functions.
COMMAND_MODULES = ("card", "sweep", "runs", "cleanup")


def main(args: list[str] | None = None) -> None:
    args = sys.argv[1:] if args is None else args
    command = next((arg for arg in args if not arg.startswith("-")), None)
    # Only the command being invoked is imported; all of them for the help or a misspelt one.
    for name in (command,) if command in COMMAND_MODULES else COMMAND_MODULES:
        importlib.import_module(f"profiler.cli.{name}")
    run_app(app, args)
