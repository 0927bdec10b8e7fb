import pytest

from profiler.operators import operator_class

torch = pytest.importorskip("torch")


def test_operator_classes_by_name_and_groups():
    assert operator_class("addmm", ()) == "matmul"
    conv = (None,) * 8
    assert operator_class("convolution", (*conv, 1)) == "conv"
    assert operator_class("convolution", (*conv, 32)) == "grouped_conv"
    assert operator_class("convolution_backward", (*conv, None, 32, None)) == "grouped_conv"
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
    assert totals["matmul"] == [2 * 3 * 10 * 20, 4 * (20 + 3 * 10 + 10 * 20 + 3 * 20)]
    # relu: one operation per element, reads and writes 3x20 (the weight's transpose is a view)
    assert totals["other"] == [3 * 20, 4 * 2 * 3 * 20]
