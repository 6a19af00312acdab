"""Theoretical peaks: the CPU model per ISA and dtype, the GPU/TPU datasheet table, overrides.

The GPU and TPU figures are datasheet numbers checked here against the documented values; they
are untested on hardware (no such device in CI). The CPU model is also checked against this
machine's real ``backends.cpu.cpu_info``. Peaks are asked of the backend objects
(``Backend.peak_tflops``), which apply the config override or call ``peaks.gpu_peak``/``cpu_peak``.
"""

from __future__ import annotations

import re
from datetime import date

import pytest

from accelbench import backends
from accelbench.backends import peaks
from accelbench.backends.peaks import GPU_PEAKS, UNKNOWN_DEVICE, match_chip


def peak_tflops(backend: str, info: dict, dtype: str, threads: int | None, overrides: dict):
    """The peak as the ``backend`` object computes it."""
    return backends.get(backend).peak_tflops(info, dtype, threads, overrides)


def cpu(flags, mhz=3000.0, cores=8, **extra):
    return {
        "name": "test CPU",
        "arch": extra.pop("arch", "x86_64"),
        "vendor": extra.pop("vendor", "GenuineIntel"),
        "flags": list(flags),
        "max_mhz": mhz,
        "clock_source": "cpufreq cpuinfo_max_freq",
        "clock_is_max": extra.pop("clock_is_max", True),
        "cores_physical": cores,
        **extra,
    }


def tflops(cores, ghz, flop_per_cycle):
    return cores * ghz * flop_per_cycle / 1000.0


# --------------------------------------------------------------------------- CPU


@pytest.mark.parametrize(
    "flags, dtype, fpc, phrase",
    [
        (["avx2", "fma"], "float32", 32, "AVX2+FMA"),
        (["avx", "avx2", "fma", "avx512f"], "float32", 64, "AVX-512"),
        (["avx2", "fma", "avx512f", "avx512_bf16"], "bfloat16", 128, "AVX512_BF16"),
        (["avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"], "bfloat16", 1024, "AMX"),
        (["avx2", "fma", "avx512f", "avx512_fp16", "amx_tile", "amx_bf16"], "float16", 128, "AVX512_FP16"),
        (["avx2", "fma", "avx512f", "amx_tile", "amx_bf16", "amx_fp16"], "float16", 1024, "AMX-FP16"),
        (["avx"], "float32", 16, "without FMA"),
        (["sse2"], "float32", 8, "SSE"),
    ],
)
def test_cpu_isa_flops_per_cycle(flags, dtype, fpc, phrase):
    value, source = peak_tflops("cpu", cpu(flags), dtype, None, {})
    assert value == pytest.approx(tflops(8, 3.0, fpc))
    assert phrase in source
    assert "8 cores" in source and "3.000 GHz" in source


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_cpu_without_native_low_precision_is_conversion_bound_at_fp32_peak(dtype):
    info = cpu(["avx2", "fma", "f16c"])
    fp32, _ = peak_tflops("cpu", info, "float32", None, {})
    value, source = peak_tflops("cpu", info, dtype, None, {})
    assert value == fp32
    assert "conversion-bound" in source


def test_cpu_fp8_is_bounded_by_best_converted_path():
    amx = cpu(["avx2", "fma", "avx512f", "amx_tile", "amx_bf16"])
    assert peak_tflops("cpu", amx, "float8_e4m3fn", None, {})[0] == pytest.approx(tflops(8, 3.0, 1024))
    plain = cpu(["avx2", "fma"])
    value, source = peak_tflops("cpu", plain, "float8_e4m3fn", None, {})
    assert value == pytest.approx(tflops(8, 3.0, 32))
    assert "fp8" in source


def test_zen4_avx512_is_double_pumped():
    info = cpu(["avx2", "fma", "avx512f", "avx512_bf16"], vendor="AuthenticAMD", family="25", model="17")
    value, source = peak_tflops("cpu", info, "float32", None, {})
    assert value == pytest.approx(tflops(8, 3.0, 32))
    assert "double-pumped" in source
    assert peak_tflops("cpu", info, "bfloat16", None, {})[0] == pytest.approx(tflops(8, 3.0, 64))


def test_zen4_detected_by_model_name_when_family_missing():
    info = cpu(["avx2", "fma", "avx512f"], vendor="AuthenticAMD", model_name="AMD EPYC 9654 96-Core Processor")
    assert peaks.is_zen4(info)
    assert not peaks.is_zen4(cpu(["avx2", "fma", "avx512f"], model_name="Intel(R) Xeon(R) Platinum 8480+"))
    # Zen 3 is family 0x19 too, but has no AVX-512: plain AVX2 rate
    zen3 = cpu(["avx2", "fma"], vendor="AuthenticAMD", family="25", model="1")
    assert not peaks.is_zen4(zen3)
    assert peak_tflops("cpu", zen3, "float32", None, {})[0] == pytest.approx(tflops(8, 3.0, 32))


def test_zen1_has_half_width_fma():
    info = cpu(["avx2", "fma"], vendor="AuthenticAMD", family="23", model="1")
    assert peak_tflops("cpu", info, "float32", None, {})[0] == pytest.approx(tflops(8, 3.0, 16))
    zen2 = cpu(["avx2", "fma"], vendor="AuthenticAMD", family="23", model="49")
    assert peak_tflops("cpu", zen2, "float32", None, {})[0] == pytest.approx(tflops(8, 3.0, 32))


def test_arm_neon_fp16_bf16_and_sve512():
    neon = cpu(["asimd", "neon"], arch="aarch64", vendor=None)
    assert peak_tflops("cpu", neon, "float32", None, {})[0] == pytest.approx(tflops(8, 3.0, 32))
    hp = cpu(["asimd", "asimdhp", "bf16"], arch="aarch64", vendor=None)
    assert peak_tflops("cpu", hp, "float16", None, {})[0] == pytest.approx(tflops(8, 3.0, 64))
    assert peak_tflops("cpu", hp, "bfloat16", None, {})[0] == pytest.approx(tflops(8, 3.0, 128))
    a64fx = cpu(["asimd", "sve"], arch="aarch64", vendor=None, sve_vector_bits=512)
    assert peak_tflops("cpu", a64fx, "float32", None, {})[0] == pytest.approx(tflops(8, 3.0, 64))


@pytest.mark.parametrize("threads, cores_used", [(None, 8), (1, 1), (4, 4), (8, 8), (16, 8)])
def test_cpu_cores_used_is_threads_capped_by_physical_cores(threads, cores_used):
    value, source = peak_tflops("cpu", cpu(["avx2", "fma"]), "float32", threads, {})
    assert value == pytest.approx(tflops(cores_used, 3.0, 32))
    assert f"{cores_used} cores" in source


def test_cpu_cores_capped_by_affinity_and_cgroup_quota():
    info = cpu(["avx2", "fma"], cores_physical_available=4)
    assert peak_tflops("cpu", info, "float32", None, {})[0] == pytest.approx(tflops(4, 3.0, 32))
    info = cpu(["avx2", "fma"], cgroup_cpu_quota=1.5)
    value, source = peak_tflops("cpu", info, "float32", None, {})
    assert value == pytest.approx(tflops(2, 3.0, 32))
    assert "quota" in source


def test_cpu_clock_source_is_named_and_non_max_clock_is_flagged():
    _, source = peak_tflops("cpu", cpu(["avx2", "fma"]), "float32", None, {})
    assert "cpufreq cpuinfo_max_freq" in source and "upper bound" in source
    _, source = peak_tflops("cpu", cpu(["avx2", "fma"], clock_is_max=False), "float32", None, {})
    assert "may be exceeded" in source


def test_cpu_unknown_clock_or_isa_gives_none():
    value, source = peak_tflops("cpu", cpu(["avx2", "fma"], mhz=None), "float32", None, {})
    assert value is None and "clock unknown" in source and "matmul.peak_tflops" in source
    value, source = peak_tflops("cpu", cpu([]), "float32", None, {})
    assert value is None and "matmul.peak_tflops" in source


def test_cpu_peak_of_this_machine_follows_the_formula():
    import torch

    from accelbench.backends.cpu import cpu_info

    info = cpu_info(torch)
    value, source = peak_tflops("cpu", info, "float32", 1, {})
    if info["max_mhz"] is None or not info["flags"]:
        assert value is None
        return
    rate = peaks.cpu_flops_per_cycle(info, "float32").flops_per_cycle
    assert value == pytest.approx(1 * info["max_mhz"] / 1000 * rate / 1000)
    assert info["clock_source"] in source


# --------------------------------------------------------------------------- GPUs and TPUs


@pytest.mark.parametrize(
    "name, dtype, expected",
    [
        ("NVIDIA H100 80GB HBM3", "bfloat16", 989.4),
        ("NVIDIA H100 80GB HBM3", "float8_e4m3fn", 1978.9),
        ("NVIDIA H100 80GB HBM3", "tf32", 494.7),
        ("NVIDIA H100 80GB HBM3", "float32", 66.9),
        ("NVIDIA H100 PCIe", "bfloat16", 756.5),
        ("NVIDIA H100 PCIe", "float32", 51.2),
        ("NVIDIA H100 NVL", "float16", 835.5),
        ("NVIDIA H200", "bfloat16", 989.4),
        ("NVIDIA H200", "float8_e4m3fn", 1978.9),
        ("NVIDIA GH200 480GB", "bfloat16", 989.4),
        ("NVIDIA A100-SXM4-40GB", "bfloat16", 312.0),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156.0),
        ("NVIDIA A100-PCIE-40GB", "float32", 19.5),
        ("NVIDIA A100 80GB PCIe", "float16", 312.0),
        ("NVIDIA L40S", "bfloat16", 362.05),
        ("NVIDIA L40S", "float8_e4m3fn", 733.0),
        ("NVIDIA L4", "float16", 121.0),
        ("NVIDIA L4", "float32", 30.3),
        ("NVIDIA A10", "tf32", 62.5),
        ("Tesla V100-SXM2-16GB", "float16", 125.0),
        ("Tesla V100-PCIE-32GB", "float16", 112.0),
        ("NVIDIA GeForce RTX 4090", "bfloat16", 165.2),
        ("NVIDIA GeForce RTX 4090", "float32", 82.6),
        ("AMD Instinct MI300X", "bfloat16", 1307.4),
        ("AMD Instinct MI300X", "float8_e4m3fn", 2614.9),
        ("AMD Instinct MI300X", "float32", 163.4),
        ("AMD Instinct MI250X", "bfloat16", 383.0 / 2),
        ("AMD Instinct MI250X", "float32", 95.7 / 2),
        ("AMD Instinct MI210", "bfloat16", 181.0),
    ],
)
def test_gpu_datasheet_figures(name, dtype, expected):
    backend = "rocm" if name.startswith("AMD") else "cuda"
    value, source = peak_tflops(backend, {"name": name}, dtype, None, {})
    assert value == pytest.approx(expected)
    assert "datasheet" in source or "whitepaper" in source


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("Tesla V100S-PCIE-32GB", "V100S PCIe"),
        ("Tesla V100-SXM3-32GB", "V100 (other)"),
        ("AMD Instinct MI300X VF", "MI300X"),
        ("AMD Instinct MI250X/MI250", "MI250X"),
        ("AMD Instinct MI250", "MI250"),
    ],
)
def test_names_match_the_right_entry(name, key):
    assert match_chip(name).key == key


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GeForce RTX 3060", "Intel Arc A770", "", "NVIDIA A1000"])
def test_unknown_gpu_gives_none(name):
    assert peak_tflops("cuda", {"name": name}, "bfloat16", None, {}) == (None, UNKNOWN_DEVICE)


def test_missing_native_dtype_falls_back_to_fp32_or_none_for_fp8():
    value, source = peak_tflops("cuda", {"name": "NVIDIA A100-SXM4-80GB"}, "float8_e4m3fn", None, {})
    assert value is None and "no native float8" in source
    value, source = peak_tflops("cuda", {"name": "Tesla V100-SXM2-16GB"}, "bfloat16", None, {})
    assert value == pytest.approx(15.7) and "no native bfloat16" in source
    value, _ = peak_tflops("rocm", {"name": "AMD Instinct MI250X"}, "tf32", None, {})
    assert value == pytest.approx(95.7 / 2)


def test_partitions_scale_by_sm_or_cu_count():
    # a MIG slice with 14 of 108 SMs
    value, source = peak_tflops(
        "cuda", {"name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "multiprocessors": 14}, "bfloat16", None, {}
    )
    assert value == pytest.approx(312.0 * 14 / 108)
    assert "14/108" in source
    # 'MI250X/MI250' with an MI250 GCD's 104 CUs is the MI250 figure
    value, _ = peak_tflops("rocm", {"name": "AMD Instinct MI250X/MI250", "multiprocessors": 104}, "bfloat16", None, {})
    assert value == pytest.approx(362.1 / 2, rel=1e-3)
    # the full chip is not scaled
    value, _ = peak_tflops("cuda", {"name": "NVIDIA H100 80GB HBM3", "multiprocessors": 132}, "bfloat16", None, {})
    assert value == pytest.approx(989.4)


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("TPU v4", 275.0),
        ("TPU v5 lite", 197.0),
        ("TPU v5e", 197.0),
        ("TPU v5", 459.0),
        ("TPU v5p", 459.0),
        ("TPU v6 lite", 918.0),
        ("TPU v6e", 918.0),
    ],
)
def test_tpu_device_kinds(kind, expected):
    value, source = peak_tflops("xla", {"name": kind, "device_kind": kind}, "bfloat16", None, {})
    assert value == pytest.approx(expected)
    assert "bf16" in source


def test_xla_on_a_gpu_uses_the_gpu_table():
    info = {"name": "CUDA", "device_kind": "NVIDIA H100 80GB HBM3"}
    assert peak_tflops("xla", info, "bfloat16", None, {})[0] == pytest.approx(989.4)


def test_mps_is_unknown():
    value, source = peak_tflops("mps", {"name": "Apple M2 Pro"}, "float32", None, {})
    assert value is None and "matmul.peak_tflops" in source


def test_table_is_complete_and_sourced():
    for entry in GPU_PEAKS:
        assert set(entry.tflops) == set(peaks.DTYPES), entry.key
        assert entry.source.strip(), entry.key
        for dtype, value in entry.tflops.items():
            assert value is None or value > 0, (entry.key, dtype)
        # low precision is never slower than fp32 on the same chip
        fp32 = entry.tflops["float32"]
        for dtype in ("bfloat16", "float16", "float8_e4m3fn"):
            if entry.tflops[dtype] is not None:
                assert entry.tflops[dtype] >= fp32, (entry.key, dtype)


MAX_1550 = "Intel(R) Data Center GPU Max 1550"


@pytest.mark.parametrize(
    "dtype, expected",
    [
        ("bfloat16", 838.9),
        ("float16", 838.9),
        ("tf32", 419.4),
        ("float32", 52.4),
    ],
)
def test_intel_max_1550_figures(dtype, expected):
    value, source = peak_tflops("xpu", {"name": MAX_1550}, dtype, None, {})
    assert value == pytest.approx(expected)
    assert source.startswith("Max 1550: Intel Data Center GPU Max 1550")


def test_intel_max_1550_follows_its_stated_derivation():
    """1024 engines at 1.6 GHz: 16 fp32 lanes x 2 FLOP (vector), 512 bf16/fp16 FLOP/clk (XMX), TF32 half of that."""
    entry = match_chip(MAX_1550)
    assert entry.key == "Max 1550" and entry.units == 1024
    assert entry.tflops["float32"] == pytest.approx(1024 * 16 * 2 * 1.6e9 / 1e12, abs=0.05)
    assert entry.tflops["bfloat16"] == pytest.approx(1024 * 512 * 1.6e9 / 1e12, abs=0.05)
    assert entry.tflops["tf32"] == pytest.approx(1024 * 512 / 2 * 1.6e9 / 1e12, abs=0.05)
    value, source = peak_tflops("xpu", {"name": MAX_1550}, "float8_e4m3fn", None, {})
    assert value is None and "no native float8" in source
    # one stack (FLAT mode: 512 of 1024 units) gets half
    value, source = peak_tflops("xpu", {"name": MAX_1550, "multiprocessors": 512}, "bfloat16", None, {})
    assert value == pytest.approx(838.9 / 2) and "512/1024" in source
    assert match_chip("Intel(R) Data Center GPU Max 1100") is None
    assert match_chip("Intel Arc A770") is None


def test_intel_max_1550_source_names_where_and_when_it_was_read():
    source = match_chip(MAX_1550).source
    url = re.search(r"\b(?:https?://)?[a-z0-9-]+(?:\.[a-z0-9-]+)+\.[a-z]{2,}/\S+", source)
    assert url and "intel.com" in url.group(0), source
    dates = re.findall(r"\b(\d{4})-(\d{2})-(\d{2})\b", source)
    assert dates, source
    for y, m, d in dates:  # real calendar dates, none in the future
        assert date(int(y), int(m), int(d)) <= date.today(), source


def test_cpu_peak_is_a_bound_only_at_the_max_clock():
    cpu_backend = backends.get("cpu")
    assert cpu_backend.peak_is_bound(cpu(["avx2", "fma"]), overridden=False)
    assert not cpu_backend.peak_is_bound(cpu(["avx2", "fma"], clock_is_max=False), overridden=False)
    assert cpu_backend.peak_is_bound(cpu(["avx2", "fma"], clock_is_max=False), overridden=True)
    for name in ("cuda", "rocm", "xla", "xpu"):  # datasheet figures are bounds
        assert backends.get(name).peak_is_bound({"name": "x"}, overridden=False), name


# --------------------------------------------------------------------------- overrides


def test_overrides_win_for_their_backend_and_dtype_only():
    info = {"name": "NVIDIA H100 80GB HBM3"}
    overrides = {"cuda": {"bfloat16": 900.0}, "cpu": {"float32": 1.2}}
    value, source = peak_tflops("cuda", info, "bfloat16", None, overrides)
    assert value == 900.0 and "config matmul.peak_tflops.cuda.bfloat16" in source
    assert peak_tflops("cuda", info, "float16", None, overrides)[0] == pytest.approx(989.4)
    assert peak_tflops("rocm", info, "bfloat16", None, overrides)[0] == pytest.approx(989.4)
    assert peak_tflops("cpu", cpu([]), "float32", 4, overrides)[0] == 1.2
    # an override also fills in an unknown device
    assert peak_tflops("cuda", {"name": "NVIDIA A10G"}, "bfloat16", None, overrides)[0] == 900.0
    # the new XPU backend reads its own key only
    assert peak_tflops("xpu", {"name": MAX_1550}, "bfloat16", None, overrides)[0] == pytest.approx(838.9)
    value, source = peak_tflops("xpu", {"name": "Intel Arc A770"}, "bfloat16", None, {"xpu": {"bfloat16": 39.3}})
    assert value == 39.3 and "config matmul.peak_tflops.xpu.bfloat16" in source


def test_unknown_dtype_names_allowed_values():
    value, source = peak_tflops("cuda", {"name": "NVIDIA H100 80GB HBM3"}, "int8", None, {})
    assert value is None and "float32" in source and "int8" in source
