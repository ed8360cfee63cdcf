"""A generically named ROCm device without gcnArchName: the part from the ISA in kernel names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.device.infer import infer_part, part_from_kernel_names
from traceinsight.analysis.runner import run_one
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.trace.loader import load

GENERIC = {"id": 0, "name": "AMD Radeon Graphics", "numSms": 304}
MI300_GEMM = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x1_SN_1LDSB0_GRVW8_gfx942"


def _hand_made_rocm_trace(tmp: Path, kernel_names: list[str], props: dict[str, Any]) -> Path:
    """Hand-made, reduced from a ROCm trace: one bf16 mm launching the given kernels."""
    dims = [[4096, 4096], [4096, 4096]]
    args = {"External id": 1, "Input Dims": dims, "Input type": ["c10::BFloat16"] * 2, "Concrete Inputs": ["", ""]}
    events: list[dict[str, Any]] = [op("aten::mm", 100.0, 30.0 * len(kernel_names), args=args)]
    for i, name in enumerate(kernel_names):
        events.append(launch("hipLaunchKernel", 105.0 + 30.0 * i, 3.0, i + 1))
        events.append(kernel(name, 200.0 + 300.0 * i, 250.0, i + 1))
    return write_trace(tmp / "rocm.json", events, deviceProperties=[props])


def _bound(path: Path) -> BoundResult:
    return run_one(load(path, cache=False), "bound", AnalysisConfig())


def test_gfx942_in_tensile_names_means_mi300(tmp_path: Path) -> None:
    b = _bound(_hand_made_rocm_trace(tmp_path, [MI300_GEMM, "void at::native::elementwise_kernel<4>"], GENERIC))
    assert b.peaks is not None and b.peaks["key"] == "mi300x"
    assert b.roofline_available
    reason = str(b.peaks["matched_by"])
    assert "inferred as AMD Instinct MI300X from kernel names" in reason and "MI300 series" in reason
    assert any("ISA in its kernel names" in n for n in b.notes)


def test_gfx90a_means_mi200_series() -> None:
    guess = part_from_kernel_names(pl.Series(["Cijk_Ailk_Bljk_SB_MT64x64x16_SN_gfx90a", "copy_kernel"]))
    assert guess is not None and guess.part == "AMD Instinct MI250" and "MI200 series" in guess.source
    assert guess.from_kernel_names


def test_no_isa_or_two_isas_or_an_unknown_one_tell_nothing() -> None:
    assert part_from_kernel_names(pl.Series(["Cijk_Ailk_Bljk_SB_MT64x64x16", "copy_kernel"])) is None
    assert part_from_kernel_names(pl.Series(["a_gfx90a", "b_gfx942"])) is None
    assert part_from_kernel_names(pl.Series(["a_gfx1100"])) is None
    assert part_from_kernel_names(pl.Series(["a_gfx9420x"])) is None  # not a whole token


def test_kernel_names_are_only_the_last_resort() -> None:
    names = pl.Series([MI300_GEMM])
    # A name the table knows wins; so does gcnArchName, even when kernels say otherwise.
    assert infer_part("AMD Instinct MI250X", {"gcnArchName": "gfx90a"}, names) is None
    by_arch = infer_part("AMD Radeon Graphics", {"gcnArchName": "gfx90a:sramecc+:xnack-", "numSms": 104}, names)
    assert by_arch is not None and by_arch.part == "AMD Instinct MI250" and not by_arch.from_kernel_names
    assert infer_part("AMD Radeon Graphics", {"gcnArchName": "gfx90a", "numSms": 7}, names) is None
    last = infer_part("AMD Radeon Graphics", {"numSms": 304}, names)
    assert last is not None and last.part == "AMD Instinct MI300X" and last.from_kernel_names


def test_generic_name_without_isa_anywhere_has_no_peaks(tmp_path: Path) -> None:
    b = _bound(_hand_made_rocm_trace(tmp_path, ["Cijk_Alik_Bljk_BBS_BH_MT256x256x64"], GENERIC))
    assert b.peaks is None and not b.roofline_available
