"""Tacotron 2 (Shen et al., ICASSP 2018, "Natural TTS Synthesis by Conditioning WaveNet on Mel
Spectrogram Predictions") as NVIDIA's DeepLearningExamples train it on LJSpeech
(PyTorch/SpeechSynthesis/Tacotron2: tacotron2/model.py@48dc9ada, tacotron2/arg_parser.py
@550123fb, tacotron2/loss_function.py@b1ae8dd4; README.md@696cedf9, the June 2020 README whose
training tables datasets/published_throughput.csv holds).

The network with DLE's defaults (arg_parser.py): 148 symbols (text/symbols.py@7a8544e0: padding,
'-', 10 punctuation marks, 52 letters, 84 ARPAbet phones) embedded in 512; an encoder of 3
convolutions (512 filters of width 5, batch norm, ReLU, dropout 0.5) and a bidirectional LSTM of
256 a direction; a decoder that reads the previous mel frame through a prenet (two 256-wide ReLU
layers whose dropout 0.5 stays on even in inference), feeds it with the last attention context
to a 1024-wide attention LSTMCell, attends over the encoder's outputs with location-sensitive
attention (128 wide; 32 location filters of width 31 over the previous and the cumulative
attention weights), feeds the attention cell's state and the new context to a 1024-wide decoder
LSTMCell (dropout 0.1 on both cells' outputs, DLE's stand-in for the paper's zoneout) and
projects the decoder cell's state and the context to an 80-bin mel frame and a stop-gate logit;
and a postnet of 5 convolutions of width 5 (80 -> 512 -> 512 -> 512 -> 512 -> 80 channels; batch
norm, tanh but after the last, dropout 0.5) whose output adds to the decoder's frames. One frame
a decoder step (DLE supports no other). 28,193,153 parameters. The loss is DLE's Tacotron2Loss:
the mean squared error of the frames before and after the postnet plus the gate's binary
cross-entropy with logits, each averaged over the padded batch (`--mask-padding` is off by
default).

The recipe (platform/DGXA100_tacotron2_{AMP,TF32}_8NGPU_train.sh@f0c8bc57 and the README):
LJSpeech 1.1's 12,500 training clips (filelists/ljs_mel_text_train_filelist.txt@4b9c90dd: the
13,100 clips less 100 for validation and 500 for test), 1501 epochs, batch 128 a GPU on 8 A100s
(DLE's V100 figures use 104 with AMP and 48 in FP32), teacher forcing: the decoder reads the
recorded frame before each one it predicts, a zero frame first.

A sample is one utterance. DLE's training throughput counts mel frames a second: each step adds
the unpadded mel lengths of its batch (tacotron2/data_function.py@d3813fde `batch_to_gpu`:
torch.sum(output_lengths)), summed over GPUs (train.py@5e3b487b: reduce_tensor(num_items, 1)),
so an utterance adds MEAN_MEL_FRAMES = 567 to it on average: the card's seq_len, a rate, not a
shape. The work is the padded batch's: DLE pads every text to its batch's longest and every
spectrogram to its batch's longest, and the decoder runs one step per frame of the longest for
the whole batch. So the model is traced at the lengths a batch of 128 LJSpeech clips is padded
to, PADDED_TEXT_LEN characters and PADDED_MEL_FRAMES frames, and takes no other size
(FIXED_INPUT_SIZE): frames as a shape would trace 567 decoder steps for an utterance where DLE
runs 860 for the same 567 counted frames.

Built from torch.nn (transformers has no Tacotron 2). On the meta device the decoder's
LSTMCells run CUDA's kernels (`LSTMCell`). Simplifications: every utterance of a synthetic batch
has its batch's full lengths, so the attention mask hides nothing (it is applied all the same);
DLE runs the encoder's LSTM on packed sequences (the real text lengths, about 100 characters)
where this one runs on the padded 164, 0.5% more of a step's FLOPs; that LSTM is written out as
cuDNN runs it (profiler/zoo_translation.py's LSTM, nn.LSTM on a GPU) so that the meta device
counts its input projection once; DLE's initialisation of batch-norm scales (uniform) and of
linear and convolution weights (Xavier) is left at torch's defaults, which changes no work.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

from profiler.zoo_translation import LSTM

N_SYMBOLS = 148  # text/symbols.py: padding + '-' + 10 punctuation + 52 letters + 84 phones
N_MEL = 80  # mel bins a frame (--n-mel-channels)
# LJSpeech 1.1: 13,100 clips, 23:55:17 of audio at 22,050 Hz. DLE's STFT (hop 256, centred
# frames) turns n samples into 1 + n // 256 frames: a mean clip, 6.574 s, is 567 frames.
LJSPEECH_CLIPS, LJSPEECH_SECONDS = 13_100, 23 * 3600 + 55 * 60 + 17
SAMPLING_RATE, HOP_LENGTH = 22_050, 256
MEAN_MEL_FRAMES = 1 + LJSPEECH_SECONDS * SAMPLING_RATE // LJSPEECH_CLIPS // HOP_LENGTH
LJSPEECH_TRAIN_CLIPS = 12_500  # lines of DLE's training filelist
# The lengths a batch of 128 clips is padded to, its longest. Frames, an estimate (LJSpeech
# publishes its mean, shortest and longest clip, not their spread): its clips were cut at
# silences to at most 10 s, the longest 10.10 s (870 frames), and the longest of 128 random
# ones falls within about 0.1 s of that: 860 frames (10.0 s), 1.52x the mean clip. Text: the
# filelist's lines average 99.9 characters of text ((1,661,632 characters - 12,500 x 33 of
# path and newline) / 12,500); its first and its last 120-odd lines, a batch's worth each, are
# longest at 162 and 165 characters.
PADDED_MEL_FRAMES = 860
PADDED_TEXT_LEN = 164
CONV_DROPOUT = PRENET_DROPOUT = 0.5  # model.py's fixed dropouts (encoder, postnet; prenet)


class LSTMCell(nn.LSTMCell):
    """nn.LSTMCell, which on the meta device runs as on a GPU: two GEMMs, then the fused
    element-wise cell kernel (aten::_thnn_fused_lstm_cell, what nn.LSTMCell calls on CUDA) and,
    backward, its fused gradient. Left to itself on the meta device nn.LSTMCell takes the CPU's
    path, a dozen element-wise operators a step and as many again for their gradients: neither
    DLE's kernels nor its memory traffic, and the slowest part of tracing 860 decoder steps."""

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        if not x.is_meta:
            return super().forward(x, state)
        hidden, cell = state
        hidden, cell, _ = torch.ops.aten._thnn_fused_lstm_cell(
            x @ self.weight_ih.t(), hidden @ self.weight_hh.t(), cell, self.bias_ih, self.bias_hh)
        return hidden, cell


class LocationSensitiveAttention(nn.Module):
    """DLE's Attention: energies v . tanh(W_q q + W_m m_j + W_l conv([w_prev; w_cum])_j), padded
    positions masked to -inf, softmax over the text; the context is the weights' average of the
    encoder's outputs."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int, filters: int,
                 kernel: int):
        super().__init__()
        self.query_layer = nn.Linear(query_dim, attention_dim, bias=False)
        self.memory_layer = nn.Linear(memory_dim, attention_dim, bias=False)
        self.v = nn.Linear(attention_dim, 1, bias=False)
        self.location_conv = nn.Conv1d(2, filters, kernel, padding=(kernel - 1) // 2,
                                       bias=False)
        self.location_dense = nn.Linear(filters, attention_dim, bias=False)

    def forward(self, query, memory, processed_memory, weights_cat, padding):
        location = self.location_dense(self.location_conv(weights_cat).transpose(1, 2))
        energies = self.v(torch.tanh(self.query_layer(query.unsqueeze(1)) + location +
                                     processed_memory)).squeeze(2)
        weights = F.softmax(energies.masked_fill(padding, -math.inf), dim=1)
        return torch.bmm(weights.unsqueeze(1), memory).squeeze(1), weights


def _conv_bn(inputs: int, outputs: int, kernel: int) -> nn.Sequential:
    """DLE's ConvNorm (a 1-d convolution, 'same' padding) and the batch norm after it."""
    return nn.Sequential(nn.Conv1d(inputs, outputs, kernel, padding=(kernel - 1) // 2),
                         nn.BatchNorm1d(outputs))


class Tacotron2(nn.Module):
    """Tacotron 2 with DLE's defaults (the keyword arguments are arg_parser.py's). `text_len`
    and `mel_frames`, the lengths a batch is padded to, are recorded for whoever makes the
    model's batches (`synthetic_batch`); the forward pass takes any lengths."""

    FIXED_INPUT_SIZE = True  # its seq_len is a rate: the frames an utterance adds to mels/s

    def __init__(self, n_symbols: int = N_SYMBOLS, symbols_embedding_dim: int = 512,
                 encoder_kernel_size: int = 5, encoder_n_convolutions: int = 3,
                 encoder_embedding_dim: int = 512, attention_rnn_dim: int = 1024,
                 attention_dim: int = 128, attention_location_n_filters: int = 32,
                 attention_location_kernel_size: int = 31, decoder_rnn_dim: int = 1024,
                 prenet_dim: int = 256, p_attention_dropout: float = 0.1,
                 p_decoder_dropout: float = 0.1, postnet_embedding_dim: int = 512,
                 postnet_kernel_size: int = 5, postnet_n_convolutions: int = 5,
                 n_mel_channels: int = N_MEL, text_len: int = PADDED_TEXT_LEN,
                 mel_frames: int = PADDED_MEL_FRAMES):
        super().__init__()
        self.text_len, self.mel_frames, self.n_mel_channels = text_len, mel_frames, n_mel_channels
        self.p_attention_dropout, self.p_decoder_dropout = p_attention_dropout, p_decoder_dropout
        # DLE's uniform init, handed in: nn.Embedding's own normal_ on the meta device first
        # imports torch's Python references (seconds)
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (n_symbols + symbols_embedding_dim))
        weight = nn.init.uniform_(torch.empty(n_symbols, symbols_embedding_dim), -bound, bound)
        self.embedding = nn.Embedding(n_symbols, symbols_embedding_dim, _weight=weight)
        widths = [symbols_embedding_dim] + [encoder_embedding_dim] * encoder_n_convolutions
        self.encoder_convolutions = nn.ModuleList(
            _conv_bn(a, b, encoder_kernel_size) for a, b in zip(widths, widths[1:]))
        self.encoder_lstm = LSTM(encoder_embedding_dim, encoder_embedding_dim // 2,
                                 bidirectional=True)
        self.encoder_lstm.reset_parameters()  # torch's default init, as DLE's nn.LSTM has
        self.prenet = nn.ModuleList([nn.Linear(n_mel_channels, prenet_dim, bias=False),
                                     nn.Linear(prenet_dim, prenet_dim, bias=False)])
        self.attention_rnn = LSTMCell(prenet_dim + encoder_embedding_dim, attention_rnn_dim)
        self.attention_layer = LocationSensitiveAttention(
            attention_rnn_dim, encoder_embedding_dim, attention_dim,
            attention_location_n_filters, attention_location_kernel_size)
        self.decoder_rnn = LSTMCell(attention_rnn_dim + encoder_embedding_dim, decoder_rnn_dim)
        self.linear_projection = nn.Linear(decoder_rnn_dim + encoder_embedding_dim,
                                           n_mel_channels)
        self.gate_layer = nn.Linear(decoder_rnn_dim + encoder_embedding_dim, 1)
        widths = ([n_mel_channels] + [postnet_embedding_dim] * (postnet_n_convolutions - 1) +
                  [n_mel_channels])
        self.postnet = nn.ModuleList(
            _conv_bn(a, b, postnet_kernel_size) for a, b in zip(widths, widths[1:]))

    def encode(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Symbol ids (batch, text) to the encoder's outputs (batch, text, width)."""
        x = self.embedding(input_ids).transpose(1, 2)
        for conv in self.encoder_convolutions:
            x = F.dropout(F.relu(conv(x)), CONV_DROPOUT, self.training)
        return self.encoder_lstm(x.permute(2, 0, 1)).transpose(0, 1)  # a time-major LSTM

    def decode(self, memory: torch.Tensor, padding: torch.Tensor, mel_targets: torch.Tensor):
        """Teacher-forced decoding (DLE's Decoder.forward): one step per target frame, each
        reading the frame before it (a zero frame first). Returns the frames (batch, mels,
        frames) and the gate logits (batch, frames)."""
        batch, _, frames = mel_targets.shape
        previous = torch.cat([mel_targets.new_zeros(1, batch, self.n_mel_channels),
                              mel_targets.permute(2, 0, 1)])
        for layer in self.prenet:  # on every frame at once, the last one too, as DLE does
            previous = F.dropout(F.relu(layer(previous)), PRENET_DROPOUT, training=True)
        processed_memory = self.attention_layer.memory_layer(memory)
        h_att = c_att = memory.new_zeros(batch, self.attention_rnn.hidden_size)
        h_dec = c_dec = memory.new_zeros(batch, self.decoder_rnn.hidden_size)
        weights = cumulative = memory.new_zeros(batch, memory.shape[1])
        context = memory.new_zeros(batch, memory.shape[2])
        mels, gates = [], []
        for step in range(frames):
            h_att, c_att = self.attention_rnn(torch.cat([previous[step], context], -1),
                                              (h_att, c_att))
            h_att = F.dropout(h_att, self.p_attention_dropout, self.training)
            context, weights = self.attention_layer(
                h_att, memory, processed_memory, torch.stack([weights, cumulative], 1), padding)
            cumulative = cumulative + weights
            h_dec, c_dec = self.decoder_rnn(torch.cat([h_att, context], -1), (h_dec, c_dec))
            h_dec = F.dropout(h_dec, self.p_decoder_dropout, self.training)
            state = torch.cat([h_dec, context], 1)
            mels.append(self.linear_projection(state))
            gates.append(self.gate_layer(state))
        return torch.stack(mels, 2), torch.cat(gates, 1)

    def refine(self, mels: torch.Tensor) -> torch.Tensor:
        """The decoder's frames plus the postnet's residual."""
        x = mels
        for index, conv in enumerate(self.postnet):
            x = conv(x) if index == len(self.postnet) - 1 else torch.tanh(conv(x))
            x = F.dropout(x, CONV_DROPOUT, self.training)
        return mels + x

    def forward(self, input_ids: torch.Tensor, input_lengths: torch.Tensor,
                mel_targets: torch.Tensor, gate_targets: torch.Tensor):
        """`input_ids` (batch, text): symbol ids, 0-padded; `input_lengths` (batch,): their
        lengths; `mel_targets` (batch, mels, frames) and `gate_targets` (batch, frames): the
        spectrograms and their stop targets (1 from an utterance's last frame on). Returns
        `.loss`, DLE's Tacotron2Loss."""
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        padding = positions >= input_lengths[:, None]  # DLE's ~get_mask_from_lengths
        mels, gate_logits = self.decode(self.encode(input_ids), padding, mel_targets)
        loss = (F.mse_loss(mels, mel_targets) + F.mse_loss(self.refine(mels), mel_targets) +
                F.binary_cross_entropy_with_logits(gate_logits, gate_targets))
        return SimpleNamespace(loss=loss, logits=None)

    @staticmethod
    def synthetic_batch(batch: int, config: dict, size: int | None = None,
                        generator: torch.Generator | None = None) -> dict:
        """The zoo's protocol for torch-built models: utterances at the config's padded
        lengths (`size`, the frames an utterance adds to mels/s, is a rate, not a shape)."""
        return Tacotron2.utterances(batch, config.get("text_len", PADDED_TEXT_LEN),
                                    config.get("mel_frames", PADDED_MEL_FRAMES),
                                    config.get("n_symbols", N_SYMBOLS),
                                    config.get("n_mel_channels", N_MEL), generator)

    @staticmethod
    def utterances(batch: int, text_len: int = PADDED_TEXT_LEN,
                   mel_frames: int = PADDED_MEL_FRAMES, n_symbols: int = N_SYMBOLS,
                   n_mel_channels: int = N_MEL,
                   generator: torch.Generator | None = None) -> dict:
        """Random utterances on the CPU, every one at the full lengths: symbols other than
        padding (0), standard-normal spectrograms, the stop target on the last frame."""
        gates = torch.zeros(batch, mel_frames)
        gates[:, -1] = 1
        return {"input_ids": torch.randint(1, n_symbols, (batch, text_len), generator=generator),
                "input_lengths": torch.full((batch,), text_len, dtype=torch.long),
                "mel_targets": torch.randn(batch, n_mel_channels, mel_frames,
                                           generator=generator),
                "gate_targets": gates}
