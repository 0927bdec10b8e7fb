"""`profiler card`: a model card (parameters, FLOPs, gradient and activation bytes, default
workload), computed live with torch on the meta device: a zoo model at any input size, or your
own model from a Hugging Face config file or a Python callable, saved where `advisor
recommend` finds it."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from gpuadvisor.cli.output import (
    Format,
    emit,
    emit_json,
    emit_table,
    fail,
    fail_with,
    stderr_progress,
    warn,
)
from profiler.cli.app import app

LIST_COLUMNS = ["model", "task", "dataset", "samples_per_epoch", "epochs", "input",
                "batch_per_gpu", "params_m", "gflops_per_sample"]
LIST_WORKLOAD = ["model", "task", "dataset", "samples_per_epoch", "epochs", "image_size",
                 "seq_len", "batch_per_gpu"]
LIST_HEADERS = {"samples_per_epoch": "samples/epoch", "batch_per_gpu": "batch/GPU",
                "params_m": "params M", "gflops_per_sample": "GFLOPs/sample fwd+bwd"}


@app.command()
def card(
    model: str | None = typer.Argument(None, help="zoo model, e.g. resnet50 (see --list)"),
    list_zoo: bool = typer.Option(False, "--list", help="list the zoo and every card in use "
                                  "(at other sizes, your own)"),
    all_models: bool = typer.Option(False, "--all", help="compute the card of every model"),
    write: bool = typer.Option(False, "--write", help="with --all: write them to your own "
                               "model_cards.csv in the user data dir, read before the "
                               "shipped cards"),
    config: Path | None = typer.Option(None, "--config", help="your model: a Hugging Face "
                                       "config.json (offline; no weights): a causal or masked "
                                       "LM, a text encoder-decoder (T5, BART; target as long "
                                       "as --seq-len) or an image classifier"),
    build: str | None = typer.Option(None, "--callable", help="your model: pkg.module:build, "
                                     "a function returning a torch.nn.Module"),
    example: str | None = typer.Option(None, "--input", help="with --callable: "
                                       "pkg.module:example, called with the batch size (1), "
                                       "returning the model's input"),
    name: str | None = typer.Option(None, "--name", help="your card's name (default: the "
                                    "config's folder or the callable's name)"),
    # bounded as a sweep spec's are: past them the tracing itself runs out of memory
    image_size: int | None = typer.Option(None, "--image-size", min=16, max=8192,
                                          help="image models: pixels a side"),
    seq_len: int | None = typer.Option(None, "--seq-len", min=1, max=1 << 20,
                                       help="text models: tokens a sequence"),
    batch_per_gpu: int | None = typer.Option(None, "--batch-per-gpu", min=1,
                                             help="the card's default micro-batch per GPU"),
    dataset: str = typer.Option("custom", help="your card: the data set's name"),
    samples_per_epoch: int | None = typer.Option(None, min=1, help="your card: samples an "
                                                 "epoch (else give recommend --tokens, "
                                                 "--samples or --steps)"),
    epochs: int | None = typer.Option(None, min=1, help="your card: default epochs"),
    save: bool = typer.Option(False, "--save", help="add the card to your own "
                              "model_cards.csv, where `advisor recommend --model NAME` finds "
                              "it"),
    out: Path | None = typer.Option(None, "--out", help="also write the card as JSON to "
                                    "this file (for `advisor recommend --card FILE`)"),
    fmt: Format = typer.Option(Format.table, "--format", help="table for people; json or csv"),
) -> None:
    """Show a model card: parameters, forward and forward+backward FLOPs per sample, fp32
    gradient bytes (what all-reduce moves), activation bytes saved for backward per sample,
    and the default workload. Computed live on the meta device (seconds); no weights are
    downloaded. A zoo model at another input size is named model@size (bert_large@384).

    Examples:

        profiler card resnet50

        profiler card vit_b16 --image-size 384 --format json

        profiler card bert_large --seq-len 384 --save     # recommend --seq-len 384 uses it

        profiler card --config my-llama/config.json --seq-len 4096 --save

        profiler card --callable mypkg.nets:build --image-size 256 --out mynet.json

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
    sources = [flag for flag, given in (("MODEL", model), ("--config", config),
                                        ("--callable", build)) if given]
    if len(sources) != 1:
        fail("name a zoo model (profiler card resnet50), --config config.json or "
             "--callable pkg.module:build, one of them; or give --list"
             + (f" (got {' and '.join(sources)})" if sources else ""))
    if example and not build:
        fail("--input goes with --callable")
    if model:
        try:
            entry = zoo.resolve(model)
        except zoo.UnknownModelError as exc:
            fail(str(exc))
        computed = _compute([entry.name], image_size, seq_len, batch_per_gpu)[0]
    else:
        computed = _own(config, build, example, name, image_size, seq_len, batch_per_gpu,
                        dataset, samples_per_epoch, epochs)
    _keep(computed, save, out)
    if fmt is Format.table:
        emit(_table_rows(computed), ["field", "value"], fmt,
             title=f"model card: {computed['model']}")
    elif fmt is Format.csv:
        from gpuadvisor.cards import COLUMNS

        emit([computed], COLUMNS, fmt)
    else:
        emit_json(computed)


def _own(config, build, example, name, image_size, seq_len, batch_per_gpu, dataset,
         samples_per_epoch, epochs) -> dict:
    """The card of the user's own model, from a config file or a callable."""
    from gpuadvisor.cards import CardError

    try:
        from profiler import own_cards

        work = own_cards.Workload(seq_len, image_size, batch_per_gpu, dataset,
                                  samples_per_epoch, epochs)
        with _stderr().status("tracing on the meta device"):
            if config:
                card = own_cards.config_card(config, name, work)
                if "eager attention" in card["source"]:
                    note = own_cards.EAGER_ATTENTION_NOTE.format(model_type=card["family"])
                    warn(f"{card['model']}: {note}; its throughput and memory estimates are "
                         "pessimistic")
                return card
            return own_cards.callable_card(build, example, name, work)
    except CardError as exc:
        fail_with(exc, {"callable_spec": "callable", "input_spec": "input"})
    except ImportError as exc:
        fail(str(exc), 1)


def _keep(computed: dict, save: bool, out: Path | None) -> None:
    """Save the card where recommend finds it, and/or as a JSON card file."""
    from gpuadvisor.cards import save_own_card

    try:
        if save:
            path = save_own_card(computed)
            typer.echo(f"saved {computed['model']} to {path}; `advisor recommend "
                       f"{_model_flags(computed)}` uses it", err=True)
        if out:
            out.write_text(json.dumps(computed, indent=2) + "\n")
            typer.echo(f"wrote {out}; `advisor recommend --card {out}` uses it", err=True)
    except OSError as exc:
        fail(f"cannot write the card ({exc.strerror}: {exc.filename}); choose a writable "
             "place", 1)


def _model_flags(computed: dict) -> str:
    """The recommend flags that pick this card (bert_large@384: --model bert_large --seq-len
    384)."""
    from gpuadvisor.cards import base_model

    model = computed["model"]
    if base_model(model) == model:
        return f"--model {model}"
    size = ("--seq-len", computed["seq_len"]) if computed["task"] == "text" else (
        "--image-size", computed["image_size"])
    return f"--model {base_model(model)} {size[0]} {size[1]}"


def _compute(names: list[str], image_size=None, seq_len=None, batch_per_gpu=None) -> list[dict]:
    from gpuadvisor.errors import GpuAdvisorError

    try:
        from profiler.cards import compute_cards

        # one card is traced in this process (compute_cards starts no pool for it)
        with stderr_progress() as progress:
            task = progress.add_task("computing on the meta device", total=len(names))
            return compute_cards([(name, image_size, seq_len, batch_per_gpu) for name in names],
                                 progress=lambda name: progress.update(
                                     task, advance=1, description=f"card of {name} done"))
    except ImportError as exc:
        fail(str(exc), 1)
    except GpuAdvisorError as exc:  # a size the model does not take (CardError)
        fail_with(exc)


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def _table_rows(computed: dict) -> list[dict]:
    """The card as field/value rows for people: the classes' traffic under autocast as one
    row of ratios to their fp32 traffic, and each class's intensity profile (56 columns in the
    file) as one row of shares, where the class has work."""
    from gpuadvisor.cards import (
        AUTOCAST_BYTES_COLUMNS,
        INTENSITY_EDGES,
        PROFILE_COLUMNS,
        PROFILED_CLASSES,
        VERSION_COLUMNS,
        executed_flops_column,
        profile_column,
    )

    folded = {*PROFILE_COLUMNS, *AUTOCAST_BYTES_COLUMNS.values(), *VERSION_COLUMNS}
    rows = [{"field": k, "value": _readable(k, v)} for k, v in computed.items()
            if k not in folded]
    ratios = [f"{kind} {computed[column] / computed[f'{kind}_bytes_per_sample']:.2f}"
              for kind, column in AUTOCAST_BYTES_COLUMNS.items()
              if computed.get(column) is not None and computed.get(f"{kind}_bytes_per_sample")]
    if ratios:
        rows.append({"field": "autocast traffic / fp32 traffic", "value": " ".join(ratios)})
    rows.append({"field": "intensity edges (FLOPs per fp32 byte)",
                 "value": " ".join(str(edge) for edge in INTENSITY_EDGES)})
    for kind in PROFILED_CLASSES:
        for what in ("flops", "bytes"):  # the profile's FLOPs are those the kernels execute
            executed = what == "flops" and computed.get(executed_flops_column(kind))
            total = executed or computed.get(f"{kind}_{what}_per_sample") or 0
            if not total or computed.get(profile_column(kind, INTENSITY_EDGES[0], what)) is None:
                continue
            shares = [computed[profile_column(kind, edge, what)] / total
                      for edge in INTENSITY_EDGES]
            rows.append({"field": f"{kind} {what} under each edge",
                         "value": " ".join(f"{share:.0%}" for share in shares)})
    return rows + [{"field": k, "value": computed[k]} for k in VERSION_COLUMNS if k in computed]


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
    # the zoo in its order (a card missing from the files still shows its workload), then
    # the cards at other sizes and the user's own
    known = [{**shipped.get(e.name, {}), **{k: getattr(e, k) for k in LIST_WORKLOAD[1:]},
              "model": e.name} for e in zoo.ZOO.values()]
    known += [card for name, card in shipped.items() if name not in zoo.ZOO]
    rows = [{
        **{k: card.get(k) for k in LIST_WORKLOAD},
        "input": f"{card['image_size']}px" if card["task"] == "image" else
                 f"{card['seq_len']} tokens" if card["task"] == "text" else None,
        "params_m": round(card["params"] / 1e6, 1) if card.get("params") else None,
        "gflops_per_sample": round(card["flops_per_sample"] / 1e9, 2)
        if card.get("flops_per_sample") else None,
    } for card in known]
    if fmt is not Format.table:
        return emit(rows, LIST_COLUMNS, fmt)
    emit_table(rows, LIST_COLUMNS, title="model cards", headers=LIST_HEADERS, wrap=False)
