import pytest

torch = pytest.importorskip("torch")

from gpuadvisor.cards import CardError  # noqa: E402
from profiler import zoo  # noqa: E402
from profiler.zoo_recommendation import (  # noqa: E402
    FACTORS,
    ML20M_ITEMS,
    ML20M_TRAIN_POSITIVES,
    ML20M_USERS,
    MLP_LAYERS,
    NCF,
    NEGATIVE_SAMPLES,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = {"num_users": 7, "num_items": 5, "factors": 4, "mlp_layers": [8, 6, 4]}


def ncf_params(users=ML20M_USERS, items=ML20M_ITEMS, factors=FACTORS, layers=MLP_LAYERS):
    embeddings = (users + items) * (factors + layers[0] // 2)
    mlp = sum(a * b + b for a, b in zip(layers, layers[1:]))
    return embeddings + mlp + layers[-1] + factors + 1


def matmul_flops(factors=FACTORS, layers=MLP_LAYERS):
    """Forward FLOPs a sample of NeuMF's products (2 a multiply-add): the MLP, the logit."""
    return 2 * (sum(a * b for a, b in zip(layers, layers[1:])) + layers[-1] + factors)


def test_published_shape_has_dle_s_parameter_count():
    with torch.device("meta"):
        model = zoo.build_model("ncf")
    assert sum(p.numel() for p in model.parameters()) == ncf_params() == 31_832_577
    # dense embeddings (DLE's nn.Embedding without sparse): every row gets a gradient
    assert not any(m.sparse for m in model.modules() if isinstance(m, torch.nn.Embedding))


def test_the_zoo_entry_is_dle_s_recipe():
    entry = zoo.resolve("ncf")
    assert (entry.task, entry.image_size, entry.seq_len) == ("recommendation", None, None)
    assert entry.config["negative_samples"] == NEGATIVE_SAMPLES == zoo.NCF_NEGATIVE_SAMPLES
    assert zoo.ML20M_TRAIN_POSITIVES == ML20M_TRAIN_POSITIVES
    assert entry.samples_per_epoch == ML20M_TRAIN_POSITIVES * (1 + NEGATIVE_SAMPLES)
    assert entry.batch_per_gpu * 8 == 2**20 and entry.epochs == 30
    assert (entry.config["num_users"], entry.config["num_items"]) == (ML20M_USERS, ML20M_ITEMS)
    assert "ncf" in zoo.names()


def test_synthetic_batch_is_user_item_pairs_with_dle_s_share_of_positives():
    generator = torch.Generator().manual_seed(0)
    batch = zoo.synthetic_batch("ncf", 4000, "cpu", generator=generator)
    assert set(batch) == {"user_ids", "item_ids", "labels"}
    assert all(v.shape == (4000,) for v in batch.values())
    assert batch["user_ids"].dtype == batch["item_ids"].dtype == torch.long
    assert batch["labels"].dtype == torch.float32
    assert 0 <= batch["user_ids"].min() and batch["user_ids"].max() < ML20M_USERS
    assert 0 <= batch["item_ids"].min() and batch["item_ids"].max() < ML20M_ITEMS
    assert set(batch["labels"].unique().tolist()) == {0.0, 1.0}
    assert batch["labels"].mean().item() == pytest.approx(1 / (1 + NEGATIVE_SAMPLES), abs=0.03)


def test_a_small_ncf_trains_on_cpu():
    torch.manual_seed(0)
    model = NCF(**TINY)
    batch = NCF.synthetic_batch(16, TINY)
    out = model(**batch)
    out.loss.backward()
    assert out.loss.ndim == 0 and torch.isfinite(out.loss) and out.logits.shape == (16,)
    assert all(p.grad is not None for p in model.parameters())
    with torch.device("meta"):
        assert sum(p.numel() for p in NCF(**TINY).parameters()) == ncf_params(7, 5, 4, [8, 6, 4])


def test_the_card_counts_the_mlp_and_logit_products_three_times():
    from profiler.cards import compute_card

    card = compute_card("ncf")
    assert card["params"] == ncf_params() and card["gradient_bytes"] == 4 * ncf_params()
    assert card["forward_flops_per_sample"] == matmul_flops() == 213_248
    assert card["flops_per_sample"] == pytest.approx(3 * matmul_flops(), rel=0.02)
    assert card["matmul_flops_per_sample"] == card["flops_per_sample"]
    assert (card["task"], card["image_size"], card["seq_len"], card["model"]) == (
        "recommendation", None, None, "ncf")
    # a step writes the dense embeddings' whole gradients, whatever the batch
    assert card["step_bytes"] > 4 * (ML20M_USERS + ML20M_ITEMS) * (FACTORS + MLP_LAYERS[0] // 2)


@pytest.mark.parametrize("sizes", [{"image_size": 64}, {"seq_len": 32}])
def test_an_input_size_is_refused_in_one_line(sizes):
    from profiler.cards import compute_card

    with pytest.raises(zoo.FixedInputError, match="takes no input size: leave out --"):
        zoo.build_model("ncf", **sizes)
    with pytest.raises(CardError, match="takes no input size: leave out") as info:
        compute_card("ncf", **sizes)
    assert "\n" not in str(info.value)
    zoo.check_fixed_input(zoo.ZOO["ncf"], None, None)
