"""The training worker in this process (a gloo group of one): measuring until the estimate is
stable, its records, its step timer and its one-line errors."""

import json
import os
import signal
import time

import pytest

from profiler import worker

# mobilenet_v2 at 16 px is among the fastest zoo models on a CPU (about 0.1 s a step).
WORKLOAD = {"model": "mobilenet_v2", "batch_per_gpu": 2, "image_size": 16}


def run_worker(tmp_path, **settings) -> list[dict]:
    return worker.run_here(worker.WorkerConfig(**{
        **WORKLOAD, "sink": str(tmp_path / "sink"), "cluster": "w",
        "checkpoint_dir": str(tmp_path / "ckpt"), **settings}))


@pytest.mark.slow
def test_bf16_autocast_and_periodic_checkpoints(tmp_path, one_thread):
    records = run_worker(tmp_path, precision="bf16", max_steps=5, checkpoint_every_steps=2,
                         min_warmup_steps=0)
    assert [r["step"] for r in records if r["type"] == "checkpoint_save"] == [2, 4]
    # timed: not step 1 (start-up), nor 3 and 5 (their time holds a save)
    assert [r["step"] for r in records if r["type"] == "first_step"] == [1]
    (result,) = [r for r in records if r["type"] == "result"]
    assert result["precision"] == "bf16" and result["global_step"] == 5
    assert result["steps_measured"] == 2 and result["warmup_steps"] == 0
    assert result["stable"] is False and result["throughput_lo"] is None  # too few steps
    assert result["throughput"] == pytest.approx(2 / result["step_time_mean"])
    assert result["checkpoint_save_s"] > 0 and result["checkpoint_restore_s"] > 0
    assert result["peak_allocated_bytes"] is None and result["peak_reserved_bytes"] is None
    # What one tiny operator costs this machine's host: microseconds, not milliseconds.
    assert 0 < result["host_op_us"] < 1000
    assert result["optimizer"] == "sgd"  # what the update's traffic is priced as
    assert records[-1]["type"] == "result"  # worker_exit comes from main(), around the trainer


def test_host_dispatch_is_timed_per_operator(monkeypatch):
    """Each round's host time over its operators, the median of the rounds."""
    import torch

    ticks = iter([0.0, 1.0, 10.0, 10.5, 20.0, 22.0, 30.0, 30.2, 40.0, 43.0])
    monkeypatch.setattr(worker.time, "perf_counter", lambda: next(ticks))
    # rounds of 1.0, 0.5, 2.0, 0.2 and 3.0 s over 500 operators: the median 1.0 s, 2,000 us
    assert worker.host_dispatch_us(torch.device("cpu")) == pytest.approx(
        1.0 / worker.DISPATCH_PROBE_OPS * 1e6)


@pytest.mark.slow
def test_sigusr1_makes_rank_0_checkpoint_at_the_next_check(tmp_path, one_thread, monkeypatch):
    """What the node agent does on a revocation notice: the save comes at the next agreement
    between ranks (every CHECK_EVERY steps), not at a periodic time."""
    first_step = worker.Trainer.on_first_step

    def warned_after_first_step(self):
        first_step(self)
        os.kill(os.getpid(), signal.SIGUSR1)

    monkeypatch.setattr(worker.Trainer, "on_first_step", warned_after_first_step)
    records = run_worker(tmp_path, max_steps=worker.CHECK_EVERY + 2)
    saves = [(r["step"], r["reason"]) for r in records if r["type"] == "checkpoint_save"]
    assert saves == [(worker.CHECK_EVERY, "notice")]


@pytest.mark.slow
def test_min_seconds_holds_the_first_attempt_past_its_stable_point(tmp_path, one_thread,
                                                                   monkeypatch):
    """A planned revocation later than the stable point still falls inside the first attempt;
    the attempt after a restart stops as soon as it is stable."""
    quick = {"tolerance": 0.9, "min_warmup_steps": 2, "min_seconds": 4.0, "max_seconds": 60.0}

    def measured_s(records: list[dict]) -> float:
        [step] = [r for r in records if r["type"] == "first_step"]
        [result] = [r for r in records if r["type"] == "result"]
        assert result["stable"] is True
        return result["t"] - step["t"]

    assert measured_s(run_worker(tmp_path / "first", **quick)) >= 4.0
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    assert measured_s(run_worker(tmp_path / "restarted", **{**quick, "min_seconds": 30})) < 30


class ScriptedTimer:
    """Step times from a script (the real steps still train): exactly 0.1 s up to step
    `steady_until`, 1 s after it."""

    def __init__(self, steady_until: int):
        self.steady_until, self.pending = steady_until, []

    def mark(self, step: int) -> None:
        self.pending.append((step, 0.1 if step <= self.steady_until else 1.0))

    def ready(self, wait: bool = False) -> list[tuple[int, float]]:
        out, self.pending = self.pending, []
        return out


@pytest.mark.slow
def test_a_stable_stop_reports_the_verdict_it_stopped_on(tmp_path, one_thread, monkeypatch):
    """Steps 2-41 (40 measured) are steady, so the rule stops at step 41; the ranks agree at
    step 50, and the slow steps 42-50 between must not turn the result unstable."""
    monkeypatch.setattr(worker, "EVALUATE_EVERY_S", 0.0)  # judge every step
    monkeypatch.setattr(worker, "StepTimer", lambda cuda: ScriptedTimer(steady_until=41))
    records = run_worker(tmp_path, min_warmup_steps=0, min_measure_steps=40, max_seconds=60)
    (result,) = [r for r in records if r["type"] == "result"]
    assert result["global_step"] == worker.CHECK_EVERY * 5
    assert result["stable"] is True and result["steps_measured"] == 40
    assert result["throughput"] == result["throughput_lo"] == pytest.approx(2 / 0.1)
    assert result["step_time_p95"] == pytest.approx(0.1)


def test_step_timer_on_cpu_times_each_step():
    timer = worker.StepTimer(cuda=False)
    for step, pause in enumerate((0.02, 0.05), 1):
        time.sleep(pause)
        timer.mark(step)
    (s1, t1), (s2, t2) = timer.ready()
    assert (s1, s2) == (1, 2)
    assert 0.02 <= t1 < 0.05 <= t2 < 0.2
    assert timer.ready() == []


class FakeCudaEvent:
    """torch.cuda.Event's timing calls on a clock of the test's: a recorded event completes
    when the fake stream's work reaches it."""

    created = 0
    clock_ms = 0.0
    done_until = float("inf")

    def __init__(self, enable_timing: bool):
        assert enable_timing
        FakeCudaEvent.created += 1

    def record(self):
        self.at = FakeCudaEvent.clock_ms

    def query(self):
        return self.at <= FakeCudaEvent.done_until

    def synchronize(self):
        FakeCudaEvent.done_until = float("inf")

    def elapsed_time(self, end):
        return end.at - self.at


def test_step_timer_on_a_gpu_reuses_the_events_of_steps_it_has_read(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "Event", FakeCudaEvent)
    timer = worker.StepTimer(cuda=True)
    times = []
    for step in range(1, 201):
        FakeCudaEvent.clock_ms += 4.0 + step % 3
        timer.mark(step)
        FakeCudaEvent.done_until = FakeCudaEvent.clock_ms - 10.0  # the GPU two steps behind
        times += timer.ready()
    times += timer.ready(wait=True)
    assert [s for s, _ in times] == list(range(1, 201))
    assert [t for _, t in times] == pytest.approx([(4.0 + s % 3) / 1000 for s in range(1, 201)])
    assert FakeCudaEvent.created <= 5  # not one a step


@pytest.mark.parametrize(
    "config, message",
    [
        ("{not json", "not JSON"),
        (json.dumps({"model": "resnet18"}), "batch_per_gpu: Field required"),
        (json.dumps({"model": "resnet18", "batch_per_gpu": 2, "precision": "fp8",
                     "sink": "/tmp/x", "cluster": "c"}),
         "precision: precision 'fp8' is not known; use one of fp32, tf32, amp, bf16"),
        (json.dumps({"model": "resnet81", "batch_per_gpu": 2, "sink": "/tmp/x", "cluster": "c"}),
         "did you mean resnet18"),
        (json.dumps({"model": "resnet18", "batch_per_gpu": 2, "device": "cuda",
                     "sink": "/tmp/x", "cluster": "c"}), "device is cuda but torch sees no GPU"),
    ],
)
def test_bad_worker_config_is_one_line(tmp_path, capsys, config, message):
    path = tmp_path / "w.json"
    path.write_text(config)
    assert worker.main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("error: ") and err.count("\n") == 1
