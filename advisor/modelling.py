"""The advisor's Python API for its models: `fit` fits the performance models on a measurement
store and returns a `FitResult` (the artifact document, what was left out, a summary);
`evaluate` cross-validates the throughput model and returns an `Evaluation`. The `advisor fit`
and `advisor evaluate` commands parse their arguments, call these and render the results.

Errors are `advisor.errors.AdvisorError`s naming the API's parameters, never a command
line's flags, or the store's `StoreError` (gpuadvisor.store).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from advisor.errors import AdvisorError, ParameterError

FIT_PARAMETERS = ("store", "output", "include_published", "exclude_software")
EVALUATE_PARAMETERS = ("store", "split", "target", "include_published", "max_train_workers",
                       "exclude_software", "jobs")


@dataclass
class FitResult:
    """A fitted artifact. `artifact` is the document `advisor recommend` reads (write it with
    `write`, or pass `output` to `fit`); `skipped` counts the trials left out, by reason."""

    artifact: dict = field(repr=False)
    skipped: dict[str, int]
    path: Path | None = None  # where the artifact was written, if it was

    @property
    def training_data(self) -> dict:
        return self.artifact["training_data"]

    @property
    def coefficients(self) -> dict[str, float]:
        return self.artifact["throughput"]["coefficients"]

    @property
    def coefficients_at_bound(self) -> list[str]:
        """The terms the fit pinned on their physical bound (`advisor.fitting.terms_at_bound`)."""
        from advisor.fitting import terms_at_bound

        return terms_at_bound(self.coefficients)

    def write(self, path: str | Path) -> Path:
        """Write the artifact as JSON; AdvisorError naming `output` if it cannot be."""
        from advisor.fitting import write_artifact

        try:
            write_artifact(self.artifact, path)
        except OSError as exc:
            raise AdvisorError(f"cannot write {path} ({exc.strerror}); choose another output",
                               "output") from None
        self.path = Path(path)
        return self.path

    def to_dict(self) -> dict:
        """What `advisor fit --format json` prints: a summary of the fit."""
        doc, data = self.artifact, self.training_data
        calibration = doc["throughput"]["calibration"]

        def spread(kind: str) -> str:
            return "x{:.2f} .. x{:.2f}".format(*[math.exp(q) for q in calibration[kind]])

        return {
            "artifact": None if self.path is None else str(self.path),
            "schema_version": doc["schema_version"],
            "training_data_sha256": data["sha256"][:16],
            "throughput_configs": data["throughput_configs"],
            "models": len(data["models"]),
            "gpus": ", ".join(data["gpus"]) or "-",
            "startups": data["startups"],
            "checkpoints": data["checkpoints"],
            "revocations": data["revocations"],
            "lifetime_groups_fitted": len(doc["lifetime"]["fitted"]),
            "interval_interpolated": spread("interpolated"),
            "interval_extrapolated": spread("extrapolated"),
            "coefficients": self.coefficients,
            "coefficients_at_bound": self.coefficients_at_bound,
        }


@dataclass(frozen=True)
class Evaluation:
    """Held-out accuracy of one split: MAPE (percent) of the model and of a plain log-linear
    baseline, how often the 90% interval held the measurement, per group and overall, and
    every held-out prediction."""

    split: str
    target: str
    n: int
    mape: float
    median_ape: float
    baseline_loglinear_mape: float
    interval_coverage: float
    groups: list[dict] = field(repr=False)
    predictions: list[dict] = field(repr=False)
    skipped: dict[str, int] = field(repr=False)
    data: dict = field(repr=False, compare=False)  # all of it, as to_dict() gives it

    @classmethod
    def from_dict(cls, data: dict) -> Evaluation:
        names = [f.name for f in fields(cls) if f.name != "data"]
        return cls(**{name: data[name] for name in names}, data=data)

    @property
    def median_ratio(self) -> float:
        """Which way the errors lean: the median of predicted over measured (of throughput
        above 1 is optimistic, of step time pessimistic); each group's is in `groups`."""
        return self.data["median_ratio"]

    def to_dict(self) -> dict:
        """What `advisor evaluate --format json` prints."""
        return self.data


def fit(
    store: str | Path,
    *,
    output: str | Path | None = None,
    include_published: bool = True,
    exclude_software: str | Sequence[str] = (),
) -> FitResult:
    """Fit the throughput, start-up, checkpoint and recovery models and the spot-lifetime
    model on the measurement store at `store`; write the artifact to `output` if given.
    Trials whose recorded software contains any of `exclude_software` are left out, and with
    `include_published=False` the published figures too."""
    from advisor.fitting import fit_store

    path = _store(store)
    excluded = _texts(exclude_software)
    doc, info = _translated(FIT_PARAMETERS, fit_store, path,
                            include_published=include_published, exclude_software=excluded)
    result = FitResult(doc, info["skipped"])
    if not result.training_data["throughput_configs"]:
        from gpuadvisor.store import StoreError

        left_out = f" ({sum(result.skipped.values())} trials left out)" if result.skipped else ""
        raise StoreError(f"{path} holds no throughput measurement to fit{left_out}; nothing "
                         "is written. Import some first, e.g. `advisor data import published "
                         f"--store {path}`, or run `profiler sweep`")
    if output is not None:
        result.write(output)
    return result


def evaluate(
    store: str | Path,
    *,
    split: str = "model",
    target: str = "throughput",
    include_published: bool = True,
    max_train_workers: int | None = None,
    exclude_software: str | Sequence[str] = (),
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Evaluation:
    """Cross-validate the throughput model on the store at `store` the way it is used: on
    models (`split="model"`), GPUs ("gpu"), larger clusters ("nodes": trained on clusters up to
    `max_train_workers` workers, the median size by default), sources ("source"), software
    stacks ("stack": a code base in a container, as a new benchmark measures with its own) or
    5 random folds ("random"). The folds are fitted in `jobs` processes at once (default: one
    per CPU); the figures do not depend on it. `progress(done, total)` is called as each
    fold's results come in."""
    from advisor import evaluation

    path = _store(store)
    _choice("split", split, evaluation.SPLITS)
    _choice("target", target, evaluation.TARGETS)
    if max_train_workers is not None and max_train_workers < 1:
        raise ParameterError(f"max_train_workers must be at least 1, got {max_train_workers}",
                             "max_train_workers")
    if jobs is not None and jobs < 1:
        raise ParameterError(f"jobs must be at least 1, got {jobs}", "jobs")
    data = _translated(EVALUATE_PARAMETERS, evaluation.evaluate, path, split, target,
                       include_published, max_train_workers, _texts(exclude_software), jobs,
                       progress)
    return Evaluation.from_dict(data)


def _store(store: str | Path) -> Path:
    """The path of an existing store. (Its error names no parameter: "store" is a word there.)"""
    from gpuadvisor.store import StoreError

    path = Path(store)
    if not path.is_file():
        raise StoreError(f"no measurement store at {path}; make one with `profiler sweep` or "
                         f"import data, e.g. `advisor data import cmdare PATH --store {path}`")
    return path


def _choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ParameterError(f"unknown {name} {value!r}; {name}s are {', '.join(allowed)}", name)


def _texts(values: str | Sequence[str]) -> tuple[str, ...]:
    return (values,) if isinstance(values, str) else tuple(values)


def _translated(parameters: Sequence[str], run, *args, **kwargs):
    """run(*args, **kwargs) with the fitting code's own errors raised as AdvisorErrors naming
    the API parameters their messages mention (those with an underscore: `store` or `split`
    may be plain words there)."""
    from advisor.evaluation import EvaluateError
    from advisor.features import FeatureError
    from advisor.fitting import FitError

    try:
        return run(*args, **kwargs)
    except (EvaluateError, FeatureError, FitError) as exc:
        message = str(exc)
        named = [p for p in parameters
                 if "_" in p and re.search(rf"(?<![-\w]){p}(?!\w)", message)]
        raise ParameterError(message, *named) if named else AdvisorError(message) from None
