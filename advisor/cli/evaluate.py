"""`advisor evaluate`: held-out accuracy of the throughput model on a measurement store."""

from __future__ import annotations

from pathlib import Path

import typer

from advisor.cli.app import app
from advisor.cli.fit import EXCLUDE_SOFTWARE_OPTION, warn_skipped
from gpuadvisor.cli.output import FORMAT_OPTION_HELP, Format, emit, emit_json, fail_with
from gpuadvisor.cli.settings import envvar


@app.command("evaluate")
def evaluate(
    store: Path = typer.Option(..., "--store", envvar=envvar("store"), dir_okay=False,
                               help="measurement store (SQLite file)"),
    split: str = typer.Option("model", "--split",
                              help="model | gpu | nodes | source | stack | random: what is "
                              "held out"),
    target: str = typer.Option("throughput", "--target", help="throughput | step_time"),
    include_published: bool = typer.Option(
        True, "--include-published/--no-include-published",
        help="use trials with source 'published' too"),
    max_train_workers: int = typer.Option(
        None, "--max-train-workers", min=1,
        help="--split nodes: train on clusters up to this many workers, test on larger "
        "(default: the median size)"),
    exclude_software: list[str] = EXCLUDE_SOFTWARE_OPTION,
    jobs: int = typer.Option(None, "--jobs", "-j", min=1,
                             help="folds fitted at once, one process each (default: one per "
                             "CPU); the figures do not depend on it"),
    fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP),
) -> None:
    """Cross-validate the throughput model the way it will be used: on models, GPUs or
    cluster sizes it never saw.

    --split model leaves one model out at a time, gpu one GPU type, nodes trains on small
    clusters and tests on larger ones, source one source (cmdare, published, profiler: this
    project's runs), stack one software stack (a benchmark's own code base in its container:
    figures of known models and GPUs from software the fit never saw), random is 5-fold.
    Everything the fit tunes is tuned on the training fold only. A held-out row is predicted
    with the fitted effect of its software stack (a code base in a container: a published row's
    cited folder and container, the profiler's runs one stack), and its effect on the row's
    arithmetic unit (FP32, TF32 or 16-bit tensor cores: a stack's mixed-precision recipe is its
    own), where the training fold saw them; else what the fold's other containers of its code
    base share, else its framework's, and its interval widens by the fitted stacks' spread.
    Reports MAPE (percent), which way the errors lean (pred/meas: the median of predicted over
    measured; of throughput above 1 is optimistic, of --target step_time pessimistic), the
    MAPE of a plain log-linear baseline, and how often the 90% interval held the measurement.

    Examples:

        advisor evaluate --store m.db --split model

        advisor evaluate --store m.db --split nodes --max-train-workers 4 --format json

        advisor evaluate --store m.db --split gpu --exclude-software pytorch-20.06

        advisor evaluate --store m.db --split source

        advisor evaluate --store m.db --split stack
    """
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from advisor.modelling import evaluate as run
    from gpuadvisor.cli.output import stderr_progress
    from gpuadvisor.errors import GpuAdvisorError

    with stderr_progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                         TimeElapsedColumn()) as bar:
        task = bar.add_task(f"fitting the folds of --split {split}", total=None)
        try:
            result = run(store, split=split, target=target,
                         include_published=include_published,
                         max_train_workers=max_train_workers, exclude_software=exclude_software,
                         jobs=jobs, progress=lambda done, total: bar.update(
                             task, completed=done, total=total)).to_dict()
        except GpuAdvisorError as exc:
            fail_with(exc)
    warn_skipped(result["skipped"])
    if fmt is Format.json:
        emit_json(result)
        return
    rows = [{**g, "coverage": f"{g['coverage']:.0%}", "median_ratio": f"{g['median_ratio']:.2f}"}
            for g in result["groups"]]
    rows.append({"group": "all", "n": result["n"], "mape": result["mape"],
                 "median_ratio": f"{result['median_ratio']:.2f}",
                 "baseline_mape": result["baseline_loglinear_mape"],
                 "coverage": f"{result['interval_coverage']:.0%}"})
    emit(rows, ["group", "n", "mape", "median_ratio", "baseline_mape", "coverage"], fmt,
         headers={"mape": "MAPE %", "median_ratio": "pred/meas",
                  "baseline_mape": "log-linear MAPE %", "coverage": "in 90% interval"},
         title=f"{target}, held out by {split}", right=("n", "mape", "median_ratio",
                                                        "baseline_mape"))
