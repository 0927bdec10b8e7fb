"""Cards of one's own models (`profiler card --config / --callable`), card files, and the
workloads they drive (`advisor recommend --model NAME / --card FILE / --tokens / --seq-len`)."""

import json
import textwrap

import pytest
from typer.testing import CliRunner

from advisor.errors import AdvisorError
from advisor.workload import WorkloadError, build_workload, parse_count
from gpuadvisor.cards import CardError, check_card, load_cards, read_card_file

VOCAB = 128256
# Published shapes (hidden, layers, query heads, head dim, tied embeddings) of the zoo's Llamas.
LLAMA_SHAPES = {"llama_1b": (2048, 16, 32, 64, True), "llama_8b": (4096, 32, 32, 128, False),
                "llama_70b": (8192, 80, 64, 128, False)}


def llama_flops(params, hidden, layers, heads, head_dim, tied, tokens, vocab=VOCAB):
    """fwd+bwd FLOPs of one sequence: 6 x the parameters that multiply (all but the norms'
    scales and an untied input embedding, which is a lookup) x tokens, plus attention's
    QK^T and PV (4 L H d T^2 forward) whose memory-efficient backward recomputes QK^T (10)."""
    multiplying = params - (2 * layers + 1) * hidden - (0 if tied else vocab * hidden)
    return 6 * multiplying * tokens + 14 * layers * heads * head_dim * tokens**2


@pytest.mark.parametrize("name", sorted(LLAMA_SHAPES))
def test_shipped_llama_cards_are_6n_plus_attention(name):
    card = load_cards()[name]
    assert card["flops_per_sample"] == llama_flops(card["params"], *LLAMA_SHAPES[name],
                                                   card["seq_len"])
    # PaLM's (Chowdhery et al. 2022, app. B) 6N + 12 L H Q T per token agrees within 6%.
    hidden, layers, heads, head_dim, _ = LLAMA_SHAPES[name]
    palm = 6 * card["params"] + 12 * layers * heads * head_dim * card["seq_len"]
    assert card["flops_per_sample"] / card["seq_len"] == pytest.approx(palm, rel=0.06)


def test_shipped_llama_parameter_counts_are_the_published_ones():
    cards = load_cards()
    assert [cards[n]["params"] for n in ("llama_1b", "llama_8b", "llama_70b")] == [
        1_235_814_400, 8_030_261_248, 70_553_706_496]


@pytest.mark.parametrize("model", ["bert_base", "bert_large"])
def test_bert_cards_at_squad_length_carry_attention(model):
    cards = load_cards()
    base, at384 = cards[model], cards[f"{model}@384"]
    assert (at384["seq_len"], at384["params"]) == (384, base["params"])
    # more than 3x the tokens' linear work: attention grows with the square of the length
    assert at384["flops_per_sample"] > 3.05 * base["flops_per_sample"]
    assert at384["samples_per_epoch"] == base["samples_per_epoch"] * 128 // 384


# --- workloads ---------------------------------------------------------------------------

def test_tokens_become_sequences_at_the_cards_length():
    assert parse_count("20B") == 20e9 and parse_count("1.5T") == 1.5e12
    assert parse_count(3e5) == 3e5 and parse_count("300k") == 3e5
    work = build_workload(load_cards(), "llama_8b", tokens="1B")
    assert work.samples_per_epoch == -(-10**9 // 8192) and work.epochs == 1
    assert work.describe()["tokens"] == 1e9


@pytest.mark.parametrize("kwargs, message", [
    ({"tokens": "lots"}, "tokens must be a count"),
    ({"tokens": "0"}, "tokens must be a count"),
    ({"tokens": "1B", "epochs": 2}, "not both"),
])
def test_bad_token_counts(kwargs, message):
    with pytest.raises(WorkloadError, match=message):
        build_workload(load_cards(), "llama_1b", **kwargs)


def test_input_size_picks_the_card_of_that_size_or_names_the_command():
    cards = load_cards()
    work = build_workload(cards, "bert_large", seq_len=384)
    assert (work.model, work.card, work.seq_len) == ("bert_large", "bert_large@384", 384)
    assert work.flops_per_sample == cards["bert_large@384"]["flops_per_sample"]
    assert build_workload(cards, "bert_large", seq_len=128).card is None
    cifar = build_workload(cards, "resnet18", image_size=32)  # CIFAR's network and workload
    assert (cifar.model, cifar.samples_per_epoch) == ("resnet18_cifar", 50_000)
    with pytest.raises(WorkloadError, match="profiler card bert_large --seq-len 256 --save"):
        build_workload(cards, "bert_large", seq_len=256)
    with pytest.raises(WorkloadError, match="an image model: give image_size, not seq_len"):
        build_workload(cards, "resnet50", image_size=None, seq_len=128)
    with pytest.raises(WorkloadError, match="text models; resnet50 is an image model"):
        build_workload(cards, "resnet50", tokens="1B")


# --- card files ----------------------------------------------------------------------------

GOOD = {"model": "mine", "family": "custom", "task": "text", "dataset": "custom",
        "samples_per_epoch": 1000, "epochs": 1, "seq_len": 512, "batch_per_gpu": 8,
        "params": 10**8, "gradient_bytes": 4 * 10**8, "flops_per_sample": 3 * 10**11,
        "activation_bytes_per_sample": 10**8}


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not JSON"),
    ("[1, 2]", "holds a JSON list, not one card"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "params"}), "lacks params"),
    (json.dumps({**GOOD, "params": -5}), "params must be a positive number"),
    (json.dumps({**GOOD, "flops_per_sample": "many"}), "flops_per_sample must be a number"),
    (json.dumps({**GOOD, "task": "speech"}), "task 'speech' is not one of image, text"),
])
def test_bad_card_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "card.json"
    path.write_text(content)
    with pytest.raises(CardError, match=message) as info:
        read_card_file(path)
    assert "\n" not in str(info.value)
    result = recommend("--card", str(path), "--deadline", "3d")
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_card_file_drives_recommend(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(GOOD))
    out = json.loads(recommend("--card", str(path), "--tokens", "1B", "--deadline", "3d",
                               "--format", "json").stdout)
    assert out["workload"]["model"] == "mine" and out["workload"]["tokens"] == 1e9
    assert out["workload"]["samples_per_epoch"] == -(-10**9 // 512)


def test_model_and_card_must_agree(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(GOOD))
    result = recommend("--card", str(path), "--model", "resnet50", "--deadline", "3d")
    assert result.exit_code == 2 and "resnet50, is not the card file's (mine" in result.stderr


def test_a_card_without_an_amount_of_data_asks_for_one():
    card = check_card({**GOOD, "samples_per_epoch": None, "epochs": None}, "test")
    with pytest.raises(AdvisorError, match="sets no amount of data; give tokens"):
        build_workload({"mine": card}, "mine")
    assert build_workload({"mine": card}, "mine", tokens="2B").samples_per_epoch == 2e9 / 512


def recommend(*args):
    from advisor.cli.app import app
    from advisor.cli.recommend import recommend as _registered  # noqa: F401

    return CliRunner().invoke(app, ["recommend", *args])


# --- profiler card --config / --callable (torch) -------------------------------------------

def card_cli(*args):
    from profiler.cli import COMMAND_MODULES, app

    for name in COMMAND_MODULES:
        __import__(f"profiler.cli.{name}")
    return CliRunner().invoke(app, ["card", *map(str, args)])


TINY_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
              "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 2048}


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny-llama" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(TINY_LLAMA))
    return path


@pytest.fixture
def torch():
    pytest.importorskip("transformers")
    return pytest.importorskip("torch")


def test_a_config_card_is_saved_where_recommend_finds_it(tmp_path, tiny_config, torch,
                                                         monkeypatch):
    monkeypatch.setenv("GPUADVISOR_HOME", str(tmp_path / "home"))
    result = card_cli("--config", tiny_config, "--seq-len", 512, "--save", "--out",
                      tmp_path / "tiny.json", "--format", "json")
    assert result.exit_code == 0, result.output
    card = load_cards()["tiny-llama"]
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.device("meta"):
        reference = LlamaForCausalLM(LlamaConfig(**TINY_LLAMA))
    assert card["params"] == sum(p.numel() for p in reference.parameters())
    assert card["flops_per_sample"] == llama_flops(card["params"], 256, 2, 4, 64, False, 512,
                                                   vocab=1000)
    assert read_card_file(tmp_path / "tiny.json") == card
    out = json.loads(recommend("--model", "tiny-llama", "--tokens", "2B", "--deadline", "2d",
                               "--format", "json").stdout)
    assert out["workload"]["model"] == "tiny-llama" and out["pick"]["throughput"] > 0


def test_a_config_whose_attention_runs_only_eagerly_says_so(tmp_path, torch):
    """transformers has no SDPA kernel for BLOOM: its card counts the T x T scores (written,
    read, kept for backward), and the card and the command say so; a Llama's does not."""
    bloom = {"model_type": "bloom", "architectures": ["BloomForCausalLM"], "hidden_size": 128,
             "n_head": 4, "n_layer": 2, "vocab_size": 1000}
    for name, config in (("tiny-bloom", bloom), ("tiny-llama", TINY_LLAMA)):
        card, output = _config_card(tmp_path, name, config)
        eager = name == "tiny-bloom"
        assert ("warning: tiny-bloom: eager attention" in output) == eager
        assert ("eager attention: transformers has no SDPA kernel for bloom" in card["source"]) \
            == eager
        assert (card["attention_flops_per_sample"] == 0) == eager  # QK^T and PV as matmuls


def test_an_mpt_card_runs_its_attention_as_a_fused_causal_kernel(tmp_path, torch, monkeypatch):
    """MPT trains with FlashAttention, ALiBi's bias computed in the kernel: its card runs one
    fused causal kernel per layer (transformers' eager path keeps each layer's 4 x 256 x 256
    fp32 softmax output for backward, 1 MiB a sample), and says so."""
    mpt = {"model_type": "mpt", "architectures": ["MptForCausalLM"], "d_model": 128,
           "n_heads": 4, "n_layers": 2, "expansion_ratio": 4, "max_seq_len": 512,
           "vocab_size": 1000}
    card, output = _config_card(tmp_path, "tiny-mpt", mpt)
    assert "eager attention" not in output and "fused causal kernel" in card["source"]
    # causal: the 3 of 4 128-row tiles on or below the diagonal, of QK^T and PV forward (2 x
    # 2 x 256 x 256 x 128 FLOPs) and 2.5 times that backward (the scores recomputed, four
    # gradient products), in 2 layers
    full = 2 * 2 * 256 * 256 * 128
    assert card["attention_flops_per_sample"] == pytest.approx(2 * 3.5 * full * 3 / 4)
    monkeypatch.setattr("profiler.own_cards._fuse_alibi_attention", lambda model: False)
    eager, _ = _config_card(tmp_path, "eager-mpt", mpt)
    scores = 2 * 4 * 256 * 256 * 4  # each layer's softmax output, fp32, kept for backward
    assert eager["activation_bytes_per_sample"] - card["activation_bytes_per_sample"] >= scores


def test_an_encoder_decoder_config_gets_a_seq2seq_card(tmp_path, torch):
    """T5 (its architecture named) and BART (none named: an encoder-decoder comes before
    BART's decoder-only causal head) train source and target of --seq-len tokens each. Matrix
    products by hand, per token: 2 encoder layers (Q, K, V, O: 4 x 128^2; FFN 2 x 128 x 512),
    2 decoder layers (self and cross attention 8 x 128^2; FFN) and the LM head (128 x 1,000)."""
    t5 = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": 128,
          "d_ff": 512, "num_layers": 2, "num_heads": 4, "d_kv": 32, "vocab_size": 1000}
    bart = {"model_type": "bart", "d_model": 128, "encoder_layers": 2, "decoder_layers": 2,
            "encoder_attention_heads": 4, "decoder_attention_heads": 4,
            "encoder_ffn_dim": 512, "decoder_ffn_dim": 512, "vocab_size": 1000}
    macs = 2 * (4 * 128**2 + 2 * 128 * 512) + 2 * (8 * 128**2 + 2 * 128 * 512) + 128 * 1000
    for name, config in (("tiny-t5", t5), ("tiny-bart", bart)):
        card, _ = _config_card(tmp_path, name, config)
        assert card["family"] == config["model_type"] and card["task"] == "text"
        assert card["matmul_flops_per_sample"] == 3 * 2 * macs * 256, name


def _config_card(tmp_path, name: str, config: dict) -> tuple[dict, str]:
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    result = card_cli("--config", path, "--seq-len", 256, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{"):]), result.output


@pytest.mark.parametrize("config, args, message", [
    ("{", [], "is not JSON"),
    (json.dumps({"hidden_size": 8}), [], "has no model_type"),
    (json.dumps({"model_type": "no-such-net"}), [], "unknown architecture model_type"),
    (json.dumps(TINY_LLAMA), [], "give --seq-len"),
    (json.dumps(TINY_LLAMA), ["--image-size", "64"], "use --seq-len, not --image-size"),
])
def test_bad_configs_are_one_line_errors(tmp_path, torch, config, args, message):
    path = tmp_path / "config.json"
    path.write_text(config)
    result = card_cli("--config", path, *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert result.output.strip().count("\n") == 0


NETS = textwrap.dedent("""
    import torch

    def build():
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 10))

    def broken():
        raise RuntimeError("no such layer")

    def not_a_module():
        return 42

    def example(batch):
        return torch.zeros(batch, 3, 16, 16)
""")


@pytest.fixture
def nets(tmp_path, monkeypatch):
    (tmp_path / "my_nets.py").write_text(NETS)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_callable_card_counts_by_hand(torch, nets):
    result = card_cli("--callable", "my_nets:build", "--input", "my_nets:example",
                      "--format", "json")
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["model"] == "build" and card["params"] == 768 * 10 + 10
    # forward 2 x 768 x 10; backward: the weight gradient only (the input needs none)
    assert card["forward_flops_per_sample"] == 15360 and card["flops_per_sample"] == 2 * 15360
    same = json.loads(card_cli("--callable", "my_nets:build", "--image-size", 16,
                               "--format", "json").stdout)
    assert same["flops_per_sample"] == card["flops_per_sample"] and same["image_size"] == 16


@pytest.mark.parametrize("args, message", [
    (["--callable", "my_nets:broken", "--image-size", "32"],
     "my_nets:broken failed: RuntimeError: no such layer"),
    (["--callable", "my_nets:not_a_module", "--image-size", "32"], "not a torch.nn.Module"),
    (["--callable", "my_nets:missing", "--image-size", "32"], "has no function missing"),
    (["--callable", "no_such_pkg.nets:build", "--image-size", "32"], "cannot import"),
    (["--callable", "my_nets", "--image-size", "32"], "pkg.module:function"),
    (["--callable", "my_nets:build"], "say what my_nets:build takes"),
    (["resnet50", "--callable", "my_nets:build"], "one of them"),
])
def test_callables_that_fail_are_one_line_errors(torch, nets, args, message):
    result = card_cli(*args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert result.output.strip().count("\n") == 0


RESNET50 = {"model_type": "resnet", "architectures": ["ResNetForImageClassification"],
            "layer_type": "bottleneck", "depths": [3, 4, 6, 3],
            "hidden_sizes": [256, 512, 1024, 2048], "num_labels": 1000}


def test_a_config_card_of_a_zoo_shape_equals_the_zoo_card(tmp_path, torch):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(RESNET50))
    assert "give --image-size" in card_cli("--config", path).output
    result = card_cli("--config", path, "--image-size", 224, "--format", "json")
    mine, zoo = json.loads(result.stdout), load_cards()["resnet50"]
    for column in ("params", "tensors", "gradient_bytes", "forward_flops_per_sample",
                   "flops_per_sample", "activation_bytes_per_sample", "image_size"):
        assert mine[column] == zoo[column], column
