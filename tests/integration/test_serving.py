"""Serving iterations read from the engines' annotations: hand-made traces for the parsing and
the latency (written by hand, not recorded), and the serving traces in ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.sections.serving import ServingResult, run
from traceinsight.trace.loader import load

TRACELENS = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "tracelens"
PID = TID = 7


def _trace(tmp_path: Path, names: list[str]) -> Path:
    """One span per name, 1000 us apart; each launches a kernel that ends 300 us after the
    span's end (the GPU runs behind the host)."""
    events = []
    for i, name in enumerate(names):
        t0 = i * 1000.0
        events.append(op(name, t0, 200, pid=PID, tid=TID, cat="user_annotation"))
        events.append(launch("cudaLaunchKernel", t0 + 50, 5, i + 1, pid=PID, tid=TID))
        events.append(kernel("gemm", t0 + 100, 400, i + 1))
    events.append(op("unrelated", 5000, 10, pid=PID, tid=TID, cat="user_annotation"))
    return write_trace(tmp_path / "serve.json", events)


def _serving(path: Path) -> ServingResult:
    return run(load(path, cache=False), AnalysisConfig())


def test_vllm_style_iterations_give_phase_tokens_latency_and_rate(tmp_path: Path) -> None:
    r = _serving(_trace(tmp_path, [
        "execute_8192_context_9(sq8155sk8430sqsq1sqsk2)_generation_37(sq37sk34489sqsq37sqsk34489)",
        "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)",
        "execute_100_context_2(sq100sk100sqsq1sqsk1)_generation_0(sq0sk0sqsq0sqsk0)",
    ]))
    rows = r.iterations.to_dicts()
    assert [x["phase"] for x in rows] == ["mixed", "decode", "prefill"]
    assert [x["requests"] for x in rows] == [46, 32, 2]
    assert [x["tokens"] for x in rows] == [8192, 32, 100]
    assert (rows[0]["prefill_tokens"], rows[0]["decode_tokens"], rows[0]["kv_tokens"]) == (8155, 37, 8430 + 34489)
    # latency: span start to the end of the last kernel launched in it (100 + 400 us)
    assert [x["latency_ns"] for x in rows] == [500_000] * 3
    assert [x["device_ns"] for x in rows] == [400_000] * 3
    assert rows[0]["tokens_per_s"] == pytest.approx(8192 / 500e-6)
    assert r.tokens == 8192 + 32 + 100 and r.tokens_per_s == pytest.approx(8324 / 1500e-6)


def test_sglang_steps_and_xdit_diffusion(tmp_path: Path) -> None:
    r = _serving(_trace(tmp_path, ["step[DECODE bs=32]", "step[EXTEND bs=4]"]))
    assert [x["phase"] for x in r.iterations.to_dicts()] == ["decode", "extend"]
    assert r.iterations["tokens"].to_list() == [32, None]  # an extend step's tokens are not in its name
    assert r.tokens == 32
    d = _serving(_trace(tmp_path, ["execute_diffusion_2_1024x1024"]))
    assert d.iterations["phase"].to_list() == ["diffusion"] and d.iterations["requests"].to_list() == [2]
    assert d.tokens is None and d.tokens_per_s is None


def test_no_engine_annotation_is_not_available(tmp_path: Path) -> None:
    r = _serving(_trace(tmp_path, ["ProfilerStep#1", "forward"]))
    assert not r.available and "serving-engine" in (r.reason or "")


@pytest.mark.skipif(not TRACELENS.is_dir(), reason="../shared/third_party is not beside the checkout")
@pytest.mark.parametrize(
    ("path", "phase", "tokens", "requests"),
    [
        ("vllm_prefilldecode_piecewise/graph_execution.json.gz", "mixed", 8192, 46),
        ("vllm_decode_full/graph_execution.json.gz", "decode", 32, 32),
        ("sglang_decode/decode.json.gz", "decode", 32, 32),
        ("xdit_flux_aiter_sage/profile_trace_rank_0.json.gz", "diffusion", None, 1),
    ],
)
def test_serving_traces(path: str, phase: str, tokens: int | None, requests: int) -> None:
    r = _serving(TRACELENS / path)
    (row,) = r.iterations.to_dicts()
    assert (row["phase"], row["tokens"], row["requests"]) == (phase, tokens, requests)
    # every device work launched in the span ran inside the latency
    assert 0 < row["device_ns"] <= row["latency_ns"]
