"""The live display of a sweep: which trial, which phase, the throughput so far."""

from __future__ import annotations

from typing import Any

PHASES = ("launching", "warm-up", "measuring", "revoked", "recovering", "stopping")


class SweepDisplay:
    """A rich progress bar over the trials, with the current trial's phase and throughput.
    Rich draws nothing live when stderr is not a terminal, so scripts and tests see only the
    one line printed per finished trial."""

    def __init__(self, total: int, enabled: bool = True):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
            TimeElapsedColumn

        self.console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[phase]}"), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), console=self.console, disable=not enabled,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task("sweep", total=total, phase="", rate="")

    def __enter__(self) -> SweepDisplay:
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()

    def trial(self, index: int, total: int, label: str) -> None:
        self._progress.update(self._task, description=f"trial {index}/{total} {label}",
                              phase="launching", rate="")

    def phase(self, phase: str, samples_per_s: float | None = None) -> None:
        rate = f"{samples_per_s:,.1f} samples/s" if samples_per_s else ""
        self._progress.update(self._task, phase=phase, rate=rate)

    def done(self, line: str) -> None:
        self._progress.advance(self._task)
        self._progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
