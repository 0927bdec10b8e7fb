"""The profiler's Python API: `sweep` measures every trial of a sweep spec on a provider and
keeps the results in a measurement store; `dry_run` returns the trials and every request their
launches would send, and sends none. The `profiler sweep` command parses its arguments, calls
these and renders the results.

A spec is a path to a YAML file, YAML text or a dict. Errors are gpuadvisor.errors
GpuAdvisorErrors naming the API's parameters: SpecError (a line per problem, each naming the
spec's field), ProviderError, StoreError, BudgetExceeded (`max_cost`; the finished trials are
in the store).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloud.provider import Provider
from profiler.spec import SweepSpec

SpecInput = str | Path | dict[str, Any] | SweepSpec


@dataclass(frozen=True)
class DryRun:
    """The trials of a spec, each with its estimated cost and the requests its launch would
    send (cloud.provider.PlannedRequest as dicts; values known only at launch left as
    placeholders)."""

    sweep: str
    provider: str
    results: str  # where the nodes would write their records
    trials: list[dict]  # {"trial": Trial.as_dict(), "estimated_cost_usd", "requests": [...]}

    @property
    def estimated_cost_usd(self) -> float:
        return sum(t["estimated_cost_usd"] for t in self.trials)

    def to_dict(self) -> dict:
        """What `profiler sweep --dry-run --format json` prints."""
        return {"sweep": self.sweep, "provider": self.provider, "results": self.results,
                "estimated_cost_usd": self.estimated_cost_usd, "trials": self.trials}


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did: the keys of the trials finished, failed and skipped (already in the
    store), the estimated spend, and the store holding the measurements."""

    sweep: str
    store: Path
    finished: list[str]
    failed: list[str]
    skipped: list[str]
    spent_usd: float

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict:
        """What `profiler sweep --format json` prints."""
        return {"sweep": self.sweep, "store": str(self.store), "finished": self.finished,
                "failed": self.failed, "skipped": self.skipped, "spent_usd": self.spent_usd}


def dry_run(spec: SpecInput, *, store: str | Path = "runs.db", provider: str | None = None,
            results: str | None = None, max_trials: int | None = None,
            max_nodes: int | None = None) -> DryRun:
    """The trials of `spec` and the requests each launch would send; sends nothing and opens
    no store (`store` only places the default `results`). A grid beyond `max_trials` trials
    or `max_nodes` nodes is refused (profiler.spec.check_size)."""
    from profiler.orchestrator import dry_run_sweep, estimated_cost
    from profiler.spec import check_size

    spec = load(spec, provider=provider, results=results)
    check_size(spec, max_trials, max_nodes)
    chosen = _provider(spec)
    results_url = _results(spec, store)
    trials = [{"trial": trial.as_dict(), "estimated_cost_usd": estimated_cost(chosen, trial),
               "requests": [vars(r) for r in requests]}
              for trial, requests in dry_run_sweep(spec, chosen, results_url)]
    return DryRun(spec.name, chosen.name, results_url, trials)


def sweep(spec: SpecInput, *, store: str | Path = "runs.db",
          provider: str | Provider | None = None, results: str | None = None,
          max_cost: float | None = None, progress: bool = False,
          max_trials: int | None = None, max_nodes: int | None = None) -> SweepResult:
    """Run every trial of `spec` not yet finished in `store` (re-running resumes) on
    `provider` (a name overriding the spec's, or a Provider instance), nodes writing their
    records to `results` (file://, gs://, s3://; default runs/records beside the store).
    Stops before the estimated spend passes `max_cost` USD (BudgetExceeded). With `progress`
    a line per trial on stderr (and a live bar on a terminal); otherwise nothing is printed.
    Nodes are terminated whatever happens, KeyboardInterrupt included. A grid beyond
    `max_trials` trials or `max_nodes` nodes is refused (profiler.spec.check_size)."""
    from cloud.sinks import check_local_sink
    from gpuadvisor.store import Store
    from profiler.orchestrator import run_sweep
    from profiler.progress import QuietDisplay, SweepDisplay
    from profiler.spec import check_size

    given = provider if isinstance(provider, Provider) else None
    spec = load(spec, provider=given.name if given else provider, results=results,
                max_cost=max_cost)
    check_size(spec, max_trials, max_nodes)
    chosen = given or _provider(spec)
    results_url = _results(spec, store)
    check_local_sink(results_url)  # before the store is made: nothing would be measured
    # Rich draws the live bar on a terminal only; the line per finished trial is printed
    # either way.
    display = (SweepDisplay(len(spec.trials()), enabled=sys.stderr.isatty()) if progress
               else QuietDisplay())
    with Store(store) as opened, display:
        outcome = run_sweep(spec, opened, chosen, results_url, max_cost=spec.max_cost,
                            display=display)
    return SweepResult(spec.name, Path(store), outcome.finished, outcome.failed,
                       outcome.skipped, outcome.spent_usd)


def load(spec: SpecInput, **overrides: Any) -> SweepSpec:
    """A validated spec from a path, YAML text (a string of several lines), a dict or a
    SweepSpec, with `overrides` (None: keep the spec's) replacing its keys."""
    from profiler.spec import SpecError, load_spec, parse_spec, spec_from_yaml

    if isinstance(spec, SweepSpec):
        spec = spec.model_dump()
    if isinstance(spec, dict):
        raw = {**spec, **{k: v for k, v in overrides.items() if v is not None}}
        return parse_spec(raw)
    if isinstance(spec, str) and "\n" in spec:
        return spec_from_yaml(spec, overrides=overrides)
    if isinstance(spec, (str, Path)):
        return load_spec(spec, overrides)
    raise SpecError(f"spec must be a path, YAML text or a dict, got {type(spec).__name__}",
                    "spec")


def _provider(spec: SweepSpec) -> Provider:
    from cloud.registry import make_provider

    # A cloud provider works in the spec's region: launch, events, clean-up alike.
    return make_provider(spec.provider, **({"region": spec.region}
                                           if spec.provider != "local" else {}))


def _results(spec: SweepSpec, store: str | Path) -> str:
    return spec.results or f"file://{Path(store).resolve().parent / 'runs' / 'records'}"
