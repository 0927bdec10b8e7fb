import json
import subprocess
import sys
from pathlib import Path

import pytest
from script_modules import load_script

from gpuadvisor.cards import (
    MEASURED_COLUMNS,
    OPERATOR_CLASSES,
    OPERATOR_COLUMNS,
    WORKLOAD_COLUMNS,
    load_cards,
    write_cards,
)
from profiler import cards, zoo
from profiler.operators import operator_counter

ROOT = Path(__file__).resolve().parent.parent


def test_load_cards_reads_the_shipped_csv_without_torch():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
            "from gpuadvisor.cards import load_cards\n"
            "c = load_cards()['resnet50']\n"
            "print(c['params'], c['image_size'], c['seq_len'], c['dataset'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.split()
    assert out == ["25557032", "224", "None", "imagenet-1k"]


def test_load_cards_names_missing_columns(tmp_path):
    broken = tmp_path / "cards.csv"
    broken.write_text("model,params\nresnet50,1\n")
    with pytest.raises(ValueError, match="flops_per_sample"):
        load_cards(broken)


def test_own_cards_add_to_the_shipped_ones_and_replace_a_namesake(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUADVISOR_HOME", str(tmp_path))
    shipped = load_cards()
    mine = {**shipped["resnet50"], "model": "my_net", "params": 7}
    write_cards([mine, {**shipped["resnet18"], "params": 11}], tmp_path / "model_cards.csv")
    cards_now = load_cards()
    assert set(cards_now) == set(shipped) | {"my_net"}
    assert cards_now["my_net"]["params"] == 7 and cards_now["resnet18"]["params"] == 11
    assert cards_now["resnet50"] == shipped["resnet50"]


def test_every_zoo_model_has_a_card_and_sized_cards_are_of_zoo_models():
    from gpuadvisor.cards import base_model

    shipped = load_cards()
    assert set(zoo.names()) <= set(shipped)
    assert {base_model(name) for name in shipped} == set(zoo.names())


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def conv_flops(conv, x):
    counter = operator_counter()
    with counter:
        y = conv(x)
        forward = counter.formula_flops
        y.sum().backward()
    return forward, counter.formula_flops - forward


@pytest.mark.parametrize("groups", [1, 2, 8])
def test_convolution_backward_flops_divide_by_groups(groups):
    conv = torch.nn.Conv2d(8, 8, 3, padding=1, groups=groups, bias=False)
    x = torch.randn(1, 8, 16, 16, requires_grad=True)
    forward, backward = conv_flops(conv, x)
    # Hand count: each of the 16x16x8 outputs sums 3x3x(8/groups) products; 2 FLOPs each.
    hand = 16 * 16 * 8 * 3 * 3 * (8 // groups) * 2
    assert forward == hand
    assert backward == 2 * hand  # grad-input and grad-weight each redo the forward's work


def test_depthwise_convolution_is_corrected_against_torch_default():
    from torch.utils.flop_counter import FlopCounterMode

    conv = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
    x = torch.randn(1, 8, 16, 16, requires_grad=True)
    default = FlopCounterMode(display=False)
    with default:
        conv(x).sum().backward()
    _, backward = conv_flops(conv, x)
    assert default.get_total_flops() > 3 * backward  # torch counts grad-weight 8x over


def test_saved_activation_bytes_by_hand():
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 5))
    saved = {}
    with cards.saved_tensor_bytes(model, saved):
        loss = model(torch.randn(3, 10)).sum()
        live = cards.live_bytes(saved)
        loss.backward()
    # the input (3x10) for the first weight gradient, the ReLU output (3x20) kept once for
    # both ReLU's and the second Linear's backward; weights are not activations
    assert live == (3 * 10 + 3 * 20) * 4


def test_a_saved_tensor_freed_before_backward_is_no_activation():
    model = torch.nn.Linear(10, 20)
    saved = {}
    with cards.saved_tensor_bytes(model, saved):
        scores = model(torch.randn(3, 10))
        scores.sort(1)[1]  # the indices it saves die with the unused sorted values
        live = cards.live_bytes(saved)
    assert live == 3 * 10 * 4  # the input, for the weight gradient


# What the tests below read beside the sample.
READ_BY_TESTS = {"resnet50", "resnet18", "resnet18_cifar", "bert_large", "efficientnet_b0",
                 "mobilenet_v2", "densenet121", "densenet161", "densenet169", "densenet201",
                 "resnet50+fused_norm", "bert_base+head20"}


def traced_sample(shipped: dict) -> set[str]:
    """The shipped cards traced live: of each family the card of fewest kernels (a trace
    costs per operator) at its default input size and, where the family has cards at other
    sizes, at one of those, plus READ_BY_TESTS. All of them take minutes (Tacotron 2's 75,000
    kernels alone one and a half); every card's parameter count is checked against its
    builder apart."""
    from gpuadvisor.cards import SIZE_SEPARATOR

    fewest = {}
    for name, card in sorted(shipped.items(), key=lambda item: item[1]["kernels_per_step"]):
        fewest.setdefault((card["family"], SIZE_SEPARATOR in name), name)
    return set(fewest.values()) | READ_BY_TESTS


@pytest.fixture(scope="module")
def computed():
    """The sampled shipped cards computed live (seconds each on the meta device, so on every
    core): the zoo at its default sizes and at the published ones (model@size)."""
    import os

    from gpuadvisor.cards import base_model, fused_normalisation_card, head_positions_of

    shipped = load_cards()
    sample = [shipped[name] for name in sorted(traced_sample(shipped))]
    computed = cards.compute_cards([(base_model(card["model"]), card["image_size"],
                                     card["seq_len"], None,
                                     fused_normalisation_card(card["model"]),
                                     head_positions_of(card["model"]))
                                    for card in sample], jobs=min(4, os.cpu_count() or 1))
    return {card["model"]: card for card in computed}


def test_cards_computed_in_processes_are_the_cards_computed_here_in_order():
    names = []
    sizes = [("ncf", None, None), ("alexnet", None, None), ("mobilenet_v2_050", None, None)]
    pooled = cards.compute_cards(sizes, jobs=2, progress=names.append)
    assert pooled == [cards.compute_card(*size) for size in sizes]
    assert sorted(names) == ["alexnet", "mobilenet_v2_050", "ncf"]


def test_resnet50_card_matches_published_figures(computed):
    card = computed["resnet50"]
    assert card["params"] == 25_557_032
    assert card["gradient_bytes"] == 4 * 25_557_032
    assert card["forward_flops_per_sample"] == pytest.approx(2 * 4.09e9, rel=0.01)  # 4.09 GMACs
    assert card["flops_per_sample"] == pytest.approx(3 * card["forward_flops_per_sample"],
                                                     rel=0.02)


# Forward GMACs (multiply-adds) a sample: torchvision's model tables for the DenseNets,
# kuangliu/pytorch-cifar's ResNet18 on a 32-px image (0.56 G, He et al.'s blocks at 32x32).
FORWARD_GMACS = {"densenet121": 2.83, "densenet161": 7.73, "densenet169": 3.36,
                 "densenet201": 4.29, "resnet18_cifar": 0.56}


@pytest.mark.parametrize("name", sorted(FORWARD_GMACS))
def test_convnet_cards_match_published_multiply_adds(computed, name):
    assert computed[name]["forward_flops_per_sample"] == pytest.approx(
        2e9 * FORWARD_GMACS[name], rel=0.01)


def test_operator_split_adds_up_to_the_card_and_lands_where_it_belongs(computed):
    def split(name, what):
        return {k: computed[name][f"{k}_{what}_per_sample"] for k in OPERATOR_CLASSES}

    for name in ("resnet50", "bert_large", "efficientnet_b0"):
        flops = split(name, "flops")
        # the same FLOP formulas, plus about one operation per element-wise result
        assert sum(flops.values()) == pytest.approx(computed[name]["flops_per_sample"],
                                                    rel=0.03)
    assert split("resnet50", "flops")["conv"] > 0.99 * computed["resnet50"]["flops_per_sample"]
    assert split("resnet50", "flops")["grouped_conv"] == 0
    assert split("efficientnet_b0", "flops")["grouped_conv"] > 0  # depthwise blocks
    bert_flops = split("bert_large", "flops")
    assert bert_flops["matmul"] > 0.95 * sum(bert_flops.values())
    assert bert_flops["attention"] > 0 and bert_flops["conv"] == 0
    # normalisation and element-wise work move bytes, not FLOPs
    for name in ("resnet50", "bert_large"):
        bytes_, flops = split(name, "bytes"), split(name, "flops")
        assert bytes_["norm"] + bytes_["other"] > flops["norm"] + flops["other"]
    # BERT-Large reads 1.3 GB of fp32 weights at least twice a step, whatever the batch
    assert computed["bert_large"]["step_bytes"] > 2 * 4 * computed["bert_large"]["params"]


def test_card_follows_the_input_size(computed):
    large = cards.compute_card("resnet18", image_size=448)
    full = computed["resnet18"]
    assert large["image_size"] == 448 and large["model"] == "resnet18@448"
    assert large["flops_per_sample"] == pytest.approx(4 * full["flops_per_sample"], rel=0.01)


def test_shipped_csv_matches_what_the_code_computes(computed):
    shipped = load_cards()
    assert set(computed) == traced_sample(shipped)
    for name, card in computed.items():
        for column in WORKLOAD_COLUMNS + MEASURED_COLUMNS + OPERATOR_COLUMNS:
            assert shipped[name][column] == card[column], (
                f"{name}.{column}: shipped {shipped[name][column]}, computed {card[column]}; "
                "run scripts/build_cards.py")


def test_every_shipped_card_has_its_builders_parameters():
    from gpuadvisor.cards import base_model
    from profiler import zoo

    for name, card in load_cards().items():  # a card holds only its task's input size
        with torch.device("meta"):
            model = zoo.build_model(base_model(name), card["image_size"], card["seq_len"])
        assert sum(p.numel() for p in model.parameters()) == card["params"], (
            f"{name}: run scripts/build_cards.py")


@pytest.mark.parametrize("spelling, card", [
    ("ResNet-50", "resnet50"), ("ResNet-50 v1.5", "resnet50"), ("resnet50_V1.5", "resnet50"),
    ("SSD300 v1.1", "ssd300"), ("BERT Large", "bert_large"), ("ViT-B/16", "vit_b16"),
    ("Transformer-XL Base", "transformer_xl_base"), ("DenseNet-121", "densenet121"),
    ("Inception v3", "inception_v3"), ("GNMT v2", "gnmt_v2"), ("inception3", "inception_v3"),
    ("inception4", "inception_v4"), ("Inception-v4", "inception_v4"), ("vgg16", "vgg16"),
    ("bert-large-uncased", "bert_large"), ("bert-base-cased", "bert_base"),
    ("meta-llama/Meta-Llama-3.1-8B", "llama_8b"), ("Llama 3 70B", "llama_70b"),
    ("llama3.2-1b", "llama_1b"), ("Llama-3.3-70B", "llama_70b"), ("llama-2-7b", None),
    ("Llama 2 70B", None),
    # a whole version is another network: MobileNet (v1) is not MobileNetV2
    ("MobileNet", None), ("ResNet-50 v2", None)])
def test_matching_card_tolerates_a_sources_spelling(spelling, card):
    from gpuadvisor.cards import matching_card

    assert matching_card(load_cards(), spelling) == card


def test_similar_cards_suggest_what_an_unresolved_name_may_mean():
    from gpuadvisor.cards import similar_cards

    cards = load_cards()
    assert similar_cards(cards, "GNMT") == ["gnmt_v2"]
    assert similar_cards(cards, "SSD") == ["ssd300"]
    assert {"transformer_xl_base", "transformer_xl_large"} <= set(
        similar_cards(cards, "TransformerXL"))
    # a card at another input size is its model's, not a name of its own
    assert all("@" not in name for name in similar_cards(cards, "bert_large_squad"))
    assert similar_cards(cards, "Zzyzx") == []


def test_a_resnet_at_32_px_is_the_cifar_network():
    """CIFAR code replaces ImageNet's stem: a 32-px ResNet-18 is kuangliu's, 3x the FLOPs of
    the ImageNet card scaled to 32 px."""
    from advisor.importers.published import matched_card
    from gpuadvisor.cards import sized_card_names

    shipped = load_cards()
    assert sized_card_names("resnet18", 32) == ("resnet18@32", "resnet18_cifar")
    assert sized_card_names("resnet18", 64) == ("resnet18@64",)
    row = {"model": "ResNet-18", "image_size": "32", "seq_len": ""}
    assert matched_card(row, shipped) == "resnet18_cifar"
    assert matched_card({**row, "image_size": "64"}, shipped) is None  # scaled from 224 px
    assert matched_card({**row, "model": "vgg16"}, shipped) is None
    scaled = shipped["resnet18"]["flops_per_sample"] * (32 / 224) ** 2
    assert shipped["resnet18_cifar"]["flops_per_sample"] > 10 * scaled


def test_fusing_rows_in_16_bits_are_priced_with_normalisations_that_fuse_their_relu():
    """NVIDIA's MXNet ResNet-50 fuses each batch norm's ReLU and residual add into its kernel
    in 16 bits (DeepLearningExamples' runner with float16, and MLPerf's run script, which every
    MXNet submitter ran), and so does DeepLearningExamples' PaddlePaddle ResNet-50 under AMP:
    their rows get the card traced so, which does the same FLOPs and moves about 60% less
    element-wise traffic; their FP32 and TF32 rows, and other code, keep the plain card."""
    from advisor.importers.published import matched_card
    from gpuadvisor.cards import base_model, card_name

    shipped = load_cards()
    row = {"model": "ResNet-50 v1.5", "image_size": "224", "seq_len": "", "framework": "MXNet",
           "precision": "amp", "source": "published: mlcommons/training_results_v3.1 "
                                          "NVIDIA/results/eos_ngc23.09_mxnet/resnet/result_0.txt"}
    dle = "published: NVIDIA/DeepLearningExamples MxNet/Classification/RN50v1.5/README.md"
    assert matched_card(row, shipped) == "resnet50+fused_norm"
    assert matched_card({**row, "source": dle}, shipped) == "resnet50+fused_norm"
    assert matched_card({**row, "source": dle, "precision": "tf32"}, shipped) == "resnet50"
    paddle = "published: NVIDIA/DeepLearningExamples PaddlePaddle/Classification/RN50v1.5/README"
    assert matched_card({**row, "source": paddle, "framework": "PaddlePaddle"},
                        shipped) == "resnet50+fused_norm"
    assert matched_card({**row, "source": paddle}, shipped) == "resnet50"  # not MXNet code
    assert matched_card({**row, "framework": "PyTorch"}, shipped) == "resnet50"
    other = "published: NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/README.md"
    assert matched_card({**row, "framework": "PyTorch", "source": other}, shipped) == "resnet50"
    assert card_name("resnet50", None, True) == "resnet50+fused_norm"
    assert base_model("resnet50+fused_norm") == "resnet50"
    fused, plain = shipped["resnet50+fused_norm"], shipped["resnet50"]
    assert fused["flops_per_sample"] == plain["flops_per_sample"]
    assert fused["norm_bytes_per_sample"] == plain["norm_bytes_per_sample"]
    assert fused["other_bytes_per_sample"] < 0.5 * plain["other_bytes_per_sample"]
    assert fused["kernels_per_step"] < plain["kernels_per_step"]


def test_a_gathered_masked_lm_head_predicts_only_the_gathered_positions(computed):
    """Pre-training code that gathers the masked positions runs BERT's prediction head (its
    transform, h x h, and its vocabulary projection, h x V) on those alone: the card differs
    from the whole-head one by that head's forward and backward (6 FLOPs a weight) on the
    positions it skips, and by nothing else the encoder runs."""
    from gpuadvisor.cards import base_model, card_name, head_positions_of

    gathered, whole = computed["bert_base+head20"], computed["bert_base"]
    assert card_name("bert_base", None, False, 20) == "bert_base+head20"
    assert card_name("bert_large", 512, False, 80) == "bert_large@512+head80"
    assert base_model("bert_large@512+head80") == "bert_large"
    assert head_positions_of("bert_large@512+head80") == 80
    assert head_positions_of("bert_large@512") is None
    width, vocabulary, skipped = 768, 30522, whole["seq_len"] - 20
    head_flops = 6 * (width * width + width * vocabulary) * skipped
    assert whole["flops_per_sample"] - gathered["flops_per_sample"] == pytest.approx(
        head_flops, rel=1e-3)
    assert gathered["params"] == whole["params"] and gathered["seq_len"] == whole["seq_len"]
    assert gathered["logits_bytes_per_sample"] < 0.2 * whole["logits_bytes_per_sample"]


def test_only_a_bert_has_a_masked_lm_head_to_gather():
    with pytest.raises(zoo.FixedInputError, match="no masked-LM head"):
        cards.compute_card("resnet18", head_positions=20)


def card_cli(*args):
    from typer.testing import CliRunner

    from profiler.cli import COMMAND_MODULES, app

    for name in COMMAND_MODULES:
        __import__(f"profiler.cli.{name}")
    return CliRunner().invoke(app, ["card", *map(str, args)])


def test_card_cli_json_is_the_live_card(computed):
    result = card_cli("mobilenet_v2", "--format", "json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output[result.output.index("{"):])
    assert shown == {**computed["mobilenet_v2"], "as_of": shown["as_of"]}


def test_card_cli_takes_an_input_size():
    result = card_cli("gpt2", "--seq-len", "64", "--format", "json")
    shown = json.loads(result.output[result.output.index("{"):])
    assert shown["seq_len"] == 64 and shown["params"] == 124_439_808


def test_card_cli_lists_the_zoo():
    result = card_cli("--list", "--format", "csv")
    assert result.exit_code == 0
    assert {line.split(",")[0] for line in result.output.splitlines()[1:]} == set(
        load_cards())


@pytest.mark.parametrize("args, message", [
    (["resnet5"], "did you mean resnet50"),
    (["bert_base", "--image-size", "64"], "use --seq-len"),
    ([], "name a zoo model"),
])
def test_card_cli_errors_are_one_line(args, message):
    result = card_cli(*args)
    assert result.exit_code == 2
    assert message in result.output and result.output.strip().count("\n") == 0


def build_cards_script():
    """scripts/build_cards.py as a module."""
    return load_script("scripts/build_cards.py")


def published_rows(tmp_path, rows: list[dict]) -> Path:
    """`rows` written as a published-figures CSV of their columns; its path."""
    import csv

    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_build_cards_leaves_a_32_px_resnet_to_its_cifar_card(tmp_path):
    """A published ResNet-18 row at 32 px is priced with resnet18_cifar, so the card script
    must not also make an ImageNet resnet18@32 that would take precedence over it; and a
    model that takes only its own input size (GNMT: tokens a sentence pair, a rate) gets no
    card at another, which the zoo would refuse to build."""
    path = published_rows(tmp_path, [{"model": "resnet18", "image_size": "32", "seq_len": ""},
                                     {"model": "resnet18", "image_size": "448", "seq_len": ""},
                                     {"model": "gnmt_v2", "image_size": "", "seq_len": "48"}])
    assert build_cards_script().published_sizes(path) == {("resnet18", 448, None)}


def test_build_cards_traces_fused_normalisation_cards_for_the_rows_of_code_that_fuses(tmp_path):
    mlperf = "published: mlcommons/training_results_v1.0 NVIDIA/results/x/resnet/result_0.txt"
    mxnet = {"model": "resnet50", "seq_len": "", "framework": "MXNet", "precision": "amp",
             "source": mlperf}
    path = published_rows(tmp_path, [
        {**mxnet, "image_size": "224"}, {**mxnet, "image_size": "160"},
        {**mxnet, "image_size": "128", "precision": "fp32"},
        {**mxnet, "image_size": "192", "framework": "PyTorch",
         "source": "published: NVIDIA/DeepLearningExamples PyTorch/README.md"}])
    assert build_cards_script().fused_normalisation_sizes(path) == {
        ("resnet50", None, None, None, True), ("resnet50", 160, None, None, True)}


def test_build_cards_traces_gathered_head_cards_for_the_rows_whose_code_gathers(tmp_path):
    bert = {"model": "bert_large", "image_size": "", "framework": "TensorFlow",
            "precision": "amp", "source": "published: x"}
    path = published_rows(tmp_path, [
        {**bert, "seq_len": "128", "head_positions": "20"},
        {**bert, "seq_len": "512", "head_positions": "80"},
        {**bert, "seq_len": "384", "head_positions": ""}])
    assert build_cards_script().gathered_head_sizes(path) == {
        ("bert_large", None, None, None, False, 20), ("bert_large", None, 512, None, False, 80)}


def test_each_timm_row_names_a_card_of_timm_s_parameter_count():
    """timm's benchmark files give each model's parameter count (millions, two decimals, in
    the rows' notes): the zoo card a row is priced with must be that network (to 0.1%: the
    InceptionV4 card is tf_cnn_benchmarks', 42.65M to timm's 42.68M)."""
    import csv
    import re

    from gpuadvisor.cards import load_cards

    cards = load_cards(ROOT / "datasets" / "model_cards.csv")
    with open(ROOT / "datasets" / "published_throughput.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if "pytorch-image-models" in r["source"]]
    assert len(rows) == 129
    for row in rows:
        published = float(re.search(r"\(([\d.]+) M parameters as the file gives them\)",
                                    row["notes"])[1])
        assert round(int(cards[row["model"]]["params"]) / 1e6, 2) == pytest.approx(
            published, rel=1e-3, abs=0.011), row["model"]
