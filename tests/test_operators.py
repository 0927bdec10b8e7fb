import pytest

from profiler.operators import operator_class

torch = pytest.importorskip("torch")


def test_operator_classes_by_name_and_groups():
    assert operator_class("addmm", ()) == "matmul"
    conv = (None,) * 8
    assert operator_class("convolution", (*conv, 1)) == "conv"
    assert operator_class("convolution", (*conv, 32)) == "grouped_conv"
    assert operator_class("convolution_backward", (*conv, None, 32, None)) == "grouped_conv"
    # a depthwise weight reads one channel a group; ResNeXt's groups read several: a GEMM each
    depthwise, cardinal = torch.empty(64, 1, 3, 3, device="meta"), torch.empty(64, 4, 3, 3,
                                                                                device="meta")
    assert operator_class("convolution", (None, depthwise, *conv[2:], 64)) == "grouped_conv"
    assert operator_class("convolution", (None, cardinal, *conv[2:], 16)) == "conv"
    assert operator_class("convolution_backward", (None, None, cardinal, *conv[3:], 16)) == "conv"
    assert operator_class("_scaled_dot_product_efficient_attention", ()) == "attention"
    assert operator_class("native_layer_norm_backward", ()) == "norm"
    assert operator_class("relu", ()) == "other"


def test_counts_a_linear_layer_and_a_relu_by_hand():
    from profiler.operators import operator_counter

    with torch.device("meta"):
        layer = torch.nn.Linear(10, 20)
        x = torch.empty(3, 10)
    counter = operator_counter()
    with counter:
        torch.relu(layer(x))
    totals = counter.totals
    # addmm: 3x10 @ 10x20, 2 FLOPs a multiply-add; reads bias, input and weight, writes 3x20
    assert totals["matmul"][:2] == [2 * 3 * 10 * 20, 4 * (20 + 3 * 10 + 10 * 20 + 3 * 20)]
    # relu: one operation per element, reads and writes 3x20 (the weight's transpose is a view)
    assert totals["other"][:2] == [3 * 20, 4 * 2 * 3 * 20]
    # two kernels: addmm and relu; the transpose is a view and launches none
    assert counter.kernels == 2


def test_a_card_counts_the_kernels_a_step_dispatches_whatever_its_batch():
    """`kernels_per_step`: what the host dispatches a step (forward and backward), the same at
    any batch, and a recurrent decoder's step by step; layers twice as deep dispatch twice as
    many kernels of their own."""
    from profiler.operators import split_of, trace

    def stack(depth):
        with torch.device("meta"):
            model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(8, 8),
                                                              torch.nn.ReLU())
                                          for _ in range(depth)])

        def step(batch):
            return model(torch.empty(batch, 8, device="meta")).sum()
        return model, step

    kernels = {depth: split_of(*stack(depth))["kernels_per_step"] for depth in (1, 2, 4)}
    assert kernels[4] - kernels[2] == 2 * (kernels[2] - kernels[1]) > 0
    model, step = stack(3)
    assert trace(model, step, 1).kernels == trace(model, step, 64).kernels


def test_counts_traffic_under_autocast_by_hand():
    """Under autocast a matrix product reads and writes 16 bits, after casting its fp32
    inputs (4 bytes read, 2 written, and the same again for the gradient's cast back where a
    gradient flows: the weight's and bias's, not the data's); the ReLU after it works in 16
    bits; layer norm, which autocast runs in fp32, reads an fp32 copy of the ReLU's output
    (cast up, and its gradient back) and writes fp32."""
    from profiler.operators import operator_counter

    with torch.device("meta"):
        layer, norm = torch.nn.Linear(10, 20), torch.nn.LayerNorm(20)
        x = torch.empty(3, 10)
    counter = operator_counter()
    with counter:
        norm(torch.relu(layer(x)))
    totals = counter.totals
    inputs = 20 + 3 * 10 + 10 * 20  # bias, input, weight: all fp32, all cast
    assert totals["matmul"][2] == 2 * (inputs + 3 * 20)
    casts = (2 * (20 + 10 * 20) + 3 * 10) * (4 + 2) + 2 * 3 * 20 * (2 + 4)
    assert totals["other"][2] == casts + 2 * (2 * 3 * 20)
    # reads the ReLU output's fp32 copy and its fp32 scale and shift; writes fp32 output,
    # mean, rstd
    assert totals["norm"][2] == 4 * 3 * 20 + 4 * 2 * 20 + 4 * (3 * 20 + 2 * 3)


def test_softmax_reads_16_bits_and_its_backward_writes_them_without_a_cast():
    """Autocast hands softmax the 16-bit scores themselves (it works in fp32 and writes
    fp32), and softmax's backward writes the gradient in the scores' 16 bits: no cast either
    way. A model's own `.float()` of 16-bit logits (transformers' causal-LM loss) is a cast,
    forward and back, and log-softmax then reads and returns fp32."""
    from profiler.operators import operator_counter

    def autocast_traffic(upcast: bool):
        with torch.device("meta"):
            layer = torch.nn.Linear(8, 16, bias=False)  # an LM head
            x = torch.empty(4, 8)
        counter = operator_counter()
        with counter:
            scores = layer(x)
            if upcast:
                scores = scores.float()
            loss = torch.log_softmax(scores, -1).sum()
            counter.backward = True  # as `trace` marks it
            loss.backward()
        return counter

    scores = 4 * 16
    plain, upcast = autocast_traffic(False), autocast_traffic(True)
    # the upcast: a cast each way (2 + 4 bytes an element), log-softmax reading 4 bytes where
    # it read 2, its backward writing 4 where it wrote 2
    assert upcast.totals["other"][2] - plain.totals["other"][2] == \
        scores * (2 * (2 + 4) + 2 + 2)
    assert upcast.autocast_kernels - plain.autocast_kernels == 2
    assert plain.kernels == upcast.kernels  # in fp32 `.float()` is no kernel


def test_autocast_casts_a_weight_once_a_step_and_an_activation_at_each_use():
    """`autocast_kernels_per_step`: the casts autocast runs in front of 16-bit operators. A
    layer applied three times (a recurrent cell) casts its weight and bias once (autocast caches
    a parameter's copy) and its fp32 input at each use; layer norm, which autocast runs in
    fp32, casts the cell's 16-bit output up at each use; each cast of a tensor that needs a
    gradient has a cast back in the backward pass; the data needs none."""
    from profiler.operators import split_of

    with torch.device("meta"):
        cell, norm = torch.nn.Linear(8, 8), torch.nn.LayerNorm(8)

    def step(batch):
        state = torch.empty(batch, 8, device="meta")  # the data: cast, no gradient
        for _ in range(3):  # layer norm writes fp32, so the cell's input is cast at each use
            state = norm(cell(state))
        return state.sum()

    card = split_of(torch.nn.ModuleList([cell, norm]), step)
    weights = 2 * 2  # weight and bias: a cast and a cast back, once
    activations = 1 + 2 * 2  # the data's cast; two normalised states, each cast and back
    widened = 3 * 2  # each cell output cast up for layer norm, and back
    assert card["autocast_kernels_per_step"] == weights + activations + widened


def test_fast_algorithms_count_only_3x3_and_5x5_stride_1_dense_convolutions():
    from profiler.operators import FAST_TALLIES, operator_counter

    with torch.device("meta"):
        x = torch.empty(2, 8, 16, 16)
        layers = {"3x3": torch.nn.Conv2d(8, 8, 3, padding=1),
                  "5x5": torch.nn.Conv2d(8, 8, 5, padding=2),
                  "3x3 stride 2": torch.nn.Conv2d(8, 8, 3, stride=2, padding=1),
                  "5x5 dilated": torch.nn.Conv2d(8, 8, 5, padding=4, dilation=2),
                  "7x7": torch.nn.Conv2d(8, 8, 7, padding=3),
                  "1x5": torch.nn.Conv2d(8, 8, (1, 5), padding=(0, 2)),
                  "1x1": torch.nn.Conv2d(8, 8, 1),
                  "depthwise 3x3": torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)}
    counted = {}
    for name, layer in layers.items():
        counter = operator_counter()
        with counter:
            layer(x).sum().backward()
        counted[name] = (counter.totals["conv"][0],
                         *(counter.totals[tally][0] for tally in FAST_TALLIES.values()))
    conv, three, five = counted["3x3"]
    assert conv > 0 and three == conv and five == 0  # forward and both backward convolutions
    conv, three, five = counted["5x5"]
    assert conv > 0 and five == conv and three == 0
    for other in ("3x3 stride 2", "5x5 dilated", "7x7", "1x5", "1x1"):
        assert counted[other][0] > 0 and counted[other][1:] == (0, 0), other
    assert counted["depthwise 3x3"] == (0, 0, 0)  # grouped: another class


@pytest.mark.parametrize("seq_len", [128, 256, 1000])
def test_a_causal_attention_kernel_executes_the_tiles_on_and_below_the_diagonal(seq_len):
    from profiler.cards import _gpu_kernels
    from profiler.operators import ATTENTION_TILE, operator_counter

    def attention_flops(causal: bool) -> float:
        with torch.device("meta"):
            q, k, v = (torch.empty(2, 4, seq_len, 64, requires_grad=True) for _ in range(3))
        counter = operator_counter()
        with _gpu_kernels(), counter:  # the kernels the card's trace runs (forward, backward)
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal) \
                .sum().backward()
        return counter.totals["attention"][0]

    tiles = -(-seq_len // ATTENTION_TILE)  # 1, 2 and 8 tiles of 128 query rows
    assert attention_flops(True) == pytest.approx(attention_flops(False) * (tiles + 1)
                                                  / (2 * tiles))
    assert attention_flops(False) > 0


def test_intensity_profile_puts_each_matrix_product_at_its_own_intensity():
    """A Linear(d, d) without bias does 2 d^2 FLOPs a sample in each of its three products
    (forward, input gradient, weight gradient) and moves 2 d fp32 values a sample: intensity
    d/4 FLOPs a byte, the weight's traffic being the same at any batch. The 512x512 layer
    (128) sits below the 256 and 512 edges only; the 64x512 ones (2 * 64 * 512 FLOPs over
    4 * (64 + 512) bytes: 28.4) below the edges from 32 up. Every dimension is a whole number
    of tiles, so the executed FLOPs are the counted ones."""
    from gpuadvisor.cards import INTENSITY_EDGES, profile_column
    from profiler.operators import split_of

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(64, 512, bias=False),
                                    torch.nn.Linear(512, 512, bias=False),
                                    torch.nn.Linear(512, 64, bias=False))

    def step(batch: int):
        return model(torch.empty(batch, 64, device="meta")).sum()

    columns = split_of(model, step)
    wide = 3 * 2 * 512 * 512  # the 512x512 layer's three products
    narrow = 5 * 2 * 64 * 512  # the first layer's input needs no gradient: two products
    assert columns["matmul_flops_per_sample"] == wide + narrow
    assert columns["matmul_tiled_flops_per_sample"] == wide + narrow
    for edge in INTENSITY_EDGES:
        expected = (wide if edge > 128 else 0) + (narrow if edge > 28 else 0)
        assert columns[profile_column("matmul", edge, "flops")] == expected, edge
    assert columns["matmul_under512_bytes_per_sample"] == columns["matmul_bytes_per_sample"]
    assert columns["conv_under512_flops_per_sample"] == 0


def test_tiles_round_up_the_dimensions_the_batch_does_not_set():
    """cuBLAS and cuDNN compute whole GEMM_TILE-wide tiles: a Linear(80, 48) executes its
    products as 128x64 ones (its tokens, set by the batch, are not rounded), a 3x3
    convolution from 16 to 80 channels as a GEMM of 128 output channels by 192 (16 x 9
    rounded up), whatever the batch; a grouped convolution's kernels tile several groups at
    once and are left as counted. The intensity profile holds the executed FLOPs."""
    from gpuadvisor.cards import profile_column
    from profiler.operators import GEMM_TILE, split_of, tile_factor

    assert GEMM_TILE == 64
    assert tile_factor((1, 80, 48), (2, 80, 48)) == 128 / 80 * 64 / 48
    assert tile_factor((1, 64, 128), (2, 64, 128)) == 1.0
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Conv2d(16, 80, 3, padding=1, bias=False),
                                    torch.nn.Conv2d(80, 80, 3, padding=1, groups=4,
                                                    bias=False),
                                    torch.nn.Flatten(), torch.nn.Linear(80 * 4 * 4, 48))

    def step(batch: int):
        return model(torch.empty(batch, 16, 4, 4, device="meta")).sum()

    columns = split_of(model, step)
    linear = 3 * 2 * 80 * 16 * 48  # forward, input and weight gradients
    dense = 2 * 2 * 80 * 16 * 9 * 16  # forward and weight gradient (the input needs none)
    grouped = 3 * 2 * 80 * 20 * 9 * 16  # four groups of 20 channels
    assert columns["matmul_flops_per_sample"] == linear
    assert columns["matmul_tiled_flops_per_sample"] == round(linear * 64 / 48)  # 1280 is 20 tiles
    assert columns["conv_flops_per_sample"] == dense + grouped
    assert columns["conv_tiled_flops_per_sample"] == round(dense * 128 / 80 * 192 / 144
                                                           + grouped)
    assert columns[profile_column("conv", 512, "flops")] \
        <= columns["conv_tiled_flops_per_sample"]


def test_the_card_traces_dropout_as_cuda_fuses_it():
    """CUDA's dropout is one kernel that saves a 1-byte mask; the meta device's path
    multiplies by a 4-byte float mask. The card counts what a GPU keeps: a Linear(64, 256)
    saves its 64-wide input, and the dropout after it 256 bytes of mask a sample."""
    from profiler.cards import measure_module

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Dropout(0.1))
        x = torch.empty(1, 64)
    figures = measure_module(model, lambda: model(x).sum())
    assert figures["activation_bytes_per_sample"] == 64 * 4 + 256 * 1
    with torch.device("meta"):
        plain = torch.nn.functional.dropout(torch.empty(8, requires_grad=True), 0.1)
    assert plain.grad_fn.name() == "MulBackward0"  # outside the card: the float mask


def test_a_card_keeps_what_a_step_saves_once_apart_from_what_each_sample_adds():
    """A weight-normalised Linear(64, 256) inside a network (its input needs a gradient)
    computes its weight from its parameters each step and saves it for backward whatever the
    batch: per sample the card counts the 64-wide input, and the 256 x 64 fp32 weight (at
    least) goes to the step's share."""
    from profiler.cards import figures

    with torch.device("meta"):
        model = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(64, 256))

    def loss_at(batch: int):
        return model(torch.empty(batch, 64, device="meta", requires_grad=True)).sum()

    card = figures(model, loss_at)
    assert card["activation_bytes_per_sample"] == 64 * 4
    assert card["step_activation_bytes"] >= 256 * 64 * 4
    assert card["autocast_step_activation_bytes"] >= 256 * 64 * 2


def test_an_attention_kernel_computes_whole_blocks_of_queries_and_keys():
    """Attention over 197 tokens (a ViT-B/16's) at head size 40 executes blocks of 64: 256
    queries by 256 keys at head size 64, whatever the batch and the heads."""
    from profiler.cards import _gpu_kernels
    from profiler.operators import split_of

    heads = 3

    def step(batch: int):
        with torch.device("meta"):
            q, k, v = (torch.empty(batch, heads, 197, 40, requires_grad=True) for _ in range(3))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v).sum()

    with _gpu_kernels():
        columns = split_of(torch.nn.Module(), step)
    assert columns["attention_flops_per_sample"] > 0
    assert columns["attention_tiled_flops_per_sample"] == pytest.approx(
        columns["attention_flops_per_sample"] * (256 / 197) ** 2 * 64 / 40, rel=1e-6)


def test_shipped_cards_execute_at_least_the_flops_they_count():
    """Every shipped card with the operator split carries its tiles' FLOPs, never fewer than it
    counts; InceptionV3's 48-, 80- and 96-channel convolutions execute over a tenth more,
    ResNet-50's (64-channel multiples) within 1% (datasets/README.md says so)."""
    from gpuadvisor.cards import TILED_CLASSES, load_cards, tiled_column

    cards = load_cards()
    for name, card in cards.items():
        for kind in TILED_CLASSES:
            counted = card.get(f"{kind}_flops_per_sample")
            if counted:
                assert card[tiled_column(kind)] >= counted, (name, kind)
    conv = {name: cards[name]["conv_tiled_flops_per_sample"] / cards[name]["conv_flops_per_sample"]
            for name in ("inception_v3", "resnet50")}
    assert conv["inception_v3"] > 1.1 and conv["resnet50"] < 1.01


def test_counts_the_casts_in_front_of_an_element_wise_16_bit_operator():
    """Autocast runs PReLU, an element-wise operator, in 16 bits: the casts of its fp32 input
    and weight are element-wise traffic beside its own 16-bit reads and writes. (The count
    once lost them: it added the operator's bytes to a total read before the casts were.)"""
    from profiler.operators import operator_counter

    with torch.device("meta"):
        prelu = torch.nn.PReLU(10)
        x = torch.empty(3, 10)
    counter = operator_counter()
    with counter:
        prelu(x)
    inputs = 3 * 10 + 10  # input and weight: fp32, cast (the weight's gradient back too)
    casts = (3 * 10 + 2 * 10) * (4 + 2)
    assert counter.totals["other"][2] == casts + 2 * (inputs + 3 * 10)


def _normalised_step(residual: bool):
    """A batch norm and a ReLU (with a residual add between them where `residual`) on a
    4-channel 8x8 map, and the step that trains them."""
    with torch.device("meta"):
        norm = torch.nn.BatchNorm2d(4)

    def step(batch):
        x = torch.empty(batch, 4, 8, 8, device="meta", requires_grad=True)
        y = norm(x)
        if residual:
            y = y + torch.empty(batch, 4, 8, 8, device="meta", requires_grad=True)
        return torch.relu(y).sum()
    return norm, step


@pytest.mark.parametrize("residual", [False, True])
def test_a_fused_normalisation_runs_its_relu_and_residual_add_in_its_kernel(residual):
    """`fuse_normalisation` (NVIDIA's MXNet ResNet-50): the ReLU after a batch norm, forward and
    backward, moves nothing and runs no kernel; a residual add between them reads its addend
    (one of its three passes), and the ReLU's backward writes the addend's gradient (one of
    three). The normalisation itself, and everything else, is counted as without fusion."""
    from profiler.operators import trace

    model, step = _normalised_step(residual)
    plain, fused = (trace(model, step, 2, fuse) for fuse in (False, True))
    tensor = 4 * 2 * 4 * 8 * 8  # bytes of one fp32 activation
    relu, relu_backward, add = 2 * tensor, 3 * tensor, 3 * tensor
    removed = relu + relu_backward + (add - add / 3 - relu_backward / 3 if residual else 0)
    assert plain.totals["other"][1] - fused.totals["other"][1] == pytest.approx(removed)
    assert fused.totals["norm"] == plain.totals["norm"]
    assert plain.kernels - fused.kernels == 2 + int(residual)


def test_fused_elementwise_reads_and_writes_a_run_of_element_wise_kernels_once():
    """XLA's fusion, by hand: relu then mul then add of a 3x20 fp32 tensor between two matrix
    products are one kernel that reads the first product's output and writes what the second
    reads; alone each reads and writes its own. Backward, what a kernel saves is read there,
    so it stays written."""
    from profiler.operators import fused_elementwise, operator_counter

    with torch.device("meta"):
        first, second = torch.nn.Linear(10, 20), torch.nn.Linear(20, 5)
        x = torch.empty(3, 10)
    counter = operator_counter()
    with counter:
        with torch.no_grad():
            hidden = first(x)
            second(torch.relu(hidden) * 2.0 + 1.0)
    tensor = 4 * 3 * 20
    assert counter.totals["other"][1] == 3 * 2 * tensor  # three kernels, each reads and writes
    fused_bytes, kernels = fused_elementwise(counter.kernel_log)
    assert fused_bytes == 2 * tensor  # one read of the product, one write for the next
    assert kernels == 3 == counter.kernels - 2  # addmm, the fused kernel, addmm

    log = [(True, ((1, 8),), ((2, 8),)), (True, ((2, 8),), ((3, 8),)),
           (False, ((3, 8),), ((4, 8),)), (False, ((2, 8),), ((5, 8),))]
    # the first kernel's output is read inside the run and again by the last (a saved tensor)
    assert fused_elementwise(log) == (8 + 8 + 8, 3)


def test_a_card_prices_attention_written_out_under_xla():
    """A card's XLA columns come from the step traced with attention written out (matrix
    products, scale, softmax and dropout, each a kernel) and its element-wise kernels fused:
    more bytes than the fused attention kernel's eager element-wise traffic at 512 tokens, the
    scores now read and written, and fewer kernels than run one by one."""
    from profiler.operators import split_of

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.project = torch.nn.Linear(64, 3 * 64)

        def forward(self, x):
            q, k, v = self.project(x).view(x.shape[0], x.shape[1], 3, 4, 16).unbind(2)
            out = torch.nn.functional.scaled_dot_product_attention(
                *(t.transpose(1, 2) for t in (q, k, v)), dropout_p=0.1)
            return torch.nn.functional.gelu(out).sum()

    with torch.device("meta"):
        model = Attention()
    columns = split_of(model, lambda batch: model(torch.empty(batch, 512, 64, device="meta")))
    eager = columns["other_bytes_per_sample"] + columns["norm_bytes_per_sample"]
    scores = 4 * 512 * 512  # heads x queries x keys, a sample
    assert columns["xla_elementwise_bytes_per_sample"] > eager + 4 * scores
    assert columns["xla_kernels_per_step"] < columns["kernels_per_step"] + 6
