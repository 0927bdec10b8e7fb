"""Atomic checkpoints and the steps-lost marker."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from profiler import checkpoint


def state(step: int) -> dict:
    return {"step": step, "weights": torch.full((256, 1024), float(step))}


def test_round_trip_reports_time_and_size(tmp_path):
    saved = checkpoint.save(tmp_path, state(3))
    loaded, timed = checkpoint.load(tmp_path)
    assert loaded["step"] == 3 and torch.equal(loaded["weights"], state(3)["weights"])
    size = (tmp_path / "checkpoint.pt").stat().st_size
    assert saved.bytes == timed.bytes == size > 256 * 1024 * 4
    assert saved.seconds > 0 and timed.seconds > 0
    assert os.listdir(tmp_path) == ["checkpoint.pt"]  # no temporary file left behind


def test_load_without_a_checkpoint_is_none(tmp_path):
    assert checkpoint.load(tmp_path / "empty") is None


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    checkpoint.save(tmp_path, state(1))

    def torn_save(obj, out):
        out.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(tmp_path, state(2))
    monkeypatch.undo()
    assert checkpoint.load(tmp_path)[0]["step"] == 1
    assert os.listdir(tmp_path) == ["checkpoint.pt"]


def test_sigkill_while_saving_leaves_a_whole_checkpoint(tmp_path):
    """A process saving in a loop is killed at an arbitrary moment: what is on disk loads and
    is one consistent state, never a torn file."""
    script = textwrap.dedent(f"""
        import torch
        from profiler import checkpoint
        step = 0
        while True:
            step += 1
            checkpoint.save({str(tmp_path)!r}, {{"step": step,
                            "weights": torch.full((1024, 1024), float(step))}})
            print(step, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "1"  # one save finished
        time.sleep(0.37)  # then somewhere in the middle of a later one
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    loaded, _ = checkpoint.load(tmp_path)
    assert loaded["step"] >= 1
    assert torch.equal(loaded["weights"], torch.full((1024, 1024), float(loaded["step"])))


def test_marker_keeps_the_last_step_even_when_it_shrinks(tmp_path):
    marker = checkpoint.StepMarker(tmp_path / "run")
    assert marker.read() is None
    marker.write(12345)
    marker.write(7)  # a new attempt that restarted from an earlier checkpoint
    assert checkpoint.StepMarker(tmp_path / "run").read() == 7
    marker.close()
