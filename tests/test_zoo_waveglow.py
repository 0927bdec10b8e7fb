import inspect
import math

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from profiler import zoo, zoo_waveglow  # noqa: E402
from profiler.zoo_waveglow import WaveGlow  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# The zoo entry (DLE's defaults, the segment its scripts pass).
ENTRY = zoo.ZOO["waveglow"]
ZOO_CONFIG = ENTRY.config
# A small WaveGlow of the same structure, to run with values on the CPU.
TINY = {**ZOO_CONFIG, "wn_layers": 2, "wn_channels": 16, "segment_length": 2048}

# DLE's waveglow/model.py, counted by hand. A weight-normalised convolution has its direction
# (the weight's shape) and a magnitude per output channel besides its bias.
UPSAMPLE = 80 * 80 * 1024 + 80  # ConvTranspose1d(80, 80, 1024)
# One WN at 512 channels, less its start and end (which depend on its input width h):
IN_LAYERS = 8 * (1024 * 512 * 3 + 1024 + 1024)  # 3-wide 512 -> 1024
COND_LAYERS = 8 * (1024 * 640 + 1024 + 1024)  # 1x1 from the 80 x 8 mel channels
RES_SKIP_LAYERS = 7 * (1024 * 512 + 1024 + 1024) + (512 * 512 + 512 + 512)
WN_BODY = IN_LAYERS + COND_LAYERS + RES_SKIP_LAYERS  # 21,806,080


def wn_ends(h: int, channels: int = 512) -> int:
    """The start (h -> channels, weight-normalised) and end (channels -> 2h) convolutions."""
    return (channels * h + 2 * channels) + (channels * 2 * h + 2 * h)


# The flows run on 8, 8, 8, 8, 6, ..., 4 channels; WN on half of them; 1x1 convs c x c.
FLOW_CHANNELS = [8] * 4 + [6] * 4 + [4] * 4
WAVEGLOW_PARAMS = (UPSAMPLE + sum(WN_BODY + wn_ends(c // 2) + c * c for c in FLOW_CHANNELS))
# 6,553,680 + 261,740,616 (12 WNs) + 464 (1x1 convolutions) = 268,294,760. No parameter
# count is published for it: WaveFlow (Ping et al., ICML 2020) puts its 5.91M parameters at
# "15x smaller than WaveGlow", about 88M, the WaveGlow of 256 WN channels (DLE's
# `--wn-channels 256`, the WN its 256-channel checkpoints use), which the same arithmetic puts
# at 87,879,272.
WAVEGLOW_256_PARAMS = 87_879_272

# Forward FLOPs of one 8,000-sample segment (a multiply-add is 2): 1,000 groups of 8 samples.
GROUPS, FRAMES = 1000, 32
UPSAMPLE_FLOPS = 2 * 80 * 80 * 1024 * FRAMES  # transposed: each input frame's full kernel
WN_BODY_FLOPS = 2 * GROUPS * (8 * (1024 * 512 * 3 + 1024 * 640) + 7 * 1024 * 512 + 512 * 512)


def flow_flops(c: int) -> int:
    """The 1x1 convolution, then WN's start, body and end on c / 2 channels."""
    h = c // 2
    return 2 * GROUPS * (c * c + 512 * h + 512 * 2 * h) + WN_BODY_FLOPS


FORWARD_FLOPS = UPSAMPLE_FLOPS + sum(flow_flops(c) for c in FLOW_CHANNELS)  # 522.72 GFLOPs
# Backward does each convolution twice over (input and weight gradients) but for two whose
# inputs, the data, need no gradient: the upsampling's and the first 1x1 convolution's.
STEP_FLOPS = 3 * FORWARD_FLOPS - UPSAMPLE_FLOPS - 2 * GROUPS * 8 * 8  # 1,567.75 GFLOPs

# DLE README.md@696cedf9 training throughput (audio samples a second, all GPUs) and times to
# train 1,001 epochs (hours): GPU, GPUs, precision, samples/s, hours.
README_ROWS = [
    ("A100", 1, "amp", 149_479, 188), ("A100", 4, "amp", 532_363, 54),
    ("A100", 8, "amp", 905_043, 33), ("A100", 1, "tf32", 67_581, 416),
    ("A100", 4, "tf32", 233_846, 122), ("A100", 8, "tf32", 383_043, 75),
    ("V100", 1, "amp", 105_873, 249), ("V100", 4, "amp", 364_471, 78),
    ("V100", 8, "amp", 690_909, 48), ("V100", 1, "fp32", 33_761, 793),
    ("V100", 4, "fp32", 118_254, 233), ("V100", 8, "fp32", 222_794, 127),
]


@pytest.fixture(scope="module")
def meta_model():
    with torch.device("meta"):
        return WaveGlow(**ZOO_CONFIG)


def meta_batch(batch: int, config: dict = ZOO_CONFIG) -> dict:
    return {key: value.to("meta") for key, value in
            WaveGlow.synthetic_batch(batch, config).items()}


def test_the_defaults_are_the_zoo_config_and_the_segment_is_fixed():
    assert WaveGlow.FIXED_INPUT_SIZE
    defaults = {name: parameter.default for name, parameter in
                inspect.signature(WaveGlow).parameters.items()}
    assert defaults == ZOO_CONFIG


def test_parameter_count_is_dle_s_model_py(meta_model):
    assert sum(p.numel() for p in meta_model.parameters()) == WAVEGLOW_PARAMS == 268_294_760
    assert [c.conv.weight.shape[0] for c in meta_model.convinv] == FLOW_CHANNELS
    with torch.device("meta"):
        narrow = WaveGlow(wn_channels=256)
    assert sum(p.numel() for p in narrow.parameters()) == WAVEGLOW_256_PARAMS
    assert WAVEGLOW_256_PARAMS / 5.91e6 == pytest.approx(15, rel=0.01)


def test_forward_flops_of_a_segment_match_the_hand_count(meta_model):
    with FlopCounterMode(display=False) as counter:
        out = meta_model(**meta_batch(1))
    assert counter.get_total_flops() == FORWARD_FLOPS == 522_721_798_400
    assert out.z.shape == (1, 8, GROUPS) and out.loss.shape == ()


def test_a_training_step_runs_and_traces_on_meta(meta_model):
    from profiler.cards import measure_module

    batch = meta_batch(1)
    figures = measure_module(meta_model, lambda: meta_model(**batch).loss)
    assert figures["params"] == WAVEGLOW_PARAMS
    assert figures["forward_flops_per_sample"] == FORWARD_FLOPS
    assert figures["flops_per_sample"] == STEP_FLOPS
    assert meta_model.convinv[0].conv.weight.grad is not None


def test_synthetic_batch_has_dle_s_training_shapes():
    generator = torch.Generator().manual_seed(0)
    batch = WaveGlow.synthetic_batch(3, ZOO_CONFIG, generator=generator)
    assert batch["mel_spectrogram"].shape == (3, 80, FRAMES)  # 1 + 8,000 // 256
    assert batch["audio"].shape == (3, 8000)
    assert batch["audio"].abs().max() <= 1
    again = WaveGlow.synthetic_batch(3, ZOO_CONFIG, generator=torch.Generator().manual_seed(0))
    assert torch.equal(batch["audio"], again["audio"])
    # the upsampled frames cover the segment: (32 - 1) x 256 + 1,024 = 8,960
    assert (zoo_waveglow.mel_frames(8000) - 1) * 256 + 1024 >= 8000


def test_the_operator_split_has_the_convolutions(meta_model):
    from profiler.operators import split_of

    split = split_of(meta_model, lambda batch: meta_model(**meta_batch(batch)).loss)
    assert split["conv_flops_per_sample"] == STEP_FLOPS
    assert split["matmul_flops_per_sample"] == 0
    assert split["winograd_flops_per_sample"] == 0  # 1-D and dilated: no Winograd
    assert split["other_bytes_per_sample"] > 0 and split["step_bytes"] > 0


def test_the_loss_at_initialisation_is_the_gaussian_term_alone():
    # rotations and identity couplings: z has the audio's energy, every log term is 0
    torch.manual_seed(0)
    model = WaveGlow(**TINY)
    batch = WaveGlow.synthetic_batch(2, TINY, generator=torch.Generator().manual_seed(1))
    out = model(**batch)
    expected = (batch["audio"] ** 2).sum() / 2 / batch["audio"].numel()
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    out.loss.backward()
    assert model.wn[0].end.weight.grad.abs().sum() > 0
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_the_log_determinants_count_once_a_group_and_the_loss_is_per_audio_sample():
    torch.manual_seed(0)
    model = WaveGlow(**TINY)
    with torch.no_grad():
        model.convinv[0].conv.weight.mul_(2)  # log det W = 8 log 2
    batch = WaveGlow.synthetic_batch(2, TINY, generator=torch.Generator().manual_seed(1))
    out = model(**batch)
    groups = TINY["segment_length"] // 8
    expected = ((out.z ** 2).sum() / 2 - 2 * groups * 8 * math.log(2)) / (2 * 8 * groups)
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_only_its_own_segment_length_is_taken():
    model = WaveGlow(**TINY)
    batch = WaveGlow.synthetic_batch(1, {**TINY, "segment_length": 4096})
    with pytest.raises(ValueError, match="segments of 2048"):
        model(**batch)


def test_the_readme_s_samples_are_audio_samples():
    """Its times to train 1,001 epochs of 12,500 segments of 8,000 samples follow from its
    throughputs read as audio samples a second (within 20%: validation runs besides, and
    the single-V100 times come in a few percent under)."""
    audio = zoo_waveglow.EPOCHS * zoo_waveglow.LJSPEECH_TRAIN_CLIPS * 8000
    for gpu, gpus, precision, throughput, hours in README_ROWS:
        assert audio / throughput / 3600 == pytest.approx(hours, rel=0.2), (gpu, gpus, precision)


def test_the_zoo_entry_makes_a_card():
    from profiler.cards import compute_card

    assert (ENTRY.samples_per_epoch, ENTRY.epochs, ENTRY.batch_per_gpu) == (
        zoo_waveglow.LJSPEECH_TRAIN_CLIPS, zoo_waveglow.EPOCHS, zoo_waveglow.BATCH_PER_GPU)
    with pytest.raises(zoo.FixedInputError, match="8000"):
        zoo.build_model("waveglow", seq_len=16000)
    card = compute_card("waveglow")
    assert (card["seq_len"], card["samples_per_epoch"]) == (8000, 12_500)
    assert card["params"] == WAVEGLOW_PARAMS
    assert card["forward_flops_per_sample"] == FORWARD_FLOPS
    assert card["conv_flops_per_sample"] == card["flops_per_sample"] == STEP_FLOPS
