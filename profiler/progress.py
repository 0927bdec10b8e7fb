"""The live display of a sweep: which trial, which phase, the throughput so far."""

from __future__ import annotations

import logging

from profiler.ingest import RevocationSeen, first

log = logging.getLogger(__name__)

PHASES = ("launching", "warm-up", "measuring", "revoked", "recovering", "stopping")


def trial_phase(records: list[dict], revocations: list[RevocationSeen]
                ) -> tuple[str, float | None]:
    """The phase of a running trial and its throughput so far (samples/s: the mean over the
    current attempt's measuring phase; during warm-up the latest rate), from its records.

    launching: no training step yet; revoked: a node is gone and the survivors have not
    noticed; recovering: they have (restart, re-rendezvous, restore) but not stepped again."""
    if revocations:
        last = revocations[-1]
        noticed = [r for r in records if r["t"] > last.at and r["node"] != last.node and (
            r["type"] == "rendezvous" or r["type"] == "worker_exit" and r["status"] == "error")]
        if not noticed:
            return "revoked", None
        if first(records, "first_step", after=last.at) is None:
            return "recovering", None
    if first(records, "first_step") is None:
        return "launching", None
    # An attempt begins at node 0's rendezvous; rank 0 (on node 0) reports the progress.
    attempt = max((r["t"] for r in records if r["type"] == "rendezvous" and r["node"] == 0),
                  default=float("-inf"))
    progress = [r for r in records if r["type"] == "progress" and r["t"] > attempt]
    measuring = [r["samples_per_s"] for r in progress if r["phase"] == "measuring"]
    if measuring:
        return "measuring", sum(measuring) / len(measuring)
    return "warm-up", progress[-1]["samples_per_s"] if progress else None


class SweepDisplay:
    """A rich progress bar over the trials, with the current trial's phase and throughput.
    Rich draws nothing live when stderr is not a terminal, so scripts and tests see only the
    one line printed per finished trial."""

    def __init__(self, total: int, enabled: bool = True):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[phase]}"), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), console=self.console, disable=not enabled,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task("sweep", total=total, phase="", rate="")
        self._trial, self._phase = "", ""

    def __enter__(self) -> SweepDisplay:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def trial(self, index: int, total: int, label: str) -> None:
        self._trial = f"trial {index}/{total} {label}"
        self._progress.update(self._task, description=self._trial, phase="launching", rate="")
        self._phase = "launching"
        log.info("%s: launching", self._trial)

    def phase(self, phase: str, samples_per_s: float | None = None) -> None:
        rate = f"{samples_per_s:,.1f} samples/s" if samples_per_s else ""
        self._progress.update(self._task, phase=phase, rate=rate)
        if phase != self._phase:  # transitions only: the rate changes every poll
            log.info("%s: %s -> %s%s", self._trial, self._phase, phase,
                     f" at {rate}" if rate else "")
            self._phase = phase

    def done(self, line: str) -> None:
        self._progress.advance(self._task)
        self._progress.console.print(line, markup=False, highlight=False, soft_wrap=True)


class QuietDisplay:
    """SweepDisplay's interface for scripts: prints nothing, logs each finished trial."""

    def __enter__(self) -> QuietDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def trial(self, index: int, total: int, label: str) -> None:
        log.info("trial %d/%d %s: launching", index, total, label)

    def phase(self, phase: str, samples_per_s: float | None = None) -> None:
        pass

    def done(self, line: str) -> None:
        log.info("%s", line)
