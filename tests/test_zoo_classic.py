import pytest

torch = pytest.importorskip("torch")

from profiler.zoo_classic import (  # noqa: E402
    VGG16,
    AlexNet,
    InceptionV3,
    InceptionV4,
    ShiftBatchNorm2d,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# tf_cnn_benchmarks' classifiers are 1001 wide: one more output than torchvision's, 4,097
# parameters more after a 4,096-wide layer, 2,049 after InceptionV3's 2,048-wide pool.
# AlexNet: torchvision's 61,100,840, whose fourth convolution has 256 filters where
# tf_cnn_benchmarks' has 384: 128 more 384 x 3 x 3 filters with their biases, and 128 more
# input channels to each of the fifth's 256 3 x 3 filters.
ALEXNET_PARAMS = 61_100_840 + 128 * (384 * 9 + 1) + 128 * 256 * 9 + 4_097  # 61,842,345
# VGG16: torchvision's vgg16 (no batch norm), 138,357,544.
VGG16_PARAMS = 138_357_544 + 4_097  # 138,361,641
# InceptionV3: torchvision's inception_v3 without its auxiliary head, 23,834,568, less the
# 17,216 batch-norm scales tf.contrib's batch norm does not learn.
INCEPTION_V3_PARAMS = 23_834_568 - 17_216 + 2_049  # 23,819,401
# InceptionV4: timm's inception_v4 (the paper's network, 1,000 classes), 42,679,816, less its
# 31,584 batch-norm scales, and a 1001st output after the 1,536-wide pool.
INCEPTION_V4_PARAMS = 42_679_816 - 31_584 + 1_537  # 42,649,769

# Forward FLOPs of one image (a multiply-add is 2): VGG16 15.47 GMACs and InceptionV3 5.71,
# torchvision's figures (the 1001st class adds 4,096 and 2,048); AlexNet 0.84 GMACs,
# torchvision's 0.71 and 0.12 for the fourth convolution's 128 more filters and the fifth's
# 128 more input channels.
MODELS = {"alexnet": (AlexNet, 227, ALEXNET_PARAMS, 1.6776e9),
          "vgg16": (VGG16, 224, VGG16_PARAMS, 30.941e9),
          "inception_v3": (InceptionV3, 299, INCEPTION_V3_PARAMS, 11.426e9),
          # timm's 12.28 GMACs for inception_v4, to its rounding (hence 0.5%, not 0.1%)
          "inception_v4": (InceptionV4, 299, INCEPTION_V4_PARAMS, 24.56e9)}
FLOPS_TOLERANCE = {"inception_v4": 0.005}


def meta_batch(batch: int, size: int):
    return (torch.randn(batch, 3, size, size, device="meta"),
            torch.zeros(batch, dtype=torch.long, device="meta"))


@pytest.fixture(scope="module")
def meta_models():
    with torch.device("meta"):
        return {name: cls() for name, (cls, *_) in MODELS.items()}


def test_parameter_counts_are_torchvision_s_adjusted_to_tf_cnn_benchmarks(meta_models):
    for name, (_, _, params, _) in MODELS.items():
        assert sum(p.numel() for p in meta_models[name].parameters()) == params


def test_inception_v3_batch_norm_shifts_but_does_not_scale(meta_models):
    model = meta_models["inception_v3"]
    norms = [m for m in model.modules() if isinstance(m, ShiftBatchNorm2d)]
    assert len(norms) == 94
    for norm in norms:  # a constant scale (a buffer, as TF feeds 1s), a learnt shift
        assert [name for name, _ in norm.named_parameters()] == ["bias"]
        assert "weight" in dict(norm.named_buffers())
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 94 and all(c.bias is None for c in convs)


# Output shapes (less the batch) of named submodules at the models' image sizes.
SHAPES = {"alexnet": {"features": (256, 6, 6), "classifier": (1001,)},
          "vgg16": {"features": (512, 7, 7), "classifier": (1001,)},
          "inception_v3": {"stem": (192, 35, 35), "blocks.2": (288, 35, 35),
                           "blocks.3": (768, 17, 17), "blocks.7": (768, 17, 17),
                           "blocks.8": (1280, 8, 8), "blocks.10": (2048, 8, 8),
                           "classifier": (1001,)},
          # the paper's Figure 9: 384 channels at 35x35, 1,024 at 17x17, 1,536 at 8x8
          "inception_v4": {"stem": (64, 147, 147), "blocks.2": (384, 35, 35),
                           "blocks.6": (384, 35, 35), "blocks.7": (1024, 17, 17),
                           "blocks.14": (1024, 17, 17), "blocks.15": (1536, 8, 8),
                           "blocks.18": (1536, 8, 8), "classifier": (1001,)}}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_training_step_traces_on_meta_with_the_published_shapes(meta_models, name):
    from profiler.cards import measure_module

    _, size, params, forward = MODELS[name]
    model = meta_models[name]
    shapes = {}
    hooks = [model.get_submodule(path).register_forward_hook(
        lambda _module, _inputs, out, path=path: shapes.__setitem__(path, out.shape[1:]))
        for path in SHAPES[name]]
    pixels, labels = meta_batch(1, size)
    try:
        figures = measure_module(model, lambda: model(pixels, labels).loss)
    finally:
        for hook in hooks:
            hook.remove()
    assert shapes == SHAPES[name]
    assert figures["params"] == params
    assert figures["forward_flops_per_sample"] == pytest.approx(
        forward, rel=FLOPS_TOLERANCE.get(name, 0.001))
    # backward: twice the forward, less the first convolution's gradient of the pixels
    assert 1.9 * forward < figures["flops_per_sample"] - forward < 2 * forward


def test_flattening_classifiers_take_only_their_image_size(meta_models):
    with pytest.raises(ValueError, match="227x227"):
        meta_models["alexnet"](meta_batch(1, 224)[0])
    with pytest.raises(ValueError, match="224x224"):
        meta_models["vgg16"](meta_batch(1, 256)[0])


def test_inception_v3_trains_a_step_on_cpu_at_its_smallest_image_size():
    torch.manual_seed(0)
    model = InceptionV3()
    out = model(torch.randn(2, 3, 75, 75), torch.tensor([3, 999]))  # 75 px: a 1x1 last map
    out.loss.backward()
    assert out.logits.shape == (2, 1001) and torch.isfinite(out.loss)
    assert model.classifier.weight.grad is not None
    norm = model.stem[0][1]
    assert norm.bias.grad.abs().sum() > 0 and torch.equal(norm.weight, torch.ones(32))
