"""The bytes a step saves under CUDA autocast, counted on the meta device by autocast's op
rules (profiler/autocast_memory.py), against hand counts."""

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from profiler.autocast_memory import autocast_saved_bytes, dtype_tracker  # noqa: E402
from profiler.cards import live_bytes, saved_tensor_bytes  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def saved_bytes(model, inputs):
    """(fp32 bytes saved, as the card's pack hook counts them; bytes under autocast)."""
    saved, widths = {}, dtype_tracker()
    with saved_tensor_bytes(model, saved), widths:
        loss = model(inputs).sum()
        return live_bytes(saved), autocast_saved_bytes(loss, widths, model.parameters())


def test_matmuls_save_16_bit_copies_and_normalisation_keeps_fp32():
    """A linear layer saves its input as autocast's 16-bit copy; ReLU saves its output, 16-bit
    as the linear layer gave it; layer norm runs in fp32 and saves an fp32 copy of its input
    with its fp32 mean and reciprocal deviation (one each per row)."""
    rows, width = 8, 16
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.LayerNorm(width))
        inputs = torch.ones(rows, width)
    fp32, autocast = saved_bytes(model, inputs)
    elements = rows * width
    assert autocast == 2 * elements + 2 * elements + 4 * elements + 2 * 4 * rows
    # in fp32 the ReLU's output and the layer norm's input are one tensor, saved once
    assert fp32 == 4 * elements + 4 * elements + 2 * 4 * rows


def test_batch_norm_keeps_its_inputs_16_bits_and_a_convnet_saves_half():
    with torch.device("meta"):
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        inputs = torch.ones(2, 3, 32, 32)
    fp32, autocast = saved_bytes(model, inputs)
    assert autocast == pytest.approx(fp32 / 2, rel=0.02)  # per-channel statistics aside


def test_a_residual_stream_from_fp32_embeddings_stays_fp32():
    """embedding (fp32 weights) + a linear layer's 16-bit output promotes to fp32: what a
    transformer's residual add saves downstream is fp32, not the halved figure."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.linear = nn.Embedding(10, 16), nn.Linear(16, 16)

        def forward(self, ids):
            x = self.embed(ids)
            x = x + self.linear(x)  # fp32 + 16-bit -> fp32
            return x * x  # saves both factors: the fp32 sum

    with torch.device("meta"):
        model, ids = Block(), torch.zeros(4, 8, dtype=torch.long)
    fp32, autocast = saved_bytes(model, ids)
    elements, indices = 4 * 8 * 16, 8 * 4 * 8  # the embedding saves its int64 ids
    # the linear layer's 16-bit input copy, and the fp32 sum that `x * x` saves
    assert autocast == 2 * elements + 4 * elements + indices
    assert fp32 == 4 * elements + 4 * elements + indices


@pytest.mark.parametrize("name", ["resnet18_cifar", "bert_base"])
def test_pricing_every_tensor_at_its_own_dtype_gives_the_cards_fp32_count(name, monkeypatch):
    """The graph walk finds exactly the storages the card's pack hook counts."""
    import profiler.autocast_memory as autocast_memory
    from profiler import zoo
    from profiler.cards import _gpu_kernels

    monkeypatch.setattr(autocast_memory, "LOWER_PRECISION_NODES", set())
    monkeypatch.setattr(autocast_memory, "FP32_NODES", set())

    class OwnDtype:
        def bytes_of(self, tensor):
            return tensor.element_size()

    with torch.device("meta"):
        model = zoo.build_model(name)
    batch = zoo.synthetic_batch(name, 1, "meta")
    saved = {}
    with _gpu_kernels(), saved_tensor_bytes(model, saved):
        loss = zoo.loss(name, model, batch)
        assert autocast_saved_bytes(loss, OwnDtype(), model.parameters()) == live_bytes(saved)
