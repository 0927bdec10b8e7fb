"""The training worker: DDP training of a zoo model on synthetic data, measured.

Run under torchrun (the node agent, profiler/agent.py, does it):

    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --nnodes=1:2 --nproc-per-node=1 \\
        --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT --rdzv-conf=CONF \\
        --max-restarts=3 -m profiler.worker --config worker.json

(CONF: profiler.agent.RDZV_CONF plus is_host=true on node 0.)
worker.json holds the fields of WorkerConfig. The environment may add PROFILER_AGENT_START
(time.time() when the node agent started; time to first step counts from it).

Every rank trains; rank 0 times its steps (CUDA events read a few steps late, so no step waits
for the GPU; perf_counter on CPU), feeds them to the stopping rule (profiler/stability.py),
checkpoints, and decides when to stop (stable, or max_seconds; the job's first attempt not
before min_seconds, which the sweep sets past a planned revocation), which it tells the other
ranks every CHECK_EVERY steps over a gloo group; any rank that got SIGUSR1 (its node will be
revoked) makes rank 0 save a checkpoint at that point. Records (gpuadvisor/records.py) go to
the sink. After a torchrun restart the worker resumes from the latest checkpoint and measures
afresh.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cloud.sinks import open_sink
from gpuadvisor.records import Recorder
from gpuadvisor.vocab import LOSS_SCALED_PRECISIONS, PRECISIONS, check_precision
from profiler import checkpoint, zoo
from profiler.clock import process_start_time
from profiler.stability import StoppingRule

CHECK_EVERY = 10  # steps between stop decisions shared by all ranks
EVALUATE_EVERY_S = 0.5  # rank 0 re-runs the stopping rule at most this often
# Tiny operators the host dispatches, per round, to measure what one costs it: an eager step
# of small kernels waits on the host at that rate whatever the GPU, and the rate is the
# machine's (a VM's CPU, the driver), so each trial records its own (`host_op_us`).
DISPATCH_PROBE_OPS = 500
DISPATCH_PROBE_ROUNDS = 5
# Every model trains with SGD with momentum, whatever its recipe's optimizer: a step's cost, not
# its convergence, is measured. Each result names it (advisor.memory.OPTIMIZER_STATE_BYTES),
# since the update's traffic depends on it.
OPTIMIZER = "sgd"
MOMENTUM = 0.9


class WorkerConfig(BaseModel):
    """One trial's training and measurement parameters."""

    model_config = ConfigDict(extra="forbid")

    model: str
    batch_per_gpu: int = Field(gt=0, description="per worker process")
    precision: str = Field("fp32", description=" | ".join(PRECISIONS))
    image_size: int | None = Field(None, gt=0)
    seq_len: int | None = Field(None, gt=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    tolerance: float = Field(0.02, gt=0, description="relative 95% half-width to stop at")
    min_warmup_steps: int = Field(5, ge=0)
    min_measure_steps: int = Field(40, ge=2)
    max_seconds: float = Field(300.0, gt=0, description="measurement limit from first step")
    min_seconds: float = Field(0.0, ge=0, description=(
        "the job's first attempt stops no sooner than this after its first step, stable or "
        "not, so that a planned revocation falls inside it; restarted attempts are exempt"))
    max_steps: int | None = Field(None, gt=0, description="stop at this global step")
    checkpoint_dir: str | None = None
    checkpoint_every_steps: int | None = Field(None, gt=0)
    checkpoint_every_s: float | None = Field(None, gt=0)
    progress_every_s: float = Field(1.0, gt=0)
    init_timeout_s: float = Field(120.0, gt=0)
    seed: int = 0
    sink: str
    cluster: str
    node: int = Field(0, ge=0)

    @field_validator("precision")
    @classmethod
    def _known_precision(cls, value: str) -> str:
        return check_precision(value)


class StepTimer:
    """Durations of successive steps: CUDA events polled without blocking, or perf_counter.

    On a GPU each step's end is the next step's start, and an event whose step has been read
    goes back to a pool: a host-bound step (tens of kernels, a few ms) creates no event."""

    def __init__(self, cuda: bool):
        import torch

        self.cuda = cuda
        self._pending: list = []  # (step, start event, end event)
        self._free: list = []  # events whose steps have been read
        self._torch = torch
        self._last = self._now()

    def _now(self):
        if not self.cuda:
            return time.perf_counter()
        event = self._free.pop() if self._free else self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def mark(self, step: int) -> None:
        end = self._now()
        self._pending.append((step, self._last, end))
        self._last = end

    def ready(self, wait: bool = False) -> list[tuple[int, float]]:
        """(step, seconds) of the steps whose end is known; `wait` blocks for all of them."""
        if self.cuda and wait and self._pending:
            self._pending[-1][2].synchronize()
        out = []
        while self._pending:
            step, start, end = self._pending[0]
            if self.cuda:
                if not end.query():
                    break
                out.append((step, start.elapsed_time(end) / 1000.0))
                self._free.append(start)  # no later step starts at it
            else:
                out.append((step, end - start))
            self._pending.pop(0)
        return out


def software_versions() -> dict:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import torch

    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "cuda": torch.version.cuda, "nccl": None}
    if torch.cuda.is_available():
        nccl = torch.cuda.nccl.version()  # a tuple since torch 1.13, an int before
        versions["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    for package in ("transformers", "gpu-advisor"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    return versions


def gpu_memory_peaks(cuda: bool) -> dict[str, int | None]:
    """Peak allocated and reserved GPU memory of this process (the caching allocator's
    segments are what must fit the GPU); None on CPU."""
    if not cuda:
        return {"peak_allocated_bytes": None, "peak_reserved_bytes": None}
    import torch

    return {"peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved())}


def host_dispatch_us(device) -> float:
    """Microseconds the host takes to dispatch one tiny operator (an in-place add of one
    element) to `device`: the median of DISPATCH_PROBE_ROUNDS rounds, each timed on the host
    alone. On a GPU the launches run ahead of their microsecond kernels, so a round's time is
    the host's; on a CPU it is the operator's whole cost."""
    import torch

    x = torch.zeros(1, device=device)
    cuda = device.type == "cuda"
    rounds = []
    for _ in range(DISPATCH_PROBE_ROUNDS):
        if cuda:
            torch.cuda.synchronize()  # an empty queue: no launch waits for a free slot
        started = time.perf_counter()
        for _ in range(DISPATCH_PROBE_OPS):
            x.add_(1.0)
        rounds.append((time.perf_counter() - started) / DISPATCH_PROBE_OPS * 1e6)
    if cuda:
        torch.cuda.synchronize()
    return float(sorted(rounds)[len(rounds) // 2])


def peak_memory_bytes(cuda: bool) -> int:
    import resource

    import torch

    if cuda:
        return int(torch.cuda.max_memory_allocated())
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _die_with_parent() -> None:
    """Under torchrun: ask the kernel to SIGKILL this process when torchrun goes, however it
    goes; and if it went already (before this ran), go now."""
    import ctypes

    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return
    if b"torch.distributed.run" not in parent and b"torchrun" not in parent:
        os._exit(1)  # orphaned: torchrun died before the death signal was armed


class Trainer:
    """One attempt (one torchrun restart) of training and measuring."""

    def __init__(self, config: WorkerConfig, started_at: float):
        import torch
        import torch.distributed as dist

        self.config, self.started_at, self.torch, self.dist, self.zoo = (
            config, started_at, torch, dist, zoo)
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))
        agent_start = os.environ.get("PROFILER_AGENT_START")
        self.agent_start = float(agent_start) if agent_start else started_at
        self.sink = open_sink(config.sink, config.cluster)
        self.recorder = Recorder(self.sink, node=config.node, rank=self.rank, restart=self.restart)
        self.cuda = config.device == "cuda" or (
            config.device == "auto" and torch.cuda.is_available())
        if config.device == "cuda" and not torch.cuda.is_available():
            raise ConfigError("device is cuda but torch sees no GPU; set device to auto or cpu")
        self.saves: list[checkpoint.Timed] = []
        self.restored: checkpoint.Timed | None = None
        self.step = 0

    def emit(self, type: str, **fields) -> None:
        self.recorder.emit(type, **fields)

    # -- set-up ------------------------------------------------------------------------

    def init_distributed(self) -> None:
        from datetime import timedelta

        torch, dist = self.torch, self.dist
        if self.cuda:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.reset_peak_memory_stats()  # an earlier run in this process is not ours
        else:
            self.device = torch.device("cpu")
        backend = "nccl" if self.cuda else "gloo"
        timeout = timedelta(seconds=self.config.init_timeout_s)
        if "RANK" in os.environ:  # under torchrun
            dist.init_process_group(backend, timeout=timeout)
        else:  # run by hand or in this process: a group of one
            dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{_free_port()}",
                                    rank=0, world_size=1, timeout=timeout)
        self.world = dist.get_world_size()
        # Stop decisions travel on CPU tensors, so that reading one never waits for the GPU.
        self.control = dist.new_group(backend="gloo") if self.cuda else dist.group.WORLD
        if self.local_rank == 0:
            local = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
            self.emit("rendezvous", pid=os.getpid(), world_size=self.world,
                      nodes=self.world // local,
                      duration_s=time.time() - self.started_at)

    def build(self) -> None:
        torch, c = self.torch, self.config
        torch.manual_seed(c.seed)
        self.zoo.resolve(c.model)
        # Built where it trains: the weights are initialised on the GPU, not on the CPU and
        # then copied over (both count in the time to first step).
        with torch.device(self.device):
            model = self.zoo.build_model(c.model, image_size=c.image_size, seq_len=c.seq_len)
        self.module = model.to(self.device)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=MOMENTUM)
        # gpuadvisor.vocab.PRECISION_MEANING: fp32 is PyTorch's default (convolutions in TF32
        # on Ampere and later, matmuls in FP32), tf32 turns TF32 on for matmuls too (CPUs
        # compute plain FP32).
        torch.backends.cuda.matmul.allow_tf32 = c.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = True
        # Fixed input shapes, as tuned training sets it (NVIDIA's DeepLearningExamples do):
        # cuDNN times its algorithms in the first steps, which the warm-up cut then skips.
        torch.backends.cudnn.benchmark = self.cuda
        self.scaler = torch.amp.GradScaler(self.device.type,
                                           enabled=c.precision in LOSS_SCALED_PRECISIONS)
        generator = torch.Generator().manual_seed(c.seed + self.rank)
        self.batch = self.zoo.synthetic_batch(c.model, c.batch_per_gpu, self.device, c.image_size,
                                              c.seq_len, generator=generator)
        dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(c.precision)
        self.autocast = lambda: torch.autocast(self.device.type, dtype=dtype,
                                               enabled=dtype is not None)
        # One checkpoint copy per node, so that a revoked node takes none of the others with it.
        self.ckpt_dir = Path(c.checkpoint_dir) / f"node-{c.node}" if c.checkpoint_dir else None
        self.marker = (checkpoint.StepMarker(self.ckpt_dir)
                       if self.ckpt_dir and self.local_rank == 0 else None)

    def wrap(self) -> None:
        ddp_args = {"device_ids": [self.local_rank]} if self.cuda else {}
        self.model = self.torch.nn.parallel.DistributedDataParallel(self.module, **ddp_args)

    def state(self) -> dict:
        return {"step": self.step, "model": self.module.state_dict(),
                "optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict()}

    def _reduce(self, value: int, op: str) -> int:
        tensor = self.torch.tensor([value])
        self.dist.all_reduce(tensor, op=getattr(self.dist.ReduceOp, op), group=self.control)
        return int(tensor.item())

    def restore(self) -> None:
        """Every rank reads its node's copy; the newest copy in the job wins, sent from the
        lowest rank holding it to the ranks whose node has none or an older one (a
        replacement node). No single node's loss loses the checkpoint."""
        if not self.ckpt_dir:
            return
        started = time.perf_counter()
        loaded = checkpoint.load(self.ckpt_dir, "cpu")
        mine = int(loaded[0]["step"]) if loaded else -1
        newest = self._reduce(mine, "MAX")
        last_step = self._reduce((self.marker.read() or 0) if self.marker else 0, "MAX")
        if newest < 0:
            if last_step and self.rank == 0:
                self.emit("checkpoint_restore", step=0, steps_lost=last_step)
            return
        if self._reduce(int(mine != newest), "MAX"):
            holder = self._reduce(self.rank if mine == newest else self.world, "MIN")
            sent = [loaded[0] if self.rank == holder else None]
            self.dist.broadcast_object_list(sent, src=holder, group=self.control)
            if mine != newest:
                loaded = (sent[0], checkpoint.Timed(0.0, 0))
        state, timed = loaded
        self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.step = newest
        self.restored = checkpoint.Timed(time.perf_counter() - started, timed.bytes)
        if self.rank == 0:
            self.emit("checkpoint_restore", step=self.step, seconds=self.restored.seconds,
                      bytes=timed.bytes or None, steps_lost=max(last_step - self.step, 0))

    def save(self, reason: str) -> None:
        """Each node's local rank 0 keeps a copy on its node; rank 0 records its save."""
        if not self.ckpt_dir or self.local_rank != 0:
            return
        timed = checkpoint.save(self.ckpt_dir, self.state())
        self.saves.append(timed)
        if self.rank == 0:
            self.skip.add(self.step + 1)
            self.last_save_t = time.perf_counter()
            self.emit("checkpoint_save", step=self.step, seconds=timed.seconds,
                      bytes=timed.bytes, reason=reason)

    # -- the loop ----------------------------------------------------------------------

    def train_step(self) -> None:
        with self.autocast():
            loss = self.zoo.loss(self.config.model, self.model, self.batch)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1

    def run(self) -> None:
        c = self.config
        self.init_distributed()
        self.build()
        self.restore()
        self.wrap()
        self.samples_per_step = self.world * c.batch_per_gpu
        self.rule = StoppingRule(c.tolerance, c.min_warmup_steps, c.min_measure_steps)
        self.first_step = self.step + 1
        self.skip: set[int] = set()  # steps whose time includes a checkpoint save
        self.save_requested = self.save_due = False
        self.measuring = self.stop = self.decided = False
        self.last_save_t = self.last_eval_t = time.perf_counter()
        self.progress = (time.perf_counter(), self.step)
        if threading.current_thread() is threading.main_thread():
            # The node agent sends SIGUSR1 when its provider warns that the node will go.
            signal.signal(signal.SIGUSR1, self._request_save)
        if self.rank == 0:
            self.emit("phase", phase="warmup", step=self.step)
        self.timer = StepTimer(self.cuda)
        while True:
            self.train_step()
            self.timer.mark(self.step)
            if self.step == self.first_step:
                self.on_first_step()
            if self.marker:
                self.marker.write(self.step)
            if c.checkpoint_every_steps and self.step % c.checkpoint_every_steps == 0:
                self.save("periodic")
            if self.rank == 0:
                self.after_step()
            at_limit = bool(c.max_steps and self.step >= c.max_steps)
            if self.step % CHECK_EVERY == 0 or at_limit:
                stop, notice, timed = self.agree()
                if notice or timed:
                    self.save("notice" if notice else "periodic")
                if stop:
                    break
        if self.rank == 0:
            self.add_times(self.timer.ready(wait=True))
            self.finish(self.rule, self.samples_per_step)

    def _request_save(self, _signum: int, _frame: object) -> None:
        self.save_requested = True

    def on_first_step(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
        self.first_step_t = time.time()
        self.measure_start = time.perf_counter()
        if self.local_rank == 0:
            self.emit("first_step", step=self.step,
                      since_agent_start_s=self.first_step_t - self.agent_start,
                      since_process_start_s=self.first_step_t - self.started_at)

    def add_times(self, timed: list[tuple[int, float]]) -> None:
        # Once the rule's verdict has decided the stop, the steps run until the ranks agree
        # (up to CHECK_EVERY) are trained but not measured: the result is then the very
        # verdict the stop was decided on, so a run stopped as stable reports stable, and
        # that interval, rather than one recomputed a few steps later.
        if self.decided:
            return
        for step, seconds in timed:
            if step != self.first_step and step not in self.skip:
                self.rule.add(seconds)

    def after_step(self) -> None:
        """Rank 0's bookkeeping: timing, progress, stopping rule, when a timed save is due."""
        c, now = self.config, time.perf_counter()
        self.add_times(self.timer.ready())
        every = c.checkpoint_every_s
        self.save_due = bool(every and now - self.last_save_t >= every)
        if now - self.progress[0] >= c.progress_every_s:
            rate = (self.step - self.progress[1]) * self.samples_per_step / (now - self.progress[0])
            self.emit("progress", step=self.step, samples_per_s=rate,
                      phase="measuring" if self.measuring else "warmup")
            self.progress = (now, self.step)
        if now - self.last_eval_t >= EVALUATE_EVERY_S and not self.decided:
            self.last_eval_t = now
            verdict = self.rule.verdict()
            if verdict.interval is not None and not self.measuring:
                self.measuring = True
                self.emit("phase", phase="measuring", step=self.step,
                          warmup_steps=verdict.warmup_steps)
            measured = now - self.measure_start
            held = self.restart == 0 and measured < c.min_seconds
            self.stop = self.decided = not held and (verdict.stable or measured >= c.max_seconds)
        self.stop = self.stop or bool(c.max_steps and self.step >= c.max_steps)

    def agree(self) -> tuple[bool, bool, bool]:
        """All ranks learn whether rank 0 stops, whether any rank was warned of its node's
        end (SIGUSR1), and whether rank 0 has a timed save due: the saves happen together."""
        flags = self.torch.tensor([int(self.stop), int(self.save_requested), int(self.save_due)])
        self.dist.all_reduce(flags, op=self.dist.ReduceOp.MAX, group=self.control)
        self.save_requested = self.save_due = False
        return bool(flags[0]), bool(flags[1]), bool(flags[2])

    def finish(self, rule: StoppingRule, samples_per_step: int) -> None:
        """Rank 0: checkpoint figures if the run made none, then the result record."""
        import numpy as np

        c = self.config
        if self.ckpt_dir and not self.saves:
            self.save("final")
        if self.ckpt_dir and self.restored is None:
            started = time.perf_counter()
            state, timed = checkpoint.load(self.ckpt_dir, self.device)
            self.module.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.restored = checkpoint.Timed(time.perf_counter() - started, timed.bytes)
        verdict = rule.verdict()
        times = np.asarray(rule.times[verdict.warmup_steps:])
        value = lo = hi = None
        if verdict.interval is not None:
            value, lo, hi = verdict.interval.throughput(samples_per_step)
        elif len(times):
            value = samples_per_step / float(times.mean())
        self.emit(
            "result", model=c.model, batch_per_gpu=c.batch_per_gpu, precision=c.precision,
            world_size=self.world,
            device=self.torch.cuda.get_device_name() if self.cuda else "cpu",
            throughput=value, throughput_lo=lo, throughput_hi=hi,
            step_time_mean=float(times.mean()) if len(times) else None,
            step_time_median=float(np.median(times)) if len(times) else None,
            step_time_p95=float(np.percentile(times, 95)) if len(times) else None,
            steps_measured=len(times), warmup_steps=verdict.warmup_steps,
            stable=verdict.stable, peak_memory_bytes=peak_memory_bytes(self.cuda),
            **gpu_memory_peaks(self.cuda),
            time_to_first_step=self.first_step_t - self.agent_start,
            checkpoint_save_s=(sum(s.seconds for s in self.saves) / len(self.saves)
                               if self.saves else None),
            checkpoint_restore_s=self.restored.seconds if self.restored else None,
            checkpoint_bytes=self.saves[-1].bytes if self.saves else None,
            global_step=self.step, software=software_versions(),
            host_op_us=host_dispatch_us(self.device), optimizer=OPTIMIZER,
        )

    def close(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()
        if getattr(self, "marker", None):
            self.marker.close()
        self.sink.close()


def run_here(config: WorkerConfig) -> list[dict]:
    """Train and measure in this process as a group of one (for benchmarks and tests); the
    records of the config's cluster, this run's last."""
    trainer = Trainer(config, started_at=time.time())
    try:
        trainer.run()
    finally:
        trainer.close()
    return open_sink(config.sink, config.cluster).read_all()


class ConfigError(Exception):
    """A worker config that cannot be used; the message names the fix."""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_problem(exc: ValidationError, prefix: str = "") -> str:
    """The first validation error as 'field.path: message'."""
    first = exc.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    return f"{prefix}{'.'.join(map(str, first['loc'])) or 'config'}: {message}"


def read_config(model: type[BaseModel], path: str, what: str) -> BaseModel:
    """`model` read from the JSON file at `path` (the worker's or the agent's config)."""
    try:
        return model.model_validate(json.loads(Path(path).read_text()))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what} config; give the path of one") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: {first_problem(exc)}") from None


def main(argv: list[str] | None = None) -> int:
    started_at = process_start_time() or time.time()
    parser = argparse.ArgumentParser(prog="profiler.worker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="worker config JSON (WorkerConfig)")
    args = parser.parse_args(argv)
    try:
        config = read_config(WorkerConfig, args.config, "worker")
        zoo.resolve(config.model)
        trainer = Trainer(config, started_at)
    except (ConfigError, zoo.UnknownModelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    status, error = "error", None
    try:
        trainer.run()
        status = "finished"
    except ConfigError as exc:
        error = str(exc)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        trainer.emit("worker_exit", status=status, error=error)
        trainer.close()
    return 0


if __name__ == "__main__":
    _die_with_parent()
    try:
        code = main()
    except BaseException:  # torchrun shows the traceback in the node's log
        import traceback

        traceback.print_exc()
        code = 1
    # Records are already in the kernel (sink writes are unbuffered); skipping the interpreter's
    # teardown of torch and transformers saves seconds at every exit and torchrun restart.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
