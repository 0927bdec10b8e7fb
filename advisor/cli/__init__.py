"""`advisor` command line. Each command group lives in its own module."""

from __future__ import annotations

import importlib
import os
import sys

from advisor.cli.app import app
from gpuadvisor.cli.app import run_app

# Imported for their registrations; each keeps heavy imports (pandas, sklearn) inside functions
# so that `advisor recommend` starts fast.
COMMAND_MODULES = ("recommend", "catalog", "data", "fit", "evaluate")


def main(args: list[str] | None = None) -> None:
    args = sys.argv[1:] if args is None else args
    command = next((arg for arg in args if not arg.startswith("-")), None)
    if command == "recommend":
        # Its numpy work is elementwise: a BLAS thread pool would only slow the start.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Only the command being invoked is imported (start-up time); all of them for the help
    # or a misspelt command.
    for name in (command,) if command in COMMAND_MODULES else COMMAND_MODULES:
        importlib.import_module(f"advisor.cli.{name}")
    run_app(app, args)
