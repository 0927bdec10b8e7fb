import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from profiler import zoo  # noqa: E402

# Parameter counts of the torchvision / Hugging Face reference implementations.
REFERENCE_PARAMS = {
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
    "vit_b16": 86_567_656,
    "vit_l16": 304_326_632,
    "convnext_tiny": 28_589_128,
    "mobilenet_v2": 3_504_872,
    "efficientnet_b0": 5_288_548,
    "efficientnet_b4": 19_341_616,  # the published EfficientNet-B4 (Tan & Le 2019: 19M)
    "densenet121": 7_978_856,
    "densenet161": 28_681_000,
    "densenet169": 14_149_480,
    "densenet201": 20_013_928,
    # kuangliu/pytorch-cifar's ResNet18 and ResNet50 (10 classes): torchvision's less the 7x7
    # stem's 7,680 extra weights and the 1000-way classifier's extra rows
    "resnet18_cifar": 11_173_962,
    "resnet50_cifar": 23_520_842,
    "bert_base": 109_514_298,  # bert-base-uncased with its tied MLM head
    "bart_large": 406_291_456,  # facebook/bart-large, its LM head tied to the embeddings
    "gpt2": 124_439_808,
    "gpt2_medium": 354_823_168,
    # meta-llama's model cards: Llama 3.2 1B, Llama 3.1 8B and 70B
    "llama_1b": 1_235_814_400,
    "llama_8b": 8_030_261_248,
    "llama_70b": 70_553_706_496,
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def count(model):
    return sum(p.numel() for p in model.parameters())


def test_zoo_has_the_promised_models():
    expected = set(REFERENCE_PARAMS) | {"bert_large"}
    assert expected <= set(zoo.names())


@pytest.mark.parametrize("name", sorted(REFERENCE_PARAMS))
def test_parameter_count_matches_reference_implementation(name):
    with torch.device("meta"):
        model = zoo.build_model(name)
    assert count(model) == REFERENCE_PARAMS[name]


def test_bart_traces_on_the_meta_device_through_the_gpu_s_attention_kernels():
    """On a GPU transformers reads the all-ones mask BART's decoder builds and picks the causal
    kernel; the meta device cannot read it, and the card's trace goes to that kernel directly:
    each layer's encoder and cross attention full, the decoder's own causal."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from profiler.cards import _gpu_kernels

    causal = []

    class Attention(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func._overloadpacket.__name__ == "_scaled_dot_product_efficient_attention":
                index = [a.name for a in func._schema.arguments].index("is_causal")
                causal.append(bool(kwargs.get("is_causal", args[index] if len(args) > index
                                              else False)))
            return func(*args, **kwargs)

    model, step = zoo.meta_step("bart_large")
    with _gpu_kernels(), Attention():
        step(1)
    layers = model.config.encoder_layers
    assert sorted(causal) == [False] * 2 * layers + [True] * layers


# ResNeXt-101 (32x4d): 44.2M parameters (Xie et al., CVPR 2017, "Aggregated Residual
# Transformations"); SE-ResNeXt-101 (32x4d): 49.0M (Hu et al., "Squeeze-and-Excitation
# Networks", TPAMI, Table 2), to their rounding.
PAPER_PARAMS = {"resnext101_32x4d": 44.2e6, "se_resnext101_32x4d": 49.0e6}


@pytest.mark.parametrize("name", sorted(PAPER_PARAMS))
def test_torch_built_convnets_have_their_papers_parameter_counts(name):
    with torch.device("meta"):
        model = zoo.build_model(name)
    assert count(model) == pytest.approx(PAPER_PARAMS[name], rel=0.002)


def test_a_torch_built_convnet_trains_and_traces_like_the_others():
    from profiler.operators import operator_split

    model = zoo.build_model("se_resnext101_32x4d")
    batch = zoo.synthetic_batch("se_resnext101_32x4d", 2, "cpu", image_size=32)
    loss = zoo.loss("se_resnext101_32x4d", model, batch)
    loss.backward()
    assert loss.ndim == 0 and model.classifier.weight.grad is not None
    split = operator_split("resnext101_32x4d")
    # every 3x3 convolution is grouped (32 groups of 4 to 32 channels): implicit GEMMs, not
    # depthwise ones, and not Winograd's (cuDNN's Winograd takes dense convolutions only)
    assert split["grouped_conv_flops_per_sample"] == 0 and split["winograd_flops_per_sample"] == 0
    assert split["conv_flops_per_sample"] > 0


@pytest.mark.parametrize("name", ["transformer_xl_base", "gnmt_v2", "ssd300", "alexnet",
                                  "vgg16", "inception_v3"])
def test_torch_built_models_build_batch_and_train_through_the_zoo(name):
    with torch.device("meta"):
        model = zoo.build_model(name)
    batch = zoo.synthetic_batch(name, 1, "meta")
    zoo.loss(name, model, batch).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name, sizes", [("ssd300", {"image_size": 512}),
                                         ("alexnet", {"image_size": 128}),
                                         ("gnmt_v2", {"seq_len": 64})])
def test_models_of_one_input_size_refuse_another_in_one_line(name, sizes):
    with pytest.raises(zoo.FixedInputError, match="takes only its own input size.*leave out"):
        zoo.build_model(name, **sizes)
    own = {"image_size": zoo.ZOO[name].image_size} if "image_size" in sizes else \
        {"seq_len": zoo.ZOO[name].seq_len}
    zoo.check_fixed_input(zoo.ZOO[name], **{"image_size": None, "seq_len": None, **own})


def test_widese_gates_are_a_quarter_of_each_block_s_expanded_width():
    """NVIDIA's EfficientNet-WideSE: the squeeze-and-excitation of a block that expands its
    input 6x is a quarter of the expanded width (1.5x the input), not a quarter of the input."""
    with torch.device("meta"):
        plain, wide = (zoo.build_model(n) for n in ("efficientnet_b0", "efficientnet_widese_b0"))
    for model, share in ((plain, 0.25 / 6), (wide, 0.25)):
        gates = [m for m in model.modules() if type(m).__name__.endswith("SqueezeExciteLayer")]
        first, expanded = gates[0], gates[1:]  # the first stage does not expand (ratio 1)
        assert first.dim == 32 and all(g.dim > 6 * 15 for g in expanded)
        assert all(g.dim_se == int(g.dim * share) for g in expanded), model


def test_entries_are_complete():
    for entry in zoo.ZOO.values():
        assert entry.task in ("image", "text", "recommendation")
        if entry.task == "recommendation":  # user-item pairs: no input size (NCF)
            assert entry.image_size is None and entry.seq_len is None
        else:
            assert (entry.image_size is None) != (entry.seq_len is None)
        assert entry.samples_per_epoch > 0 and entry.epochs > 0 and entry.batch_per_gpu > 0
    r50 = zoo.resolve("resnet50")
    assert (r50.dataset, r50.samples_per_epoch, r50.epochs, r50.image_size) == (
        "imagenet-1k", 1_281_167, 90, 224)


def test_resolve_is_tolerant_and_unknown_names_suggest_close_ones():
    assert zoo.resolve("ResNet-50").name == "resnet50"
    with pytest.raises(zoo.UnknownModelError) as info:
        zoo.resolve("resnet5")
    assert "resnet50" in str(info.value)
    assert "\n" not in str(info.value)


def test_small_image_model_trains_on_cpu():
    torch.manual_seed(0)
    model = zoo.build_model("mobilenet_v2", image_size=32)
    model.eval()  # fixed batch-norm statistics so the loss is comparable step to step
    batch = zoo.synthetic_batch("mobilenet_v2", 4, "cpu", image_size=32)
    assert batch["pixel_values"].shape == (4, 3, 32, 32)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        value = zoo.loss("mobilenet_v2", model, batch)
        value.backward()
        optimizer.step()
        losses.append(value.item())
    assert losses[0] == pytest.approx(6.9, abs=1.0)  # about ln(1000) at random init
    assert losses[-1] < losses[0]


def test_vit_builds_at_a_small_image_size():
    with torch.device("meta"):
        model = zoo.build_model("vit_b16", image_size=32)
    batch = zoo.synthetic_batch("vit_b16", 2, "meta", image_size=32)
    assert zoo.loss("vit_b16", model, batch).ndim == 0
    assert model.vit.embeddings.position_embeddings.shape == (1, 2 * 2 + 1, 768)


@pytest.mark.parametrize("name", ["bert_base", "gpt2"])
def test_text_models_take_token_ids_and_give_a_scalar_loss(name):
    with torch.device("meta"):
        model = zoo.build_model(name, seq_len=32)
    batch = zoo.synthetic_batch(name, 2, "meta", seq_len=32)
    assert batch["input_ids"].shape == (2, 32)
    value = zoo.loss(name, model, batch)
    assert value.shape == ()
    value.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_bert_labels_mask_most_positions():
    gen = torch.Generator().manual_seed(0)
    batch = zoo.synthetic_batch("bert_base", 8, "cpu", seq_len=128, generator=gen)
    predicted = (batch["labels"] != -100).float().mean().item()
    assert 0.10 < predicted < 0.20
    keep = batch["labels"] != -100
    assert torch.equal(batch["labels"][keep], batch["input_ids"][keep])
