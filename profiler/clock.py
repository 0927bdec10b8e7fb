"""When this machine booted and when a process started, on the wall clock records carry
(Linux /proc), for the start-up phases of the node agent and the worker."""

from __future__ import annotations

import os
import time


def boot_time() -> float | None:
    """time.time() when this machine's kernel booted, to 10 ms (Linux /proc/uptime), if known."""
    try:
        with open("/proc/uptime") as uptime:
            return time.time() - float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def process_start_time(pid: int | str = "self") -> float | None:
    """time.time() when a process started (Linux /proc/PID/stat), if known."""
    booted = boot_time()
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # Field 22 is the start time in clock ticks after boot; the name (field 2) may hold
            # spaces, so count from its closing parenthesis.
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if booted is None:
        return None
    return booted + int(fields[19]) / os.sysconf("SC_CLK_TCK")
