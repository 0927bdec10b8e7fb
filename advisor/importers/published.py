"""Import published throughput figures (the shipped published_throughput.csv) as trials
with source 'published'.

These are NVIDIA's figures for optimised NGC containers (PyTorch, TensorFlow, PaddlePaddle;
DALI input pipelines for the image models) on DGX nodes, one or several, MLPerf's, TensorFlow's
2017 benchmarks and timm's train benchmark on one GeForce RTX 3090: a prior and a cross-check
for modern GPUs, not measurements of this project's workload.
What lands in `trials`: model (zoo name where one exists), gpu_type (catalog name),
nodes (the optional `nodes` column, else 1), gpus_per_node = num_gpus / nodes, sync
'allreduce', precision, batch_per_gpu, image_size /
seq_len, throughput (samples/s: img/s or seq/s as published; a tok/s figure with a sequence
length is divided by the workload's tokens per sequence, `extra.throughput_as_published`
keeps it; tok/s without one, transformer_big's token batches, stays tok/s, see
`extra.unit`; a figure for one GPU, `img/s/gpu` or `tok/s per GPU`, is the run's over its
GPUs); trial_key: see `trial_key`, software {'container': ...}; `extra`: citation, unit,
in_zoo, suspect (notes mark it SUSPECT), notes, model_as_published, gpu_as_published,
tokens_per_gpu_batch, card (the model card at the row's own input size, traced with its
normalisations' activations fused where the row's code fused them, and with its masked-LM head
on the positions the optional `head_positions` column says the row's code gathered:
`matched_card`), import_fingerprint, and network_gbps (per-node inter-node bandwidth) where the
optional column gives it, and channels_last where the optional `memory_format` says how the
recipe held its tensors (`nhwc` or `nchw`; empty: a tuned recipe's channels-last,
`advisor.features.LAYOUT_KEY`), and interconnect where the optional `interconnect` says how the
node linked its GPUs (PCIe for a server without NVLink bridges, whose GPUs have NVLink on the
datasheet), and the layout where the optional `sharded`, `checkpointing` and `accumulation`
columns give it (an LLM table's FSDP runs with activation checkpointing), and optimizer where
the optional `optimizer` column names what the run stepped where it is not the model's recipe's
(timm's benchmark steps SGD; `none`: forward and backward alone,
`extra.forward_backward_only`), and xla where the optional `xla` column says the run compiled
its step with XLA. Where the optional column `mean_seq_len` gives the mean length a sequence
was padded to (an input pipeline that pads a batch only to its longest sequence), that is the
trial's `seq_len`, the workload it measured, and `extra.max_seq_len` keeps the published
maximum.
"""

from __future__ import annotations

import csv
import datetime
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from advisor.features import LAYOUT_KEY
from advisor.importers import ImportDataError, ImportResult, already_imported, fingerprint
from advisor.memory import OPTIMIZER_STATE_BYTES
from advisor.physics import XLA_KEY
from cloud.gpus import gpu_spec
from gpuadvisor import data
from gpuadvisor.cards import (
    INPUT_SIZE,
    MAKE_A_CARD,
    load_cards,
    matching_card,
    similar_cards,
    sized_card_names,
    variant_name,
)
from gpuadvisor.store import Store
from gpuadvisor.textfile import unreadable
from gpuadvisor.vocab import HALF_PRECISIONS, PUBLISHED_SOURCE, precision_named

SOURCE = PUBLISHED_SOURCE
# The `notes` word that marks a figure its own source contradicts (8-GPU scaling beyond 8x,
# another table's figure repeated): kept for the record, never fitted or evaluated.
SUSPECT_MARK = "SUSPECT"
SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
FILE = "published_throughput.csv"
COLUMNS = ("model", "model_as_published", "in_zoo", "framework", "gpu", "gpu_as_published",
           "num_gpus", "precision", "batch_per_gpu", "tokens_per_gpu_batch", "image_size",
           "seq_len", "throughput", "unit", "software", "as_of", "source", "notes")
# What another benchmark's table must give; `filled_row` fills the rest of COLUMNS.
REQUIRED_COLUMNS = ("model", "gpu", "num_gpus", "precision", "batch_per_gpu", "throughput",
                    "unit")


def _int(value: str, column: str) -> int | None:
    """A positive count the store can hold (an SQLite integer), or None for an empty cell."""
    try:
        number = int(value) if value else None
    except ValueError:
        raise ValueError(f"{column} is {value[:20]!r}, expected a whole number") from None
    if number is not None and not 0 < number < 2**63:
        raise ValueError(f"{column} is {value[:20]}, expected a count of 1 or more")
    return number


def _positive(value: str, column: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{column} is {value[:20]!r}, expected a positive number") from None
    if not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{column} is {value[:20]}, expected a positive number")
    return number


# Units of the `throughput` column: samples (images, sequences) or tokens a second; "/sec" and
# "/second" read as "/s" ("images/sec").
SAMPLE_UNITS = ("img/s", "images/s", "samples/s", "seq/s", "sequences/s", "sentences/s",
                "examples/s")
TOKEN_UNITS = ("tok/s", "tokens/s")
PER_SECOND = re.compile(r"\s*/\s*sec(ond)?s?$")
# A figure for one GPU of the run ("tok/s/gpu", "images/sec per GPU"), as LLM tables give it.
PER_DEVICE = re.compile(r"\s*(/|\bper\s+)\s*(gpu|device|accelerator)$")


def samples_per_second(row: dict[str, str], value: float, seq_len: int | None,
                       card: str | None) -> float:
    """The row's throughput `value` in samples a second of the whole run: tokens a second over
    the tokens of a sequence (the workload's, `seq_len`), and a figure per GPU times the run's
    GPUs; ValueError for another unit, or tokens a second of a model that has a card but no
    sequence length (which no card could price)."""
    unit, per_gpu = PER_DEVICE.subn("", row["unit"].strip().lower())
    if per_gpu:
        value *= _int(row["num_gpus"] or "0", "num_gpus")
    unit = PER_SECOND.sub("/s", unit)
    if unit in SAMPLE_UNITS:
        return value
    if unit not in TOKEN_UNITS:
        raise ValueError(f"unit is {row['unit'][:20]!r}, expected one of "
                         f"{', '.join(SAMPLE_UNITS + TOKEN_UNITS)}, for the whole run or "
                         "followed by /gpu for one GPU of it")
    if seq_len:
        return value / seq_len
    if card:
        raise ValueError(f"a {row['unit']} figure of {row['model']} needs its seq_len (tokens a "
                         "sequence) to become sequences/s")
    return value


# The optional `memory_format` column: how the recipe held its tensors, as channels_last.
MEMORY_FORMATS = {"nhwc": True, "nchw": False}
# The `optimizer` of a benchmark that timed forward and backward without stepping one.
NO_OPTIMIZER = "none"


# The optional `interconnect` column: how the node linked its GPUs, as the catalog says it.
INTERCONNECTS = {name.lower(): name for name in ("PCIe", "NVLink", "NVSwitch")}


def _interconnect(row: dict[str, str]) -> dict[str, str]:
    """`extra.interconnect` of a row whose `interconnect` says it (nothing where empty: an SXM
    board's own NVLink, else PCIe, as for any trial: advisor.features.gpu_link_gb_s)."""
    given = (row.get("interconnect") or "").strip()
    if not given:
        return {}
    if given.lower() not in INTERCONNECTS:
        raise ValueError(f"interconnect is {given[:20]!r}, expected PCIe (no GPU-to-GPU link), "
                         "NVLink, NVSwitch or empty (an SXM board's NVLink, else PCIe)")
    return {"interconnect": INTERCONNECTS[given.lower()]}


# The optional layout columns: how the job held its model (advisor.sharding), where not plain DDP.
FLAGS = {"1": True, "yes": True, "true": True, "0": False, "no": False, "false": False}


def _flag(row: dict[str, str], column: str) -> bool | None:
    """A yes-or-no column's value (FLAGS); None where empty."""
    given = (row.get(column) or "").strip().lower()
    if given and given not in FLAGS:
        raise ValueError(f"{column} is {given[:20]!r}, expected 1 or 0 (yes or no)")
    return FLAGS[given] if given else None


def _layout(row: dict[str, str]) -> dict[str, Any]:
    """`extra.sharded`, `extra.checkpointing` and `extra.accumulation` of a row whose optional
    columns give them (FSDP full shard, activation checkpointing, micro-steps an optimizer
    step); nothing where empty: plain DDP, as for any trial."""
    layout: dict[str, Any] = {}
    for column in ("sharded", "checkpointing"):
        if (flag := _flag(row, column)) is not None:
            layout[column] = flag
    if accumulation := _int((row.get("accumulation") or "").strip(), "accumulation"):
        layout["accumulation"] = accumulation
    return layout


def _xla(row: dict[str, str]) -> dict[str, bool]:
    """`extra.xla` of a row whose optional `xla` column says its run compiled the step with
    XLA (1; 0 or empty: it ran eagerly)."""
    return {XLA_KEY: True} if _flag(row, XLA_KEY) else {}


def _optimizer_named(row: dict[str, str]) -> str:
    """A row's `optimizer` column, in lower case without surrounding space ('' if empty)."""
    return (row.get("optimizer") or "").strip().lower()


def times_forward_backward_only(row: dict[str, str]) -> bool:
    """Whether a row's benchmark timed forward and backward alone (its `optimizer` column
    says NO_OPTIMIZER, in any case and spacing)."""
    return _optimizer_named(row) == NO_OPTIMIZER


def _optimizer(row: dict[str, str]) -> dict[str, Any]:
    """`extra.optimizer` of a row whose `optimizer` column names what the run stepped (a
    benchmark's own, where it is not the model's recipe's), `extra.forward_backward_only`
    where it says `none` (the benchmark timed forward and backward alone); nothing where
    empty."""
    given = _optimizer_named(row)
    if not given:
        return {}
    if given == NO_OPTIMIZER:
        return {"forward_backward_only": True}
    if given not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"optimizer is {given[:20]!r}, expected one of "
                         f"{', '.join(OPTIMIZER_STATE_BYTES)}, {NO_OPTIMIZER} (forward and "
                         "backward alone) or empty (the model's recipe's)")
    return {"optimizer": given}


def _memory_format(row: dict[str, str]) -> dict[str, bool]:
    """`extra.channels_last` of a row whose `memory_format` says it (nothing where empty)."""
    given = (row.get("memory_format") or "").strip().lower()
    if not given:
        return {}
    if given not in MEMORY_FORMATS:
        raise ValueError(f"memory_format is {given[:20]!r}, expected nhwc (channels-last), "
                         "nchw (PyTorch's default) or empty (a tuned recipe's channels-last)")
    return {LAYOUT_KEY: MEMORY_FORMATS[given]}


def trial_key(row: dict[str, str], layout: dict[str, Any] | None = None) -> str:
    """One key per published figure: model, GPU as published, count and precision, then the
    per-GPU batch (or tokens per batch), input size, container, layout and memory format, since one
    README gives several batches and sequence lengths (BERT pre-training phases, fine-tuning)
    for the same GPU count and precision, one figure may be published for two container
    releases, and one benchmark runs each model in NCHW and in NHWC (timm's). `layout`: the
    row's `_layout`, where the caller has parsed it."""
    key = (f"published:{row['model']}/{row['gpu_as_published']}/"
           f"{row['num_gpus']}x/{row['precision']}")
    for prefix, column in (("b", "batch_per_gpu"), ("t", "tokens_per_gpu_batch"),
                           ("img", "image_size"), ("seq", "seq_len")):
        if row[column]:
            key += f"/{prefix}{row[column]}"
    if _nodes(row) > 1:
        key += f"/{_nodes(row)}nodes"
    key = f"{key}/{row['software']}"
    layout = _layout(row) if layout is None else layout
    for name, value in layout.items():  # one model run two ways (an LLM table's AC)
        key += f"/{name}={int(value)}"
    return f"{key}/{row['memory_format']}" if row.get("memory_format") else key


def _nodes(row: dict[str, str]) -> int:
    """Nodes of a multi-node figure: the optional column `nodes` (empty or absent: one; its
    companion `network_gbps` gives each node's inter-node bandwidth)."""
    return _int(row.get("nodes") or "1", "nodes")


def workload_seq_len(row: dict[str, str]) -> int | None:
    """The sequence length a row's work per sample was measured at: the optional
    `mean_seq_len` (the mean a sequence was padded to, never above `seq_len`), else
    `seq_len`."""
    maximum = _int(row["seq_len"], "seq_len")
    mean = _int(row.get("mean_seq_len") or "", "mean_seq_len")
    if mean is None:
        return maximum
    if maximum is None or mean > maximum:
        raise ValueError(f"mean_seq_len {mean} needs a seq_len of at least {mean} (the "
                         "maximum the sequences were padded to)")
    return mean


# Code bases (a row's source, and its framework) whose ResNet-50 runs each batch
# normalisation's ReLU, and the residual add before it, in the normalisation's kernel in 16
# bits: NVIDIA's MXNet code, whose DeepLearningExamples `runner` (which its `benchmark.py`
# calls) passes `--fuse-bn-relu 1 --fuse-bn-add-relu 1` with `--dtype float16`, and whose
# MLPerf Training run script, which every MXNet submitter ran, always does; and
# DeepLearningExamples' PaddlePaddle code, whose `program.py` sets the build strategy's
# `fuse_bn_act_ops` and `fuse_bn_add_act_ops` under AMP.
_FUSED_NORMALISATION_CODE = (("mlcommons/training_results", "mxnet"),
                             ("MxNet/Classification/RN50v1.5", "mxnet"),
                             ("PaddlePaddle/Classification/RN50v1.5", "paddlepaddle"))


def fuses_normalisation(row: dict[str, str]) -> bool:
    """Whether a row's code ran its normalisations' activations fused
    (`_FUSED_NORMALISATION_CODE`, in 16 bits)."""
    source, framework = row.get("source") or "", (row.get("framework") or "").lower()
    if not any(code in source and framework == name
               for code, name in _FUSED_NORMALISATION_CODE):
        return False
    return precision_named(row["precision"]) in HALF_PRECISIONS


def head_positions(row: dict[str, str]) -> int | None:
    """The positions a sequence's masked-LM head ran on, where the optional `head_positions`
    column says the row's code gathered them (None: the head ran on every position)."""
    return _int(row.get("head_positions") or "", "head_positions")


def matched_card(row: dict[str, str], cards: dict[str, dict]) -> str | None:
    """The card of the workload a row measured: its model's card at the row's own input size
    (bert_large@384 for SQuAD fine-tuning at 384 tokens, resnet18_cifar for ResNet-18 at
    32 px), traced with its normalisations' activations fused where the row's code fused them
    and `cards` hold such a card (resnet50+fused_norm: `fuses_normalisation`), or with its
    masked-LM head on the positions the row's code gathered (bert_large@512+head80:
    `head_positions`), or None where no card has that size (the fit then scales the default
    card's per-sample work by the input size)."""
    card = _sized_card(row, cards)
    if card is None:
        return None
    variant = variant_name(card, fuses_normalisation(row), head_positions(row))
    return variant if variant in cards else card


def _sized_card(row: dict[str, str], cards: dict[str, dict]) -> str | None:
    """The card of a row's model at the row's own input size (`matched_card`)."""
    model = matching_card(cards, row["model"])  # BERT-Large is bert_large
    if model is None:
        return None
    card = cards[model]
    column = INPUT_SIZE.get(card["task"])
    if column is None:  # a model without an input size (NCF) has one card
        return model
    size = workload_seq_len(row) if column == "seq_len" else _int(row[column], column)
    if size is None or size == card[column]:
        return model
    return next((name for name in sized_card_names(model, size)
                 if name in cards and cards[name].get(column) == size), None)


def trial_row(row: dict[str, str], cards: dict[str, dict] | None = None) -> dict[str, Any]:
    """The trial of one published row; `cards` (default: the model cards in use) match it
    to the card at its input size (`extra.card`)."""
    try:
        gpu = gpu_spec(row["gpu"]).gpu
    except KeyError as exc:  # names the known GPUs
        raise ValueError(f"{exc.args[0]}; a GPU of your own needs its datasheet row in "
                         f"{data.user_dir() / 'gpus.csv'} (a copy of the shipped gpus.csv with "
                         "the row added; datasets/README.md gives the columns)") from None
    nodes, gpus = _nodes(row), _int(row["num_gpus"] or "0", "num_gpus")
    if nodes < 1 or gpus % nodes:
        raise ValueError(f"num_gpus {gpus} is not a whole number of GPUs on each of "
                         f"{nodes} nodes")
    layout = _layout(row)
    extra = ({"network_gbps": _positive(row["network_gbps"], "network_gbps")}
             if row.get("network_gbps") else {}) | _memory_format(row) | _interconnect(row) \
        | layout | _optimizer(row) | _xla(row)
    seq_len, max_seq_len = workload_seq_len(row), _int(row["seq_len"], "seq_len")
    if seq_len != max_seq_len:
        extra["max_seq_len"] = max_seq_len
    card = matched_card(row, load_cards() if cards is None else cards)
    published = _positive(row["throughput"], "throughput")
    throughput = samples_per_second(row, published, seq_len, card)
    if throughput != published:  # tokens a second as sequences, a GPU's as the run's
        extra["throughput_as_published"] = published
    return {
        "trial_key": trial_key(row, layout),
        "sweep": "published",
        "status": "finished",
        "recorded_at": row["as_of"],
        "source": SOURCE,
        "gpu_type": gpu,
        "gpus_per_node": gpus // nodes,
        "nodes": nodes,
        "sync": "allreduce",
        "model": row["model"],
        "batch_per_gpu": _int(row["batch_per_gpu"], "batch_per_gpu"),
        "precision": precision_named(row["precision"]),
        "image_size": _int(row["image_size"], "image_size"),
        "seq_len": seq_len,
        "throughput": throughput,
        "software": {"container": row["software"], "framework": row["framework"]},
        "extra": {
            "citation": row["source"],
            "unit": row["unit"],
            "in_zoo": row["in_zoo"] == "1",
            # A figure its source contradicts (its transcriber marks it and says why in notes)
            "suspect": SUSPECT_MARK in row["notes"],
            "notes": row["notes"],
            "model_as_published": row["model_as_published"],
            "gpu_as_published": row["gpu_as_published"],
            "tokens_per_gpu_batch": _int(row["tokens_per_gpu_batch"], "tokens_per_gpu_batch"),
            "card": card,
            **extra,
        },
    }


def filled_row(row: dict[str, str], path: Path, cards: dict[str, dict],
               today: str) -> dict[str, str]:
    """A row with the optional COLUMNS its table left out or empty: the names as published are
    the names given, `in_zoo` whether a card matches, the input size the card's, the table
    itself its software stack and citation, today its date."""
    given = {key: value for key, value in row.items() if value not in (None, "")}
    return {column: "" for column in COLUMNS} | {
        "model_as_published": row.get("model") or "", "gpu_as_published": row.get("gpu") or "",
        "in_zoo": "1" if matching_card(cards, row.get("model") or "") else "0",
        "software": path.stem, "as_of": today, "source": f"published: {path.name}",
    } | given


def load_published(path: Path | None = None,
                   cards: dict[str, dict] | None = None) -> list[dict[str, Any]]:
    """The trials of a table (default: the shipped figures), matched to `cards` (default: the
    model cards in use)."""
    path = Path(path) if path else data.find(FILE)
    if not path.is_file():
        raise ImportDataError(f"{path} is not a file; give a CSV in the form of the shipped "
                              f"{FILE} (or no FILE for that one)")
    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ImportDataError(f"{path} lacks columns {', '.join(missing)}; a table "
                                      f"needs {', '.join(REQUIRED_COLUMNS)} (the shipped "
                                      f"{FILE}'s other columns are optional)")
            rows = list(reader)
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportDataError(unreadable(path, exc)) from None
    if not rows:
        raise ImportDataError(f"{path} holds no figures, only its header; add rows in the form "
                              f"of the shipped {FILE}")
    cards = load_cards() if cards is None else cards
    today = datetime.date.today().isoformat()
    trials = []
    for line, row in enumerate(rows, start=2):
        try:
            trials.append(trial_row(filled_row(row, path, cards, today), cards))
        except (ValueError, KeyError) as exc:
            raise ImportDataError(f"{path.name} line {line}: {exc}") from None
    return trials


def is_suspect(trial: dict[str, Any]) -> bool:
    """A stored trial whose figure is no evidence for its card (`extra.suspect`): its own
    source contradicts it, or it ran an implementation the card no longer describes."""
    extra = trial.get("extra")
    return isinstance(extra, dict) and bool(extra.get("suspect"))


def published_source(name: str | None) -> str:
    """The trials' `source`: `published` (NVIDIA's and MLPerf's figures, the shipped file),
    or `published:NAME` for another benchmark's figures, so that `advisor evaluate --split
    source` can hold them out as a source the fit never saw. ImportDataError for a bad name."""
    if name is None:
        return SOURCE
    if not SOURCE_NAME.fullmatch(name):
        raise ImportDataError(f"source name {name!r} must be letters, digits, '.', '_' or '-' "
                         "(e.g. my-lab)")
    return f"{SOURCE}:{name.lower()}"


def import_published(store: Store, path: Path | None = None,
                     source_name: str | None = None) -> ImportResult:
    """Import `path` (default: the shipped figures) under `published_source(source_name)`."""
    source = published_source(source_name)
    path = Path(path) if path else data.find(FILE)
    cards = load_cards()
    trials = load_published(path, cards)
    result = ImportResult(source, fingerprint([path], path.parent))
    if already_imported(store, source, result.fingerprint):
        result.already_imported = True
        return result
    for trial in trials:
        trial["extra"]["import_fingerprint"] = result.fingerprint
        if source != SOURCE:  # another benchmark's figure of the same configuration
            trial["source"] = source
            trial["trial_key"] = f"{source}/{trial['trial_key']}"
    result.rows = store.add_many({"trials": trials})
    if path != data.find(FILE):  # the shipped file's uncarded models (DLRM, nnU-Net) are known
        result.warnings = uncarded_models(trials, cards)
    return result


def uncarded_models(trials: list[dict[str, Any]], cards: dict[str, dict]) -> list[str]:
    """One line per model the trials name that none of `cards` matches: such trials are kept
    but neither fitted nor evaluated, so a table's naming must not drop them unseen."""
    counts = Counter(t["model"] for t in trials if matching_card(cards, t["model"]) is None)
    lines = []
    for model, count in sorted(counts.items()):
        near = similar_cards(cards, model)
        hint = (f"if it is {' or '.join(near)}, name it so in the table; otherwise "
                if near else "")
        lines.append(f"{count} row(s) name {model!r}, which no model card matches: kept, but "
                     f"not fitted or evaluated ({hint}make its card with {MAKE_A_CARD})")
    return lines
