"""`profiler` command line. Each command group lives in its own module."""

from __future__ import annotations

import sys

from gpuadvisor.cli.app import run_app
from profiler.cli.app import app

# Imported for their @app.command registrations; each keeps heavy imports inside functions.
COMMAND_MODULES = ("card", "sweep", "runs", "ingest", "cleanup")


def main(args: list[str] | None = None) -> None:
    run_app(app, sys.argv[1:] if args is None else args, __name__, COMMAND_MODULES)
