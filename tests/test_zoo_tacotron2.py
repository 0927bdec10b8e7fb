import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from profiler import zoo  # noqa: E402
from profiler.operators import operator_counter, split_of  # noqa: E402
from profiler.zoo_tacotron2 import (  # noqa: E402
    LJSPEECH_TRAIN_CLIPS,
    MEAN_MEL_FRAMES,
    N_SYMBOLS,
    PADDED_MEL_FRAMES,
    PADDED_TEXT_LEN,
    LocationSensitiveAttention,
    LSTMCell,
    Tacotron2,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# A model small enough to train on the CPU in a moment.
TINY = {"n_symbols": 20, "symbols_embedding_dim": 8, "encoder_embedding_dim": 8,
        "attention_rnn_dim": 12, "attention_dim": 6, "attention_location_n_filters": 4,
        "attention_location_kernel_size": 3, "decoder_rnn_dim": 12, "prenet_dim": 6,
        "postnet_embedding_dim": 8, "n_mel_channels": 5}

# DLE's model.py at its defaults, module by module (weights and biases):
TACOTRON2_PARAMS_BY_MODULE = {
    "embedding": 148 * 512,  # 75,776
    "encoder convolutions": 3 * (512 * 512 * 5 + 512 + 2 * 512),  # and norms: 3,936,768
    "encoder BiLSTM": 2 * (4 * 256 * (512 + 256) + 2 * 4 * 256),  # 1,576,960
    "prenet": 80 * 256 + 256 * 256,  # 86,016
    "attention LSTMCell": 4 * 1024 * (256 + 512 + 1024) + 2 * 4 * 1024,  # 7,348,224
    # query, memory, v, location convolution, location dense: 202,816
    "attention": 1024 * 128 + 512 * 128 + 128 + 32 * 2 * 31 + 32 * 128,
    "decoder LSTMCell": 4 * 1024 * (1024 + 512 + 1024) + 2 * 4 * 1024,  # 10,493,952
    "projection and gate": 1536 * 80 + 80 + 1536 + 1,  # 124,497
    # 80 -> 512 -> 512 -> 512 -> 512 -> 80 channels, width 5, and norms: 4,348,144
    "postnet": (80 * 512 * 5 + 512) + 3 * (512 * 512 * 5 + 512) + (512 * 80 * 5 + 80)
               + 2 * (4 * 512 + 80),
}
# 28,193,153; DLE's README gives no parameter count to compare it with.
TACOTRON2_PARAMS = 28_193_153
TACOTRON2_TENSORS = 60  # parameter tensors; DLE's state_dict adds 8 batch norms' 3 statistics


def count(model):
    return sum(p.numel() for p in model.parameters())


def forward_flops(text, frames, batch=1):
    """Forward FLOPs (2 a multiply-add) of Tacotron 2 at DLE's defaults on `batch` utterances
    of `text` symbols and `frames` mel frames: the matrix products and convolutions, which are
    all the FLOP counter counts."""
    t, f = text, frames
    encoder = 3 * 2 * t * 512 * 512 * 5 + 2 * 2 * t * 4 * 256 * (512 + 256)  # convs, BiLSTM
    memory = 2 * t * 512 * 128  # the attention's projection of the encoder's outputs, once
    prenet = 2 * (f + 1) * (80 * 256 + 256 * 256)  # on the zero frame and every target frame
    step = (2 * 4 * 1024 * (256 + 512 + 1024)  # attention LSTMCell
            + 2 * 1024 * 128  # query
            + 2 * t * (2 * 31 * 32 + 32 * 128 + 128 + 512)  # location conv, dense, v, context
            + 2 * 4 * 1024 * (1024 + 512 + 1024)  # decoder LSTMCell
            + 2 * (1024 + 512) * (80 + 1))  # mel projection and gate
    postnet = 2 * f * 5 * (80 * 512 + 3 * 512 * 512 + 512 * 80)
    return batch * (encoder + memory + prenet + f * step + postnet)


def meta_batch(batch, text, frames):
    return {k: v.to("meta") for k, v in Tacotron2.utterances(batch, text, frames).items()}


@pytest.fixture(scope="module")
def meta_model():
    with torch.device("meta"):
        return Tacotron2()


def test_parameters_are_dle_s(meta_model):
    assert count(meta_model) == sum(TACOTRON2_PARAMS_BY_MODULE.values()) == TACOTRON2_PARAMS
    assert len(list(meta_model.parameters())) == TACOTRON2_TENSORS
    assert N_SYMBOLS == 1 + 1 + len("!'(),.:;? ") + 52 + 84  # text/symbols.py


def test_forward_flops_of_an_utterance_are_the_hand_count(meta_model):
    counter = operator_counter()
    with counter:  # the card's utterance: 860 decoder steps over 164 symbols
        meta_model(**meta_batch(1, PADDED_TEXT_LEN, PADDED_MEL_FRAMES))
    assert counter.formula_flops == forward_flops(PADDED_TEXT_LEN, PADDED_MEL_FRAMES)
    assert forward_flops(PADDED_TEXT_LEN, PADDED_MEL_FRAMES) == 42_438_469_632
    counter = operator_counter()
    with counter:
        meta_model(**meta_batch(2, 7, 9))
    assert counter.formula_flops == forward_flops(7, 9, batch=2)


def test_a_training_step_runs_on_the_meta_device(meta_model):
    meta_model.zero_grad(set_to_none=True)
    counter = operator_counter()
    with counter:
        loss = meta_model(**meta_batch(2, 6, 11)).loss
        forward = counter.formula_flops
        loss.backward()
    assert loss.shape == () and loss.device.type == "meta"
    assert all(p.grad is not None and p.grad.shape == p.shape for p in meta_model.parameters())
    # backward is two products a forward one, less the gradients nothing needs: of the target
    # spectrograms (the prenet's first layer) and of the zero initial states
    assert 2.9 * forward < counter.formula_flops < 3 * forward


class Operators(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_decoder_cells_run_on_meta_as_on_a_gpu():
    with torch.device("meta"):
        cell = LSTMCell(6, 4)
    x = torch.randn(3, 6, device="meta", requires_grad=True)
    state = (torch.zeros(3, 4, device="meta"),) * 2  # a first step's
    operators = Operators()
    with operators:
        hidden, memory = cell(x, state)
        (hidden.sum() + memory.sum()).backward()
    assert hidden.shape == memory.shape == (3, 4)
    # two GEMMs and the fused cell; backward, the fused cell's gradient, then the GEMMs of the
    # input's and the two weights' gradients (the zero state needs none); no element-wise
    # sigmoid, tanh or product of their own
    kernels = [n for n in operators.names if n in {"mm", "addmm", "mul", "sigmoid", "tanh",
                                                   "_thnn_fused_lstm_cell",
                                                   "_thnn_fused_lstm_cell_backward_impl"}]
    assert kernels == ["mm", "mm", "_thnn_fused_lstm_cell",
                       "_thnn_fused_lstm_cell_backward_impl", "mm", "mm", "mm"]
    torch.manual_seed(0)
    cpu, reference = LSTMCell(6, 4), nn.LSTMCell(6, 4)
    reference.load_state_dict(cpu.state_dict())
    x, state = torch.randn(3, 6), (torch.randn(3, 4), torch.randn(3, 4))
    assert all(torch.equal(a, b) for a, b in zip(cpu(x, state), reference(x, state)))


def test_attention_leaves_padded_symbols_out():
    torch.manual_seed(0)
    attention = LocationSensitiveAttention(12, 8, 6, 4, 3)
    memory = torch.randn(2, 5, 8)
    padding = torch.arange(5) >= torch.tensor([5, 3])[:, None]
    context, weights = attention(torch.randn(2, 12), memory, attention.memory_layer(memory),
                                 torch.rand(2, 2, 5), padding)
    assert torch.allclose(weights.sum(1), torch.ones(2))
    assert (weights[1, 3:] == 0).all() and (weights[0] > 0).all()
    assert torch.allclose(context, torch.einsum("bt,btd->bd", weights, memory))


def test_a_training_step_on_cpu_reaches_every_parameter_and_learns():
    torch.manual_seed(0)
    model = Tacotron2(**TINY)
    batch = Tacotron2.utterances(2, 7, 9, n_symbols=20, n_mel_channels=5,
                                 generator=torch.Generator().manual_seed(1))
    loss = model(**batch).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    # the same batch one Adam step later, every dropout off but the prenet's (DLE keeps it
    # on), whose masks the same seed draws again
    model.eval()
    model.zero_grad()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def seeded_loss():
        torch.manual_seed(2)
        return model(**batch).loss

    before = seeded_loss()
    before.backward()
    optimizer.step()
    assert seeded_loss().item() < before.item()


def test_synthetic_utterances_are_whole_and_padded_as_dle_pads_a_batch():
    batch = Tacotron2.synthetic_batch(3, {}, generator=torch.Generator().manual_seed(0))
    assert batch["input_ids"].shape == (3, PADDED_TEXT_LEN) == (3, 164)
    assert batch["input_ids"].dtype == torch.long and batch["input_ids"].device.type == "cpu"
    assert 0 < batch["input_ids"].min() and batch["input_ids"].max() < N_SYMBOLS
    assert batch["input_lengths"].tolist() == [PADDED_TEXT_LEN] * 3
    assert batch["mel_targets"].shape == (3, 80, PADDED_MEL_FRAMES) == (3, 80, 860)
    gates = batch["gate_targets"]
    assert gates.shape == (3, 860) and gates[:, -1].tolist() == [1] * 3 and gates.sum() == 3
    small = Tacotron2.synthetic_batch(1, {"text_len": 4, "mel_frames": 5}, size=567)
    assert small["input_ids"].shape == (1, 4) and small["mel_targets"].shape == (1, 80, 5)


def test_the_operator_split_has_matrix_products_and_convolutions():
    with torch.device("meta"):
        model = Tacotron2(text_len=6, mel_frames=4)

    def step(batch):
        return model(**meta_batch(batch, 6, 4)).loss

    split = split_of(model, step)
    assert split["matmul_flops_per_sample"] > 0 and split["conv_flops_per_sample"] > 0
    assert split["attention_flops_per_sample"] == 0  # no fused attention kernel
    assert split["step_bytes"] > 4 * TACOTRON2_PARAMS  # at least the weights, read once


# DLE's README@696cedf9 on 1 GPU: mel frames a second and hours to train 1501 epochs, batch
# per GPU (DGX A100: AMP, TF32; DGX-1 V100 16GB: AMP, FP32).
SINGLE_GPU_RUNS = [(26_484, 112, 128), (31_499, 94, 128), (15_891, 181, 104), (9_174, 333, 48)]


def test_dle_s_rate_counts_567_unpadded_frames_an_utterance():
    assert MEAN_MEL_FRAMES == 567  # 6.574 s of LJSpeech at 22,050 Hz, hop 256
    for rate, hours, batch in SINGLE_GPU_RUNS:
        utterances = 1501 * batch * (LJSPEECH_TRAIN_CLIPS // batch)  # drop_last=True
        frames = rate * hours * 3600 / utterances  # the hours, rounded, hold validation too
        assert 0.97 * MEAN_MEL_FRAMES < frames < 1.04 * MEAN_MEL_FRAMES  # 553 to 587
        assert frames < 0.7 * PADDED_MEL_FRAMES  # padded frames are not what it counts


def test_the_zoo_entry_holds_the_figures_this_module_derives():
    entry = zoo.ZOO["tacotron2"]
    assert entry.seq_len == MEAN_MEL_FRAMES and entry.samples_per_epoch == LJSPEECH_TRAIN_CLIPS
    assert (entry.config["text_len"], entry.config["mel_frames"]) == (PADDED_TEXT_LEN,
                                                                      PADDED_MEL_FRAMES)
