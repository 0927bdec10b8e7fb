"""`advisor fit`: fit the performance models on a measurement store and write the artifact."""

from __future__ import annotations

from pathlib import Path

import typer

from advisor.cli.app import app
from gpuadvisor.cli.output import (
    FORMAT_OPTION_HELP,
    Format,
    emit,
    emit_json,
    fail,
    fail_with,
    flag_words,
    warn,
)
from gpuadvisor.cli.settings import envvar

# Shared with `advisor evaluate`, which must leave out the same trials to judge a fit.
EXCLUDE_SOFTWARE_OPTION = typer.Option(
    [], "--exclude-software", metavar="TEXT",
    help="leave out trials whose recorded software contains TEXT (repeatable), e.g. a "
    "superseded container release: `--exclude-software pytorch-20.06`")


@app.command("fit")
def fit(
    store: Path = typer.Option(..., "--store", envvar=envvar("store"), dir_okay=False,
                               help="measurement store (SQLite file)"),
    output: Path = typer.Option(Path("model_artifact.json"), "--output", "-o",
                                help="where to write the artifact (JSON)", dir_okay=False),
    include_published: bool = typer.Option(
        True, "--include-published/--no-include-published",
        help="fit on trials with source 'published' (NVIDIA's figures) too"),
    exclude_software: list[str] = EXCLUDE_SOFTWARE_OPTION,
    fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP),
) -> None:
    """Fit throughput, start-up, checkpoint and recovery models and the spot-lifetime model.

    Throughput: a roofline + communication model with few physical coefficients, a ridge
    log-linear correction and split-conformal 90% intervals from held-out folds. The artifact
    is versioned JSON that `advisor recommend` reads with numpy alone.

    Examples:

        advisor fit --store m.db --output my_artifact.json

        advisor fit --store m.db --no-include-published --format json

        advisor fit --store m.db --exclude-software pytorch-20.06
    """
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    from advisor.modelling import fit as run
    from gpuadvisor.cli.output import stderr_progress
    from gpuadvisor.errors import GpuAdvisorError
    from gpuadvisor.overwrite import overwrite_problem

    if problem := overwrite_problem(output, "artifact"):
        fail(problem)

    # seconds to a minute (the inner cross-validation's fits): a pulsing bar says it is alive
    with stderr_progress(TextColumn("{task.description}"), BarColumn(),
                         TimeElapsedColumn()) as bar:
        bar.add_task(f"fitting the models on {store.name}", total=None)
        try:
            result = run(store, output=output, include_published=include_published,
                         exclude_software=exclude_software)
        except GpuAdvisorError as exc:
            fail_with(exc)
    warn_skipped(result.skipped)
    warn_at_bound(result.coefficients, result.coefficients_at_bound)
    summary = result.to_dict()
    if fmt is Format.json:
        emit_json(summary)
        return
    rows = [{"what": k, "value": ", ".join(v) or "none" if isinstance(v, list) else v}
            for k, v in summary.items() if not isinstance(v, dict)]
    rows += [{"what": f"coefficient {k}", "value": v} for k, v in summary["coefficients"].items()]
    emit(rows, ["what", "value"], fmt, title=f"fitted -> {output}")


def warn_skipped(skipped: dict[str, int]) -> None:
    """One stderr line per reason the store's trials were left out (no card for a model, an
    unknown GPU, a superseded stack), so that data someone imported is never dropped
    silently."""
    for reason, count in sorted(skipped.items()):
        warn(f"skipped {count} trial(s): {flag_words(reason, parameters=['exclude_software'])}")


def warn_at_bound(coefficients: dict[str, float], at_bound: list[str]) -> None:
    """One stderr line per coefficient the fit pinned on its physical bound: the trials ask for
    that work faster than the GPU allows, so the fit is absorbing an error elsewhere and the
    artifact's predictions that lean on the term are optimistic."""
    from advisor.fitting import bound_meaning

    for term in at_bound:
        warn(f"coefficient {term} = {coefficients[term]:.2f} is on its physical bound "
             f"({bound_meaning(term)}): these trials ran that work faster than the GPU can, so "
             "the fit is absorbing an error elsewhere and predictions leaning on it are "
             "optimistic; check the trials' model cards and stacks (--exclude-software leaves "
             "a stack out)")
