"""-v/--verbose: Python logging of this project's packages, one concise line a record on stderr.
Other libraries keep Python's default (their warnings only), so -vv is not a flood."""

from __future__ import annotations

import logging
import sys

PACKAGES = ("gpuadvisor", "cloud", "profiler", "advisor")
LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)  # by the count of -v
FORMAT = "%(relativeCreated)6.0fms %(levelname)s %(name)s: %(message)s"


class _Stderr(logging.StreamHandler):
    """Writes to sys.stderr as it is when a record comes, not as it was at start: a rich live
    display (`profiler sweep`) redirects it to print lines above itself, and tests capture it."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(FORMAT))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


_HANDLER = _Stderr()


def set_verbosity(count: int) -> None:
    """WARNING, INFO with -v, DEBUG with -vv (or more)."""
    level = LEVELS[min(count, len(LEVELS) - 1)]
    for name in PACKAGES:
        logger = logging.getLogger(name)
        logger.setLevel(level)
        if _HANDLER not in logger.handlers:
            logger.addHandler(_HANDLER)
