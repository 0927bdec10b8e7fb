"""`profiler card`: a zoo model's card (parameters, FLOPs, gradient and activation bytes,
default workload), computed live with torch on the meta device."""

from __future__ import annotations

import typer

from gpuadvisor.cli.output import Format, emit, emit_json, emit_table, fail, fail_with
from profiler.cli.app import app

LIST_COLUMNS = ["model", "task", "dataset", "samples_per_epoch", "epochs", "input",
                "batch_per_gpu", "params_m", "gflops_per_sample"]
LIST_HEADERS = {"samples_per_epoch": "samples/epoch", "batch_per_gpu": "batch/GPU",
                "params_m": "params M", "gflops_per_sample": "GFLOPs/sample fwd+bwd"}


@app.command()
def card(
    model: str | None = typer.Argument(None, help="zoo model, e.g. resnet50 (see --list)"),
    list_zoo: bool = typer.Option(False, "--list", help="list the zoo with its shipped cards"),
    all_models: bool = typer.Option(False, "--all", help="compute the card of every model"),
    write: bool = typer.Option(False, "--write", help="with --all: write them to your own "
                               "model_cards.csv in the user data dir, read before the "
                               "shipped cards"),
    image_size: int | None = typer.Option(None, "--image-size", min=16,
                                             help="image models: pixels a side"),
    seq_len: int | None = typer.Option(None, "--seq-len", min=1,
                                          help="text models: tokens a sequence"),
    fmt: Format = typer.Option(Format.table, "--format", help="table for people; json or csv"),
) -> None:
    """Show a model card: parameters, forward and forward+backward FLOPs per sample, fp32
    gradient bytes (what all-reduce moves), activation bytes saved for backward per sample,
    and the default workload. Computed live (about a second); no weights are downloaded.

    Examples:

        profiler card resnet50

        profiler card vit_b16 --image-size 384 --format json

        profiler card gpt2 --seq-len 256

        profiler card --list

        profiler card --all --write      # every card into your own model_cards.csv
    """
    from profiler import zoo

    if write and not all_models:
        fail("--write rewrites every card: use it with --all")
    if list_zoo:
        return _list(fmt)
    if all_models:
        return _all(fmt, write)
    if model is None:
        fail("name a model (profiler card resnet50) or give --list")
    try:
        entry = zoo.resolve(model)
    except zoo.UnknownModelError as exc:
        fail(str(exc))
    computed = _compute([entry.name], image_size, seq_len)[0]
    if fmt is Format.table:
        rows = [{"field": k, "value": _readable(k, v)} for k, v in computed.items()]
        emit(rows, ["field", "value"], fmt, title=f"model card: {entry.name}")
    elif fmt is Format.csv:
        from gpuadvisor.cards import COLUMNS

        emit([computed], COLUMNS, fmt)
    else:
        emit_json(computed)


def _compute(names: list[str], image_size=None, seq_len=None) -> list[dict]:
    from rich.progress import Progress

    from gpuadvisor.errors import GpuAdvisorError

    try:
        from profiler.cards import compute_card

        with Progress(transient=True, console=_stderr()) as progress:
            task = progress.add_task("computing on the meta device", total=len(names))
            out = []
            for name in names:
                progress.update(task, description=f"card of {name}")
                out.append(compute_card(name, image_size, seq_len))
                progress.advance(task)
            return out
    except ImportError as exc:
        fail(str(exc), 1)
    except GpuAdvisorError as exc:  # a size the model does not take (profiler.cards.CardError)
        fail_with(exc)


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def _readable(key: str, value):
    if isinstance(value, int) and value >= 10_000:
        return f"{value:,}"
    return value


def _all(fmt: Format, write: bool) -> None:
    from gpuadvisor import cards, data
    from profiler import zoo

    computed = _compute(zoo.names())
    if write:
        path = data.user_dir() / cards.FILE
        cards.write_cards(computed, path)
        typer.echo(f"wrote {len(computed)} cards to {path}", err=True)
    emit(computed, cards.COLUMNS if fmt is not Format.table else
         ["model", "params", "flops_per_sample", "activation_bytes_per_sample"], fmt,
         title="model cards")


def _list(fmt: Format) -> None:
    from gpuadvisor.cards import load_cards
    from profiler import zoo

    try:
        shipped = load_cards()
    except (OSError, ValueError) as exc:
        fail(f"cannot read the model cards ({exc}); fix or remove your own "
             "model_cards.csv, or reinstall gpu-advisor", 1)
    rows = []
    for entry in zoo.ZOO.values():
        card = shipped.get(entry.name, {})
        rows.append({
            "model": entry.name, "task": entry.task, "dataset": entry.dataset,
            "samples_per_epoch": entry.samples_per_epoch, "epochs": entry.epochs,
            "input": f"{entry.image_size}px" if entry.task == "image" else
                     f"{entry.seq_len} tokens",
            "batch_per_gpu": entry.batch_per_gpu,
            "params_m": round(card["params"] / 1e6, 1) if card.get("params") else None,
            "gflops_per_sample": round(card["flops_per_sample"] / 1e9, 2)
            if card.get("flops_per_sample") else None,
        })
    if fmt is not Format.table:
        return emit(rows, LIST_COLUMNS, fmt)
    emit_table(rows, LIST_COLUMNS, title="model zoo", headers=LIST_HEADERS, wrap=False)
