"""WaveGlow (Prenger, Valle & Catanzaro, "WaveGlow: A Flow-based Generative Network for Speech
Synthesis", ICASSP 2019) as NVIDIA's DeepLearningExamples train it on LJSpeech
(PyTorch/SpeechSynthesis/Tacotron2: waveglow/model.py@6a160116, waveglow/arg_parser.py
@b1ce24a5, waveglow/data_function.py@48dc9ada, train.py@010cb41e, and README.md@696cedf9, the
v1.10 README whose training throughput tables hold the published figures).

The network with DLE's defaults (`--flows 12 --groups 8 --early-every 4 --early-size 2
--wn-layers 8 --wn-channels 512 --wn-kernel-size 3 --n-mel-channels 80`): an 8,000-sample
audio segment is folded into 8 channels of 1,000 steps (groups of 8 samples); its 32 mel
frames (80 bins) are upsampled by a transposed convolution (kernel 1,024, stride 256: the
STFT's window and hop) to 8,960 steps, cut to 8,000 and folded likewise into 640 channels.
Twelve flows each apply an invertible 1x1 convolution and an affine coupling: WN, run on half
the channels and the mel channels, gives a log-scale and a shift for the other half. WN is a
1x1 start convolution to 512 channels, 8 layers of a 3-wide convolution dilated 1 to 128 to
1,024 channels plus a 1x1 convolution of the 640 mel channels, a tanh x sigmoid gate and a
1x1 residual/skip convolution (512 + 512 channels; the last layer's 512 are all skip, where
the paper has 256 skip channels), and a 1x1 end convolution initialised to zero. After flows
4 and 8, 2 channels leave for the loss, so the flows run on 8, 6 and 4 channels. Every WN
convolution but the end one is weight-normalised: a magnitude per output channel besides the
direction, both parameters. 268,294,760 parameters.

The loss is DLE's WaveGlowLoss (waveglow/loss_function.py, as NVIDIA/waveglow's glow.py has
it; sigma 1, `--sigma`): the negative log-likelihood sum(z^2) / (2 sigma^2), less the sum of
every coupling's log-scales and of every 1x1 convolution's log-determinant (batch x 1,000
groups x log det W), divided by batch x 8 x 1,000, the audio samples in the batch.

The recipe. LJSpeech 1.1 has 13,100 clips (22,050 Hz, about 24 hours); DLE trains on
filelists/ljs_audio_text_train_filelist.txt, 12,500 of them (NVIDIA/tacotron2's split: 100
more validate, 500 are a test set; README "Dataset guidelines"), and each epoch takes one
random 8,000-sample segment of every clip, zero-padding a shorter one (MelAudioLoader). 1,001
epochs (the README's `--epochs`, its DGX-1 and DGX A100 platform scripts and its times to
train; scripts/train_waveglow.sh@2de29455 alone says 1,501); batch 10 a GPU in mixed precision
and 4 in FP32 or TF32 (the README's `--batch-size`, the platform scripts); Adam, learning rate
1e-4. arg_parser's `--segment-length` default is 4,000, but the README and every training
script pass 8,000. (The paper trained on 16,000-sample clips, 24 a step on 8 GPUs, for 580,000
steps.)

Throughput. DLE's train.py counts a batch's items as the sum of its segments' lengths, summed
over the GPUs: the README's WaveGlow "samples/sec" are audio samples a second. A card sample
is one segment, so seq_len is 8,000 and a published figure divides by it. The README's times
to train agree: 1,001 epochs x 12,500 x 8,000 samples at its 383,043 a second on 8 A100s in
TF32 is 72.6 hours, against its 75 (validation after each epoch runs besides).

The segment length is fixed (FIXED_INPUT_SIZE): an epoch is one segment a clip whatever its
length, so the zoo's rule for another sequence length (as many tokens an epoch, in fewer and
longer sequences) would be wrong here, and every published figure is at 8,000.

Simplifications:
- the mel spectrograms are inputs: DLE computes each segment's in its DataLoader worker on
  the CPU, outside the GPU step a card traces;
- DLE's `fused_add_tanh_sigmoid_multiply` is TorchScript, whose fuser may join its add, tanh,
  sigmoid and product in one kernel on the GPU; here they run as four eager operators, so the
  card's element-wise traffic is an upper bound;
- weight norm is `torch.nn.utils.parametrizations.weight_norm`, not the deprecated
  `torch.nn.utils.weight_norm`: the same parameters, the weight recomputed at every forward;
- the 1x1 convolutions' log-determinants use `torch.logdet`, as DLE's do (it runs on the
  meta device, backward included); their random rotations are made of determinant +1 by
  a product with the determinant's sign, where DLE branches on it (no tensor values on meta).

Built from torch.nn (transformers has no WaveGlow).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

# LJSpeech as DLE trains on it (see the module docstring).
LJSPEECH_TRAIN_CLIPS = 12_500  # filelists/ljs_audio_text_train_filelist.txt
EPOCHS = 1001  # README `--epochs` (WaveGlow: 1001), platform/DGX*_waveglow_*_train.sh
BATCH_PER_GPU = 10  # mixed precision (`--amp -bs 10`); FP32 and TF32 run at 4
SEGMENT_LENGTH = 8000  # audio samples a training segment (`--segment-length 8000`)
# Mel spectrograms: 80 bins, hop 256 samples, window and filter 1,024 (train.py's audio
# defaults); model.py's upsampling convolution is hard-wired to the same 1,024 and 256.
N_MEL_CHANNELS = 80
HOP_LENGTH = 256
UPSAMPLE_KERNEL = 1024
# arg_parser.py's glow and WN defaults.
N_FLOWS = 12
N_GROUP = 8  # audio samples folded into channels
N_EARLY_EVERY = 4  # flows between early outputs
N_EARLY_SIZE = 2  # channels each early output takes out
WN_LAYERS = 8
WN_CHANNELS = 512
WN_KERNEL_SIZE = 3
SIGMA = 1.0  # the standard deviation of the latent Gaussian in the loss (`--sigma`)


def mel_frames(segment_length: int, hop_length: int = HOP_LENGTH) -> int:
    """Frames of a segment's mel spectrogram: DLE's STFT pads half a window each side."""
    return 1 + segment_length // hop_length


class Invertible1x1Conv(nn.Module):
    """A 1x1 convolution mixing the flow's channels, with its log-determinant."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 1, bias=False)
        rotation = torch.linalg.qr(torch.randn(channels, channels))[0]
        # an orthonormal start of determinant +1 (DLE flips the first column if it is -1)
        rotation[:, 0] *= torch.linalg.det(rotation).sign()
        with torch.no_grad():
            self.conv.weight.copy_(rotation[:, :, None])

    def forward(self, z: torch.Tensor):
        batch, _, groups = z.shape
        log_det = batch * groups * torch.logdet(self.conv.weight.squeeze(2).float())
        return self.conv(z), log_det


class WN(nn.Module):
    """The coupling's network: WaveNet-like, non-causal, dilation doubling every layer."""

    def __init__(self, in_channels: int, cond_channels: int, n_layers: int, n_channels: int,
                 kernel_size: int):
        super().__init__()
        self.n_channels = n_channels
        self.start = weight_norm(nn.Conv1d(in_channels, n_channels, 1))
        self.in_layers = nn.ModuleList(
            weight_norm(nn.Conv1d(n_channels, 2 * n_channels, kernel_size, dilation=2 ** i,
                                  padding=2 ** i * (kernel_size - 1) // 2))
            for i in range(n_layers))
        self.cond_layers = nn.ModuleList(
            weight_norm(nn.Conv1d(cond_channels, 2 * n_channels, 1)) for _ in range(n_layers))
        # the last layer has no residual to pass on: all its channels are skip
        self.res_skip_layers = nn.ModuleList(
            weight_norm(nn.Conv1d(n_channels, (2 if i < n_layers - 1 else 1) * n_channels, 1))
            for i in range(n_layers))
        # zero: each coupling starts as the identity, which keeps early training stable
        self.end = nn.Conv1d(n_channels, 2 * in_channels, 1)
        nn.init.zeros_(self.end.weight)
        nn.init.zeros_(self.end.bias)

    def forward(self, audio: torch.Tensor, spect: torch.Tensor) -> torch.Tensor:
        audio = self.start(audio)
        last = len(self.in_layers) - 1
        output = None
        for i, (in_layer, cond_layer, res_skip_layer) in enumerate(
                zip(self.in_layers, self.cond_layers, self.res_skip_layers)):
            gates = in_layer(audio) + cond_layer(spect)
            acts = torch.tanh(gates[:, :self.n_channels]) \
                * torch.sigmoid(gates[:, self.n_channels:])
            res_skip = res_skip_layer(acts)
            skip = res_skip if i == last else res_skip[:, self.n_channels:]
            if i < last:
                audio = audio + res_skip[:, :self.n_channels]
            output = skip if output is None else output + skip
        return self.end(output)


class WaveGlow(nn.Module):
    """WaveGlow with DLE's defaults; `forward` returns `.loss` (DLE's WaveGlowLoss) and `.z`,
    the latent the audio maps to (batch x n_group x segment_length / n_group)."""

    FIXED_INPUT_SIZE = True  # see the module docstring: the zoo asks for no other segment

    def __init__(self, n_mel_channels: int = N_MEL_CHANNELS, n_flows: int = N_FLOWS,
                 n_group: int = N_GROUP, n_early_every: int = N_EARLY_EVERY,
                 n_early_size: int = N_EARLY_SIZE, wn_layers: int = WN_LAYERS,
                 wn_channels: int = WN_CHANNELS, wn_kernel_size: int = WN_KERNEL_SIZE,
                 segment_length: int = SEGMENT_LENGTH, hop_length: int = HOP_LENGTH,
                 sigma: float = SIGMA):
        super().__init__()
        if n_group % 2 or segment_length % n_group:
            raise ValueError(f"WaveGlow folds segments into an even number of channels: "
                             f"n_group {n_group} must be even and divide {segment_length}")
        self.n_flows, self.n_group = n_flows, n_group
        self.n_early_every, self.n_early_size = n_early_every, n_early_size
        self.segment_length, self.sigma = segment_length, sigma
        self.upsample = nn.ConvTranspose1d(n_mel_channels, n_mel_channels, UPSAMPLE_KERNEL,
                                           stride=hop_length)
        channels = [n_group - k // n_early_every * n_early_size for k in range(n_flows)]
        self.convinv = nn.ModuleList(Invertible1x1Conv(c) for c in channels)
        self.wn = nn.ModuleList(WN(c // 2, n_mel_channels * n_group, wn_layers, wn_channels,
                                   wn_kernel_size) for c in channels)

    def forward(self, mel_spectrogram: torch.Tensor, audio: torch.Tensor):
        """`mel_spectrogram` (batch, n_mel_channels, frames), `audio` (batch, segment_length)
        in [-1, 1]: a training segment and its mel spectrogram, as DLE's loader gives them."""
        batch, length = audio.shape
        if length != self.segment_length:
            raise ValueError(f"WaveGlow trains on segments of {self.segment_length} samples, "
                             f"got {length}")
        g = self.n_group
        spect = self.upsample(mel_spectrogram)[:, :, :length]  # the frames overhang the end
        spect = spect.unfold(2, g, g).permute(0, 2, 1, 3).reshape(batch, length // g, -1)
        spect = spect.permute(0, 2, 1)  # batch x (mel channels x n_group) x groups
        audio = audio.unfold(1, g, g).permute(0, 2, 1)  # batch x n_group x groups
        early, log_s_total, log_det_total = [], 0, 0
        for k, (convinv, wn) in enumerate(zip(self.convinv, self.wn)):
            if k and k % self.n_early_every == 0:
                early.append(audio[:, :self.n_early_size])
                audio = audio[:, self.n_early_size:]
            audio, log_det = convinv(audio)
            half = audio.shape[1] // 2
            output = wn(audio[:, :half], spect)
            log_s = output[:, half:]
            audio = torch.cat([audio[:, :half], torch.exp(log_s) * audio[:, half:]
                               + output[:, :half]], 1)
            log_s_total = log_s_total + log_s.sum()
            log_det_total = log_det_total + log_det
        z = torch.cat([*early, audio], 1)
        nll = (z * z).sum() / (2 * self.sigma ** 2) - log_s_total - log_det_total
        return SimpleNamespace(loss=nll / z.numel(), z=z)

    @staticmethod
    def synthetic_batch(batch: int, config: dict, size: int | None = None,
                        generator: torch.Generator | None = None) -> dict:
        """The zoo's protocol for torch-built models: random audio segments in [-1, 1] and
        random log-mel frames of DLE's training shapes (values do not change the work).
        `size` is unused: the segment length is fixed (the zoo refuses another first)."""
        length = config.get("segment_length", SEGMENT_LENGTH)
        frames = mel_frames(length, config.get("hop_length", HOP_LENGTH))
        mels = config.get("n_mel_channels", N_MEL_CHANNELS)
        return {"mel_spectrogram": torch.randn(batch, mels, frames, generator=generator),
                "audio": torch.rand(batch, length, generator=generator) * 2 - 1}

