"""`profiler card`'s table for people: folded rows where the file has many columns."""

from gpuadvisor.cards import AUTOCAST_BYTES_COLUMNS, INTENSITY_EDGES, profile_column
from profiler.cli.card import _table_rows


def test_autocast_traffic_and_the_intensity_profile_fold_into_one_row_each():
    card = {"model": "m", "matmul_flops_per_sample": 800, "matmul_bytes_per_sample": 100,
            "other_bytes_per_sample": 200, "norm_bytes_per_sample": 0,
            AUTOCAST_BYTES_COLUMNS["matmul"]: 50, AUTOCAST_BYTES_COLUMNS["other"]: 180,
            AUTOCAST_BYTES_COLUMNS["norm"]: 0}
    for edge in INTENSITY_EDGES:
        card[profile_column("matmul", edge, "flops")] = 400 if edge > 8 else 0
        card[profile_column("matmul", edge, "bytes")] = 50 if edge > 8 else 0
    rows = {row["field"]: row["value"] for row in _table_rows(card)}
    assert rows["autocast traffic / fp32 traffic"] == "matmul 0.50 other 0.90"
    assert rows["matmul flops under each edge"] == "0% 50% 50% 50% 50% 50% 50%"
    assert not set(AUTOCAST_BYTES_COLUMNS.values()) & set(rows)
    assert rows["other_bytes_per_sample"] == 200


def test_the_profile_shares_are_of_the_flops_the_tiles_execute():
    """A card's matmul profile holds the FLOPs its kernels execute (tiles rounded up), so its
    shares are of `matmul_tiled_flops_per_sample`, never above 100% of it."""
    card = {"model": "m", "matmul_flops_per_sample": 800, "matmul_tiled_flops_per_sample": 1000,
            "matmul_bytes_per_sample": 100}
    for edge in INTENSITY_EDGES:
        card[profile_column("matmul", edge, "flops")] = 1000 if edge > 256 else 500
        card[profile_column("matmul", edge, "bytes")] = 100
    rows = {row["field"]: row["value"] for row in _table_rows(card)}
    assert rows["matmul flops under each edge"] == "50% 50% 50% 50% 50% 50% 100%"
