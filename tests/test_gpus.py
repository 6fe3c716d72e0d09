"""GPU catalog: Cauchy Table 1 numbers, memory in GiB, per-direction link convention, loader validation."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from hardware.gpus import GPU_CATALOG, GPUSpec, get_gpu, gpu_names, load_gpu_catalog

REQUIRED_GPUS = (
    "H100-80GB",
    "H100-96GB",
    "H800-SXM",
    "H20-NVL",
    "A800-PCIe",
    "A100-80GB",
    "A100-40GB",
    "A10",
    "RTX4090",
    "MI210",
    "V100-32GB",
    "L40S",
    "A40",
    "H200",
    "RTX-PRO-6000",
)

# Cauchy Table 1: TFLOPs, BW (GB/s), Mem (its "GB" is the nominal capacity, which the
# memory is built in GiB), Price ($/h), TFLOP/$, GB/$.
CAUCHY_TABLE_1 = {
    "H800-SXM": (989, 3350, 80, 2.69, 1.32e6, 4.48e6),
    "A10": (125, 600, 24, 0.75, 600e3, 2.88e6),
    "RTX4090": (165, 1008, 24, 0.69, 861e3, 5.26e6),
    "A800-PCIe": (312, 1935, 80, 1.19, 944e3, 5.85e6),
    "MI210": (181, 1638, 64, 1.40, 465e3, 4.21e6),
    "H20-NVL": (148, 4000, 96, 1.50, 355e3, 9.60e6),
}

EXPECTED_FAMILY = {
    "H100-80GB": "h100",
    "H100-96GB": "h100",
    "H800-SXM": "h100",
    "H20-NVL": "h100",
    "A800-PCIe": "a100",
    "A100-80GB": "a100",
    "A100-40GB": "a100",
    "V100-32GB": "a100",
    "MI210": "a100",
    "A10": "a40",
    "A40": "a40",
    "L40S": "a40",
    "RTX4090": "a40",
    "H200": "h100",
    "RTX-PRO-6000": "a40",
}

HEADER = (
    "name,fp16_tflops,mem_bandwidth_gbps,memory_gib,intra_node_link_gbps,host_link_gbps,"
    "price_per_hour_usd,profile_family,source\n"
)
GOOD_ROW = "X1,100,1000,40,300,32,1.5,a100,test datasheet\n"


def test_catalog_holds_every_required_gpu():
    assert set(REQUIRED_GPUS) <= set(gpu_names())
    assert gpu_names() == list(GPU_CATALOG)


@pytest.mark.parametrize("name", sorted(CAUCHY_TABLE_1))
def test_table_1_gpus_match_cauchy_and_reproduce_its_per_dollar_columns(name):
    tflops, bandwidth, memory, price, tflop_per_usd, gb_per_usd = CAUCHY_TABLE_1[name]
    gpu = get_gpu(name)
    assert (gpu.fp16_tflops, gpu.mem_bandwidth_gbps, gpu.memory_gib, gpu.price_per_hour_usd) == (
        tflops,
        bandwidth,
        memory,
        price,
    )
    # Table 1's per-dollar columns are per-hour price: X * 3600 s / ($/h), printed to 3 digits.
    assert gpu.fp16_tflops / gpu.price_per_second_usd == pytest.approx(tflop_per_usd, rel=5e-3)
    assert gpu.mem_bandwidth_gbps / gpu.price_per_second_usd == pytest.approx(gb_per_usd, rel=5e-3)


def test_h800_wins_compute_per_dollar_and_h20_wins_bandwidth_per_dollar():
    h800, h20 = get_gpu("H800-SXM"), get_gpu("H20-NVL")
    compute_ratio = (h800.fp16_tflops / h800.price_per_hour_usd) / (h20.fp16_tflops / h20.price_per_hour_usd)
    bandwidth_ratio = (h20.mem_bandwidth_gbps / h20.price_per_hour_usd) / (
        h800.mem_bandwidth_gbps / h800.price_per_hour_usd
    )
    # Cauchy Sec. 2.3: "3.7x higher compute efficiency but 2.1x lower memory efficiency".
    assert round(compute_ratio, 1) == 3.7
    assert round(bandwidth_ratio, 1) == 2.1


def test_profile_families_follow_the_documented_mapping():
    assert {name: get_gpu(name).profile_family for name in EXPECTED_FAMILY} == EXPECTED_FAMILY


def test_links_are_per_direction_and_cards_without_nvlink_use_pcie():
    assert get_gpu("H100-80GB").intra_node_link_gbps == 900 / 2
    assert get_gpu("A100-80GB").intra_node_link_gbps == 600 / 2
    assert get_gpu("H100-80GB").host_link_gbps == 128 / 2
    for name in ("A10", "RTX4090", "L40S"):
        gpu = get_gpu(name)
        assert gpu.intra_node_link_gbps == gpu.host_link_gbps == 32


def test_h100_96gb_is_pascals_part():
    gpu = get_gpu("H100-96GB")
    assert gpu.memory_gib == 96
    assert gpu.memory_bytes == 96 * 1024**3 == 103_079_215_104
    assert gpu.memory_gb == pytest.approx(103.079215104, rel=1e-12)
    assert "PASCAL" in gpu.source


# Capacity in GiB per GPU family, the total nvidia-smi reports for the card (MiB) where the
# catalog's source cites one, and the share ECC leaves: GDDR6 datacenter cards (A10, A40, L40S)
# run with ECC on by default and give 1/16 of the memory to it; HBM keeps ECC out of the
# capacity and the RTX 4090 runs without. The driver keeps a reserve under 1 % on top.
MEMORY_BY_FAMILY = {
    "hopper": {"H100-80GB": (80, 81_559, 1), "H800-SXM": (80, 81_559, 1), "H100-96GB": (96, 97_871, 1),
               "H20-NVL": (96, None, 1),
               "H200": (141, 143_771, 1)},
    "ampere_hbm": {"A100-80GB": (80, 81_920, 1), "A800-PCIe": (80, 81_920, 1), "A100-40GB": (40, 40_960, 1)},
    "ampere_gddr": {"A10": (24, 23_028, 15 / 16), "A40": (48, 46_068, 15 / 16)},
    "ada": {"RTX4090": (24, 24_564, 1), "L40S": (48, 46_068, 15 / 16)},
    "volta": {"V100-32GB": (32, 32_768, 1)},
    "blackwell_gddr": {"RTX-PRO-6000": (96, 97_887, 1)},
    "cdna2": {"MI210": (64, None, 1)},
}


def test_memory_families_cover_the_catalog():
    assert sorted(name for family in MEMORY_BY_FAMILY.values() for name in family) == sorted(GPU_CATALOG)


@pytest.mark.parametrize("family", sorted(MEMORY_BY_FAMILY))
def test_memory_is_counted_in_gib_as_the_cards_report_it(family):
    for name, (gib, reported_mib, ecc_share) in MEMORY_BY_FAMILY[family].items():
        gpu = get_gpu(name)
        assert gpu.memory_gib == gib
        assert gpu.memory_bytes == gib * 2**30
        assert f"{gib} GiB" in gpu.source
        if reported_mib is not None:
            assert f"{reported_mib:,} MiB" in gpu.source
            usable_mib = gib * 1024 * ecc_share
            assert 0.99 * usable_mib <= reported_mib <= usable_mib


def test_every_row_cites_a_source_and_has_positive_finite_numbers():
    for gpu in GPU_CATALOG.values():
        assert gpu.source.strip()
        for value in (
            gpu.fp16_tflops,
            gpu.mem_bandwidth_gbps,
            gpu.memory_gib,
            gpu.intra_node_link_gbps,
            gpu.host_link_gbps,
            gpu.price_per_hour_usd,
        ):
            assert math.isfinite(value) and value > 0


def test_price_per_second_is_hourly_price_over_3600():
    assert get_gpu("H800-SXM").price_per_second_usd == pytest.approx(2.69 / 3600, rel=1e-12)


def test_unknown_gpu_lists_known_names():
    with pytest.raises(ValueError, match="unknown GPU 'B200'") as info:
        get_gpu("B200")
    for name in REQUIRED_GPUS:
        assert name in str(info.value)


def test_name_lookup_is_exact():
    with pytest.raises(ValueError, match="unknown GPU 'a10'"):
        get_gpu("a10")


@pytest.mark.parametrize(
    "field, bad",
    [("fp16_tflops", float("nan")), ("memory_gib", -1.0), ("price_per_hour_usd", 0.0), ("host_link_gbps", math.inf)],
)
def test_spec_rejects_non_positive_or_non_finite_numbers(field, bad):
    with pytest.raises(ValueError, match=field):
        replace(get_gpu("A10"), **{field: bad})


def test_spec_rejects_unknown_profile_family():
    with pytest.raises(ValueError, match="unknown profile_family 'b200'.*a100, a40, h100"):
        replace(get_gpu("A10"), profile_family="b200")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpus.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_loader_accepts_a_good_file(tmp_path):
    catalog = load_gpu_catalog(_write(tmp_path, HEADER + GOOD_ROW))
    assert catalog["X1"] == GPUSpec("X1", 100.0, 1000.0, 40.0, 300.0, 32.0, 1.5, "a100", "test datasheet")


@pytest.mark.parametrize(
    "row, message",
    [
        ("X2,nan,1000,40,300,32,1.5,a100,src\n", r"line 3: GPU 'X2': fp16_tflops=nan"),
        ("X2,100,-5,40,300,32,1.5,a100,src\n", r"line 3: GPU 'X2': mem_bandwidth_gbps=-5.0"),
        ("X2,100,1000,forty,300,32,1.5,a100,src\n", r"line 3: memory_gib='forty' is not a number"),
        ("X2,100,1000,40,300,32,1.5,tpu,src\n", r"line 3: .*profile_family 'tpu'"),
        ("X1,100,1000,40,300,32,1.5,a100,src\n", r"line 3: duplicate GPU name 'X1'"),
        ("X2,100,1000,40,300,32,1.5,a100\n", r"line 3: expected 9 fields"),
        ("X2,100,1000,40,300,32,1.5,a100, \n", r"line 3: .*source"),
    ],
)
def test_loader_names_bad_row_and_field(tmp_path, row, message):
    with pytest.raises(ValueError, match=message):
        load_gpu_catalog(_write(tmp_path, HEADER + GOOD_ROW + row))


def test_loader_rejects_wrong_columns(tmp_path):
    with pytest.raises(ValueError, match="columns"):
        load_gpu_catalog(_write(tmp_path, HEADER.replace("memory_gib", "memory_gb") + GOOD_ROW))


def test_loader_rejects_empty_catalog(tmp_path):
    with pytest.raises(ValueError, match="no GPU rows"):
        load_gpu_catalog(_write(tmp_path, HEADER))


def test_h200_is_the_sxm_datasheet_part_with_h100_compute():
    h200, h100 = get_gpu("H200"), get_gpu("H100-80GB")
    # Same GH100 tensor rate and NVLink as the H100 SXM; 4.8 TB/s HBM3e against 3.35 TB/s.
    assert h200.fp16_tflops == h100.fp16_tflops == 989
    assert h200.mem_bandwidth_gbps / h100.mem_bandwidth_gbps == pytest.approx(4800 / 3350)
    assert h200.intra_node_link_gbps == 900 / 2 and h200.host_link_gbps == 128 / 2
    assert h200.profile_family == "h100"


def test_rtx_pro_6000_dense_bf16_rate_is_derived_from_the_sparse_fp4_figure():
    gpu = get_gpu("RTX-PRO-6000")
    # 4000 FP4 TOPS with sparsity -> /2 dense -> /2 FP8 -> /2 BF16.
    assert gpu.fp16_tflops == 4000 / 2 / 2 / 2
    assert gpu.mem_bandwidth_gbps == 512 / 8 * 28  # 512-bit GDDR7 at 28 Gbps
    # No NVLink: GPU-to-GPU traffic crosses PCIe Gen5 x16.
    assert gpu.intra_node_link_gbps == gpu.host_link_gbps == 128 / 2
    assert "derived" in gpu.source
