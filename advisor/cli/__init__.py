"""`advisor` command line. Each command group lives in its own module."""

from __future__ import annotations

import os
import sys

from advisor.cli.app import app
from gpuadvisor.cli.app import invoked_command, run_app

# Imported for their registrations; each keeps heavy imports (pandas, sklearn) inside functions
# so that `advisor recommend` starts fast.
COMMAND_MODULES = ("recommend", "catalog", "data", "fit", "evaluate", "check")


def main(args: list[str] | None = None) -> None:
    args = sys.argv[1:] if args is None else args
    if invoked_command(args) == "recommend":
        # Its numpy work is elementwise: a BLAS thread pool would only slow the start.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    run_app(app, args, __name__, COMMAND_MODULES)
