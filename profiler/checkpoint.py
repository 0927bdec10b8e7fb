"""Atomic training checkpoints, and the marker that tells a restart how many steps were lost.

A checkpoint is one file, DIR/checkpoint.pt, replaced atomically: the new state is written to
a temporary file in the same directory, fsynced, then renamed over the old one (and the
directory fsynced), so a process killed at any moment leaves either the old or the new
checkpoint whole, never a torn one. The worker keeps one DIR per node (each node's local rank 0
saves the same state there), so the loss of any node loses no checkpoint.

DIR/last_step holds the last global step the node finished, rewritten in place every step (one
pwrite of a fixed-width number, no fsync: it only has to survive the death of the process,
which the page cache ensures). After a restart, last_step - restored step = steps lost.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKPOINT_NAME = "checkpoint.pt"
MARKER_NAME = "last_step"
_MARKER_WIDTH = 20


@dataclass(frozen=True)
class Timed:
    seconds: float
    bytes: int


def checkpoint_path(directory: str | os.PathLike) -> Path:
    return Path(directory) / CHECKPOINT_NAME


def save(directory: str | os.PathLike, state: dict[str, Any]) -> Timed:
    """Write `state` (tensors and plain values) atomically; returns the time taken and size."""
    import torch

    started = time.perf_counter()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            torch.save(state, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, checkpoint_path(directory))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
    return Timed(time.perf_counter() - started, checkpoint_path(directory).stat().st_size)


def load(directory: str | os.PathLike, device: Any = "cpu") -> tuple[dict[str, Any], Timed] | None:
    """The latest checkpoint's state (tensors on `device`) and the time taken, or None."""
    import torch

    path = checkpoint_path(directory)
    if not path.exists():
        return None
    started = time.perf_counter()
    state = torch.load(path, map_location=device, weights_only=True)
    return state, Timed(time.perf_counter() - started, path.stat().st_size)


class StepMarker:
    """The last finished global step, kept in DIR/last_step."""

    def __init__(self, directory: str | os.PathLike):
        self.path = Path(directory) / MARKER_NAME
        self._fd: int | None = None

    def read(self) -> int | None:
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None

    def write(self, step: int) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.pwrite(self._fd, str(step).rjust(_MARKER_WIDTH).encode(), 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
