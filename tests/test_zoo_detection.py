import pytest

torch = pytest.importorskip("torch")

from profiler import zoo_detection  # noqa: E402
from profiler.zoo_detection import SSD300  # noqa: E402

# torchvision's ResNet-50 (25,557,032) less layer4 (14,964,736) and fc (2,049,000): 8,543,296;
# DLE's five extra blocks: 3,773,696; its box and class heads (4/6/6/6/4/4 boxes a cell, 4
# offsets and 81 scores a box, 3x3 convolutions with bias): 10,577,910.
SSD300_PARAMS = 8_543_296 + 3_773_696 + 10_577_910  # 22,894,902


@pytest.fixture(scope="module")
def meta_model():
    with torch.device("meta"):
        return SSD300()


def meta_batch(batch: int):
    return (torch.randn(batch, 3, 300, 300, device="meta"),
            torch.zeros(batch, dtype=torch.long, device="meta"))


def test_parameter_count_is_resnet50_to_conv4_plus_dle_s_extras_and_heads(meta_model):
    assert sum(p.numel() for p in meta_model.parameters()) == SSD300_PARAMS


def test_a_300px_image_gives_a_38x38x1024_map_and_8732_default_boxes(meta_model):
    pixels, labels = meta_batch(1)
    maps = meta_model.features(pixels)
    assert maps[0].shape == (1, 1024, 38, 38)
    assert [m.shape[-1] for m in maps] == list(zoo_detection.FEATURE_SIZES)
    assert zoo_detection.default_boxes().shape == (4, 8732)
    out = meta_model(pixels, labels)
    assert out.logits.shape == (1, 81, 8732) and out.box_offsets.shape == (1, 4, 8732)


def test_synthetic_targets_have_a_fixed_number_of_positives_of_coco_classes():
    model = SSD300()
    positive, target, matched = model.synthetic_targets(torch.tensor([0, 79, 80, 999]))
    k = zoo_detection.POSITIVES_PER_IMAGE
    assert positive.sum(1).tolist() == [k] * 4
    assert target[positive].tolist() == [1] * k + [80] * k + [1] * k + [40] * k  # mod 80 + 1
    assert (target[~positive] == 0).all()
    assert torch.equal(matched[0], model.default_boxes)  # offsets 0 to regress


def test_one_training_step_runs_on_cpu_at_batch_2():
    torch.manual_seed(0)
    model = SSD300()
    loss = model(torch.randn(2, 3, 300, 300), torch.tensor([3, 977])).loss
    loss.backward()
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert model.backbone[0].weight.grad.abs().sum() > 0
    assert all(h.weight.grad is not None for h in model.class_heads)


def test_one_training_step_runs_and_traces_on_meta(meta_model):
    from profiler.cards import measure_module

    pixels, labels = meta_batch(1)
    figures = measure_module(meta_model, lambda: meta_model(pixels, labels).loss)
    assert figures["params"] == SSD300_PARAMS
    # 27.0 GFLOPs of backbone, 2.0 of extra blocks, 11.3 of heads; backward twice the forward
    assert figures["forward_flops_per_sample"] == pytest.approx(40.30e9, rel=0.005)
    assert figures["flops_per_sample"] == pytest.approx(3 * 40.30e9, rel=0.005)


def test_only_300px_images_fit_the_default_boxes(meta_model):
    with pytest.raises(ValueError, match="300x300"):
        meta_model(torch.randn(1, 3, 320, 320, device="meta"))
