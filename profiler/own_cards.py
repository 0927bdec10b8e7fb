"""Cards of models outside the zoo: from a Hugging Face `config.json` (offline, no weights) or
from a Python callable that returns a `torch.nn.Module`. Both are built on the meta device and
measured like the zoo's (`profiler.cards.figures`). Every failure is a CardError with a
one-line message naming the fix.
"""

from __future__ import annotations

import importlib
import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpuadvisor.cards import CardError, check_card, check_input_size
from gpuadvisor.textfile import unreadable
from profiler import cards

# transformers' heads by the suffix of an `architectures` entry, and the task they train.
HEADS = {"ForCausalLM": "causal", "LMHeadModel": "causal", "ForMaskedLM": "masked",
         "ForPreTraining": "masked", "ForImageClassification": "image",
         "ForConditionalGeneration": "seq2seq"}
# In the order a config that names no architecture is tried: an encoder-decoder first, since
# BART-like configs also have a decoder-only causal head that is not what they train.
AUTO_CLASSES = {"seq2seq": "AutoModelForSeq2SeqLM", "causal": "AutoModelForCausalLM",
                "masked": "AutoModelForMaskedLM", "image": "AutoModelForImageClassification"}
# transformers runs some architectures' attention only eagerly (MPT, for one): their cards
# count the T x T scores as written, read and kept for backward, which a fused kernel never
# does, so such a card overstates the traffic and activation memory of FlashAttention training.
EAGER_ATTENTION_NOTE = ("eager attention: transformers has no SDPA kernel for {model_type}, so "
                        "the card counts the T x T scores in memory, as FlashAttention "
                        "training does not")
# MPT's attention adds ALiBi's per-head linear bias to the scores, which transformers
# computes eagerly; MPT trains with FlashAttention, which computes that bias inside its fused
# causal kernel (flash-attn's `alibi_slopes`), so an MPT card runs a fused causal kernel
# instead: the same FLOPs but the bias add, no T x T scores in memory.
FUSED_ALIBI_NOTE = ("attention as a fused causal kernel with ALiBi's bias computed in it, as "
                    "FlashAttention trains MPT; transformers' eager path would write the T x T "
                    "scores")
# A starting micro-batch when none is given; the advisor picks what fits each GPU.
DEFAULT_BATCH = {"image": 32, "text": 8}


@dataclass(frozen=True)
class Workload:
    """What the card says about training, beyond the model: all optional."""

    seq_len: int | None = None
    image_size: int | None = None
    batch_per_gpu: int | None = None
    dataset: str = "custom"
    samples_per_epoch: int | None = None
    epochs: int | None = None


def config_card(path: Path, name: str | None, work: Workload) -> dict:
    """The card of the model a Hugging Face config file describes, with its training head."""
    import torch

    transformers = _transformers()
    config, head = _config(Path(path), transformers)
    task = "image" if head == "image" else "text"
    check_input_size(task, str(path), work.image_size, work.seq_len)
    if task == "image":
        size = work.image_size or getattr(config, "image_size", None)
        if not size:
            raise CardError(f"{path} is an image model that sets no image_size: give "
                            "image_size, the pixels a side", "image_size")
        if hasattr(config, "image_size"):
            config.image_size = size
        channels = getattr(config, "num_channels", 3)
    else:
        size = work.seq_len
        if not size:
            raise CardError(f"{path} is a text model: give seq_len, the tokens a training "
                            "sequence holds", "seq_len")
    with torch.device("meta"):
        model = getattr(transformers, AUTO_CLASSES[head]).from_config(config)
    fused = config.model_type == "mpt" and _fuse_alibi_attention(model)
    if head == "causal":  # a class name such as GPT2LMHeadModel does not tell transformers
        model.loss_type = "ForCausalLM"
    model.train()

    def step(n: int):
        if task == "image":
            inputs = {"pixel_values": torch.zeros(n, channels, size, size, device="meta"),
                      "labels": torch.zeros(n, dtype=torch.long, device="meta")}
        else:  # on the meta device token values do not exist: only the shape matters
            ids = torch.zeros(n, size, dtype=torch.long, device="meta")
            inputs = {"input_ids": ids, "labels": ids}
            if head == "seq2seq":  # the decoder reads a target as long as the source
                inputs["decoder_input_ids"] = ids
        return model(**inputs).loss

    with _unpadded_masks():
        measured = _measure(model, step, str(path))
    default = Path(path).parent.name if Path(path).name == "config.json" else Path(path).stem
    source = f"profiler card --config {Path(path).name}"
    if fused:
        source += f" ({FUSED_ALIBI_NOTE})"
    elif task == "text" and getattr(model.config, "_attn_implementation", None) == "eager":
        source += f" ({EAGER_ATTENTION_NOTE.format(model_type=config.model_type)})"
    return _card(name or default, config.model_type, task, size, work, measured, source)


@contextmanager
def _unpadded_masks():
    """transformers asks whether a padding mask is all ones (then the causal kernel needs no
    mask) by reading its values, which meta tensors do not have; a card's synthetic batch
    has no padding, so on the meta device the answer is yes."""
    import transformers.masking_utils as masking

    original = getattr(masking, "fast_all", None)
    if original is None:  # another transformers: nothing to answer
        yield
        return
    masking.fast_all = lambda tensor: True if tensor.is_meta else original(tensor)
    try:
        yield
    finally:
        masking.fast_all = original


def _fuse_alibi_attention(model) -> bool:
    """Run each of an MPT model's attention modules as one fused causal kernel (ALiBi's bias
    left to the kernel, as FlashAttention's `alibi_slopes` computes it): returns whether any
    module was found."""
    import types

    modules = [m for m in model.modules() if type(m).__name__ == "MptAttention"]
    for module in modules:
        module.forward = types.MethodType(_fused_causal_attention, module)
    return bool(modules)


def _fused_causal_attention(self, hidden_states, position_bias=None, cache=None,
                            attention_mask=None, **kwargs):
    """MptAttention's forward with the scores, bias, mask and softmax in one causal SDPA
    call (profiler.cards runs it as the GPU's fused kernel)."""
    import torch.nn.functional as F

    batch, length = hidden_states.shape[:2]
    qkv = self.Wqkv(hidden_states)
    if self.clip_qkv:
        qkv = qkv.clamp(min=-self.clip_qkv, max=self.clip_qkv)
    query, key, value = (part.reshape(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
                         for part in qkv.chunk(3, dim=2))
    context = F.scaled_dot_product_attention(
        query, key, value, dropout_p=self.attn_dropout_p if self.training else 0.0,
        is_causal=True, scale=self.softmax_scale)
    return self.out_proj(context.transpose(1, 2).reshape(batch, length, -1)), None


def callable_card(spec: str, input_spec: str | None, name: str | None, work: Workload) -> dict:
    """The card of the module `spec` ("pkg.module:build") returns, fed `input_spec`'s example
    input (called with the batch size, 1) or, without one, a batch of images at image_size
    or of token ids at seq_len."""
    import torch

    build = _load(spec, "callable_spec")
    example = _load(input_spec, "input_spec") if input_spec else None
    if not (example or work.image_size or work.seq_len):
        raise CardError(f"say what {spec} takes: input_spec pkg.module:example, or "
                        "image_size (images) or seq_len (token ids)", "input_spec",
                        "image_size", "seq_len")
    task = "image" if work.image_size else "text"
    with torch.device("meta"):
        model = _call(build, spec)
        if not isinstance(model, torch.nn.Module):
            raise CardError(f"{spec} returned a {type(model).__name__}, not a torch.nn.Module")

    def step(n: int):
        with torch.device("meta"):
            if example:
                inputs = _call(lambda: example(n), input_spec)
            elif task == "image":
                inputs = torch.zeros(n, 3, work.image_size, work.image_size)
            else:
                inputs = torch.zeros(n, work.seq_len, dtype=torch.long)
        return _loss(model, inputs)

    model.train()
    measured = _measure(model, step, spec)
    size = work.image_size if task == "image" else work.seq_len
    return _card(name or spec.rpartition(":")[2], "custom", task, size, work, measured,
                 f"profiler card --callable {spec}")


def _card(name: str, family: str, task: str, size: int | None, work: Workload,
          measured: dict, source: str) -> dict:
    card = {"model": name, "family": family, "task": task, "dataset": work.dataset,
            "samples_per_epoch": work.samples_per_epoch, "epochs": work.epochs,
            "image_size": size if task == "image" else None,
            "seq_len": size if task == "text" else None,
            "batch_per_gpu": work.batch_per_gpu or DEFAULT_BATCH[task],
            **measured, **cards.versions(), "source": f"{source}: {cards.METHOD}"}
    return check_card(card, f"the card of {name}")


def _transformers():
    try:
        import transformers
    except ImportError:
        raise CardError("cards from configs need torch and transformers: pip install "
                        "'gpu-advisor[profiler]'") from None
    return transformers


def _config(path: Path, transformers):
    """The config in `path` and the training head its architecture names."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    fix = "give a Hugging Face config.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise CardError(f"{unreadable(path, exc)}; {fix}") from None
    except json.JSONDecodeError as exc:
        raise CardError(f"{path} is not JSON ({exc.msg} at line {exc.lineno}); {fix}") from None
    if not isinstance(raw, dict) or not raw.get("model_type"):
        raise CardError(f"{path} has no model_type; {fix} (it names the architecture, e.g. "
                        "\"llama\")")
    try:
        config = CONFIG_MAPPING[raw["model_type"]].from_dict(raw)
    except KeyError:
        raise CardError(f"{path}: unknown architecture model_type {raw['model_type']!r} "
                        f"(transformers {transformers.__version__} does not know it); "
                        "upgrade transformers or use callable_spec", "callable_spec") from None
    except (TypeError, ValueError) as exc:
        raise CardError(f"{path}: bad config ({_first_line(exc)})") from None
    heads = [head for arch in raw.get("architectures") or [] for suffix, head in HEADS.items()
             if arch.endswith(suffix)]
    for head in heads or list(AUTO_CLASSES):
        if type(config) in getattr(transformers, AUTO_CLASSES[head])._model_mapping:
            return config, head
    raise CardError(f"{path}: {raw['model_type']} has no causal-LM, masked-LM, text "
                    "encoder-decoder or image-classification head in transformers; use "
                    "callable_spec", "callable_spec")


def _load(spec: str, parameter: str):
    module_name, _, attribute = spec.partition(":")
    if not (module_name and attribute):
        raise CardError(f"{parameter} {spec!r}: give it as pkg.module:function", parameter)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any error it raises is theirs to fix
        raise CardError(f"{parameter} {spec}: cannot import {module_name} "
                        f"({type(exc).__name__}: {_first_line(exc)})", parameter) from None
    found = getattr(module, attribute, None)
    if not callable(found):
        raise CardError(f"{parameter} {spec}: {module_name} has no function {attribute}",
                        parameter)
    return found


def _call(function, spec: str):
    try:
        return function()
    except CardError:
        raise
    except Exception as exc:  # the user's code: report its error in one line
        raise CardError(f"{spec} failed: {type(exc).__name__}: {_first_line(exc)}") from None


def _loss(model, inputs):
    """A scalar to differentiate: the model's own loss when it computes one, else the mean of
    its output (the loss's own cost is negligible next to the model's)."""
    if isinstance(inputs, dict):
        out = model(**inputs)
    elif isinstance(inputs, (tuple, list)):
        out = model(*inputs)
    else:
        out = model(inputs)
    if getattr(out, "loss", None) is not None:
        return out.loss
    if isinstance(out, (tuple, list)) or hasattr(out, "to_tuple"):
        out = out[0]
    return out.float().mean()


def _measure(model, step, spec: str) -> dict:
    """The card's measured figures (`profiler.cards.figures`; `step(batch)` returns the loss
    of a forward pass at `batch` samples), a failure a CardError naming `spec`."""
    return _call(lambda: cards.figures(model, step), spec)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"
