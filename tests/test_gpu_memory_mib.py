"""Usable GPU memory in MiB, as the clouds and the driver report it, carried into the catalog."""

from cloud.catalog import load_catalog
from cloud.gpus import GpuSpec, gpu_spec
from cloud.skypilot import usable_mib


def test_usable_memory_is_below_the_marketing_gigabytes():
    assert gpu_spec("L4").memory_mib == 22_888 < 24 * 1024
    assert gpu_spec("A10G").memory_mib == 22_888
    assert gpu_spec("A100-40GB").memory_mib == 40_960
    assert gpu_spec("A100-80GB").memory_mib == 81_920
    assert gpu_spec("H100").memory_mib == 81_559


def test_a_gpus_csv_without_the_column_reads_decimal_gigabytes():
    spec = GpuSpec("X", 24.0, 300.0, 30.0, None, "test")
    assert round(spec.memory_mib) == 22_888  # 24e9 bytes


def test_the_smaller_of_the_clouds_figure_and_the_usable_one():
    assert usable_mib("L4", 24_576) == 22_888  # GCP lists the nominal size
    assert usable_mib("L4", 11_444) == 11_444  # a fractional g6 slice
    assert usable_mib("H100-80GB", None) == 81_559


def test_every_shipped_offering_states_its_usable_memory():
    catalog = load_catalog()
    assert all(o.gpu_memory_mib for o in catalog.offerings)
    l4 = {o.gpu_memory_mib for o in catalog.offerings if o.gpu_type == "L4"}
    assert l4 == {22_888}
    arrays = catalog.as_arrays()
    assert (arrays["gpu_memory_mib"] > 10_000).all()
