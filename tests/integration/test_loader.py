"""Loading real and hand-made traces into frames: formats, linking, times, edge cases."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

import traceinsight as ti
from tests.conftest import sample_names, sample_path
from tests.handmade import HOST_PID, MAIN_TID, kernel, launch, op, write_trace
from traceinsight.trace import chunking
from traceinsight.trace.schema import EVENT_COLUMNS, KERNEL_COLUMNS


@pytest.mark.parametrize("name", sample_names())
def test_every_sample_loads_with_the_documented_schema(name: str, sample_trace) -> None:
    trace = sample_trace(name)
    assert list(trace.events.columns) == list(EVENT_COLUMNS)
    assert (
        trace.events.schema["ts_ns"] == pl.Int64 and trace.events.schema["name"] == pl.Categorical
    )
    assert list(trace.kernels.columns) == list(KERNEL_COLUMNS)
    assert trace.events["dur_ns"].min() >= 0
    assert (trace.events["end_ns"] == trace.events["ts_ns"] + trace.events["dur_ns"]).all()
    assert trace.events["id"].to_list() == list(range(trace.events.height))
    assert trace.kernels.height > 0, "every bundled sample was recorded on a GPU"
    # A kernel without a traced launch call was launched before the window opened (the host
    # runs ahead), so on its stream it runs before every kernel whose launch was traced.
    linked = trace.kernels.filter(pl.col("launch_id").is_not_null())
    unlinked = trace.kernels.filter(pl.col("launch_id").is_null())
    assert linked.height > unlinked.height
    if unlinked.height:
        assert any("launched before" in w for w in trace.meta.warnings)
        first_linked = linked.group_by("device", "stream").agg(pl.col("ts_ns").min().alias("first"))
        late = unlinked.join(first_linked, on=["device", "stream"]).filter(
            pl.col("ts_ns") > pl.col("first")
        )
        assert late.height == 0
    # A kernel cannot start before the call that launched it started (1 µs of clock skew allowed).
    assert (linked["launch_ts_ns"] <= linked["ts_ns"] + 1_000).all()
    assert trace.meta.devices and "H" in trace.meta.devices[0].name
    assert trace.meta.base_time_ns is not None


def test_real_training_trace_links_kernels_to_ops_steps_and_samples(sample_trace) -> None:
    # GIVEN an eager training run recorded with shapes, memory, steps and NVML counters
    # WHEN it is loaded
    trace = sample_trace("train_eager")
    # THEN its kernels link to their launching ops, top-level ops and steps
    kernels = trace.kernels
    launched = kernels.filter(pl.col("launch_id").is_not_null())
    assert launched.height > 100 and launched["op_name"].null_count() == 0
    gemm = kernels.filter(pl.col("op_name").cast(pl.String).is_in(["aten::mm", "aten::addmm"]))
    assert gemm.height > 0 and (gemm["top_op_name"].cast(pl.String) == "aten::linear").any()
    steps = sorted(s for s in trace.events["step"].unique().to_list() if s is not None)
    assert len(steps) >= 3
    assert set(kernels["step"].drop_nulls().unique().to_list()) <= set(steps)
    # ProfilerStep spans contain their host events: each host event's step span holds its ts.
    spans = trace.events.filter(
        (pl.col("kind") == "user_annotation")
        & pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#")
    )
    assert spans.height == len(steps)
    # AND the memory events and counter samples land in their own frames
    assert trace.memory.height > 0 and trace.memory["total_allocated_bytes"].max() > 0
    assert set(trace.counters["name"].cast(pl.String).unique()) >= {
        "nvml.utilization",
        "nvml.power",
    }
    assert trace.has_shapes and trace.has_steps and trace.has_gpu


def test_nesting_parent_contains_child(sample_trace) -> None:
    events = sample_trace("train_eager").events
    joined = events.filter(pl.col("parent").is_not_null()).join(
        events.select(
            pl.col("id").alias("parent"),
            pl.col("ts_ns").alias("p_ts"),
            pl.col("end_ns").alias("p_end"),
            pl.col("depth").alias("p_depth"),
        ),
        on="parent",
    )
    assert joined.height > 1000
    assert (joined["p_ts"] <= joined["ts_ns"]).all()
    assert (joined["p_end"] >= joined["end_ns"]).mean() > 0.999
    assert (joined["depth"] == joined["p_depth"] + 1).all()


def test_cuda_graph_launch_starts_many_kernels(sample_trace) -> None:
    kernels = sample_trace("train_cudagraphs").kernels
    graph = kernels.filter(pl.col("launch_name").cast(pl.String) == "cudaGraphLaunch")
    assert graph.height > 0
    per_launch = graph.group_by("launch_id").len()
    assert per_launch["len"].max() > 5


def test_python_function_frames_form_their_own_tree(sample_trace) -> None:
    events = sample_trace("train_with_stack").events
    python = events.filter(pl.col("kind") == "python")
    assert python.height > 100
    kinds = events.select("id", pl.col("kind").alias("parent_kind"))
    parents = python.join(kinds.rename({"id": "parent"}), on="parent")
    assert (parents["parent_kind"] == "python").all()
    ops = events.filter(pl.col("kind") == "cpu_op").join(
        kinds.rename({"id": "parent"}), on="parent"
    )
    assert not (ops["parent_kind"] == "python").any()


def test_notebook_helpers(sample_trace) -> None:
    trace = sample_trace("gemm_bf16")
    frame = trace.to_pandas("kernels")
    assert len(frame) == trace.kernels.height
    counts = trace.sql("SELECT kind, COUNT(*) AS n FROM kernels GROUP BY kind")
    assert counts["n"].sum() == trace.kernels.height
    with pytest.raises(KeyError):
        trace.frame("nope")


# --- formats, with small hand-made fixtures ---------------------------------------------


def test_ns_resolution_float_timestamps(tmp_path: Path) -> None:
    # hand-made: µs with three decimals, a 0.456 µs kernel and a 1 ns launch gap
    path = write_trace(
        tmp_path / "ns.json",
        [
            launch("cudaLaunchKernel", 100.123, 2.001, correlation=1),
            kernel("k", 103.125, 0.456, correlation=1),
        ],
        baseTimeNanoseconds=1_000,
    )
    trace = ti.load(path, cache=False)
    k = trace.kernels.row(0, named=True)
    assert k["ts_ns"] == 103_125 and k["dur_ns"] == 456 and k["end_ns"] == 103_581
    assert k["launch_end_ns"] == 102_124


def test_rocm_hip_trace_links_hip_launches(tmp_path: Path) -> None:
    # GIVEN a hand-made trace after the shape of ROCm Kineto traces: hip* runtime names (one
    # under cat hip_runtime), no CUDA names
    path = write_trace(
        tmp_path / "rocm.json",
        [
            op("aten::mm", 10, 20),
            launch("hipLaunchKernel", 12, 5, correlation=9, cat="cuda_runtime"),
            launch("hipExtModuleLaunchKernel", 20, 5, correlation=10, cat="hip_runtime"),
            kernel("Cijk_Alik_Bljk_SB_MT64x64", 30, 40, correlation=9, device=0, stream=0),
            kernel("my_kernel", 80, 4, correlation=10, device=0, stream=0),
        ],
        deviceProperties=[{"id": 0, "name": "AMD Instinct MI300X"}],
        baseTimeNanoseconds=5,
    )
    # WHEN it is loaded
    trace = ti.load(path, cache=False)
    # THEN each kernel links to its hip launch and, through it, to the op
    assert trace.kernels["launch_name"].cast(pl.String).to_list() == [
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
    ]
    assert trace.kernels["op_name"].cast(pl.String).to_list() == ["aten::mm", "aten::mm"]
    assert trace.meta.devices[0].name == "AMD Instinct MI300X"


def test_cpu_only_trace_recorded_here(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    # GIVEN a CPU-only trace recorded here with shapes, three steps of a small model
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            model(torch.randn(8, 16)).sum().backward()
            prof.step()
    path = tmp_path / "cpu.pt.trace.json"
    prof.export_chrome_trace(str(path))
    # WHEN it is loaded
    trace = ti.load(path, cache=False)
    # THEN it has no GPU side but has its shapes, as compact JSON
    assert trace.kernels.height == 0 and not trace.has_gpu
    assert trace.has_shapes
    linear = trace.events.filter(pl.col("name").cast(pl.String) == "aten::linear")
    # torch writes "[[8, 16], ..."; the frame holds compact JSON, like a re-serialized trace's
    assert linear.height >= 2 and linear["input_dims"].str.contains(r"^\[\[8,(16|32)\],").all()


def test_trace_without_profiler_steps(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "nostep.json", [op("aten::add", 1, 2), op("aten::mul", 5, 1)])
    trace = ti.load(path, cache=False)
    assert not trace.has_steps and trace.events["step"].null_count() == 2


def test_several_gpus_in_one_trace(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path / "multi.json",
        [
            launch("cudaLaunchKernel", 1, 1, correlation=1),
            launch("cudaLaunchKernel", 2, 1, correlation=2),
            kernel("a", 3, 10, correlation=1, device=0),
            kernel("b", 4, 10, correlation=2, device=1),
        ],
        distributedInfo={"rank": 0, "world_size": 2, "backend": "nccl"},
    )
    trace = ti.load(path, cache=False)
    assert trace.gpu_devices == [0, 1]
    assert trace.meta.rank == 0


def test_missing_base_time_makes_times_relative_to_the_first_event(tmp_path: Path) -> None:
    # hand-made: absolute epoch µs, as older traces have (a double holds them to ~0.25 ns)
    t0 = 1_732_000_000_123_456.5
    path = write_trace(tmp_path / "nobase.json", [op("a", t0, 1.0), op("b", t0 + 3.5, 0.5, tid=2)])
    trace = ti.load(path, cache=False)
    assert trace.meta.base_time_ns is None
    assert any("baseTimeNanoseconds" in w for w in trace.meta.warnings)
    assert trace.events["ts_ns"].to_list() == [0, 3_500]
    assert trace.events["dur_ns"].to_list() == [1_000, 500]


def test_string_pids_and_tids(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path / "strpid.json",
        [
            op("PyTorch Profiler (0)", 0, 50, pid="Spans", tid="PyTorch Profiler", cat="Trace"),
            op("aten::add", 1, 2, pid="123", tid="456"),
        ],
    )
    trace = ti.load(path, cache=False)
    rows = {r["name"]: r for r in trace.events.select("name", "pid", "tid").iter_rows(named=True)}
    assert rows["aten::add"]["pid"] == 123 and rows["aten::add"]["tid"] == 456
    assert trace.meta.pid_labels[rows["PyTorch Profiler (0)"]["pid"]] == "Spans"


def test_kind_of_each_category_handmade(tmp_path: Path) -> None:
    """Kinds come from the cat (any case), a step's name on a host cat, and words in
    unknown cats; an event without a cat is "other". Hand-made events, one per case."""
    no_cat = op("no cat", 9, 1)
    del no_cat["cat"]
    cases = {
        "aten::mm": ("cpu_op", "cpu_op"),
        "ProfilerStep#3": ("Operator", "user_annotation"),  # 2021-era step on a host cat
        "ProfilerStep#4": ("my_host_cat", "user_annotation"),
        "ProfilerStep#5": ("kernel", "kernel"),  # a GPU event keeps its kind whatever its name
        "cudaLaunchKernel": ("CUDA_Runtime", "runtime"),
        "cuLaunchKernel": ("vendor_driver_api", "driver"),
        "gemm": ("Kernel", "kernel"),
        "frame": ("python_function", "python"),
        "misc": ("something_else", "other"),
    }
    events = [op(name, i, 1, cat=cat) for i, (name, (cat, _)) in enumerate(cases.items())]
    path = write_trace(tmp_path / "kinds.json", [*events, no_cat])
    trace = ti.load(path, cache=False)
    kinds = dict(
        trace.events.select(
            pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String)
        ).iter_rows()
    )
    assert kinds == {name: kind for name, (_, kind) in cases.items()} | {"no cat": "other"}


def test_missing_or_zero_durations(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "dur.json", [op("a", 1, None), op("b", 2, 0), op("c", 3, -4)])
    trace = ti.load(path, cache=False)
    assert trace.events["dur_ns"].to_list() == [0, 0, 0]
    warnings = " ".join(trace.meta.warnings)
    # only "c" is negative: a zero dur is an instant, not a slip to report
    assert "1 duration events had no usable 'dur'" in warnings
    assert "1 events had a negative 'dur'; set to 0" in warnings


@pytest.mark.parametrize("dur", [-9.2e18, -9223372036854775808, -1e300, 9.2e18])
def test_durations_beyond_int64_ns_are_dropped_with_a_warning(tmp_path: Path, dur: float) -> None:
    # GIVEN a hand-made trace whose dur (µs) would overflow Int64 nanoseconds
    # (-9.2e18 was found by test_fuzz.py::test_structural_mutations)
    path = write_trace(tmp_path / "huge.json", [op("a", 1, dur), op("b", 2, 3)])
    # WHEN it is loaded THEN that dur is dropped with a warning instead of crashing
    trace = ti.load(path, cache=False)
    assert trace.events.sort("ts_ns")["dur_ns"].to_list() == [0, 3_000]
    assert "1 duration events had no usable 'dur'" in " ".join(trace.meta.warnings)


# 4.613e15 µs is 4.613e18 ns, just above 2**62 ns (4.6117e18): the limit is in ns, to the digit.
@pytest.mark.parametrize("dur", [-9.2e18, -1e300, 9.2e18, 4.613e15, -4.613e15])
def test_linker_range_check_covers_negative_durations(tmp_path: Path, dur: float) -> None:
    # GIVEN the raw columns of a hand-made trace whose dur (µs) is then set beyond ±2**62 ns,
    # as another reader could hand them over (the JSON reader already nulls such values)
    from traceinsight.trace.link import link
    from traceinsight.trace.reader import read_bytes, read_trace

    path = write_trace(tmp_path / "raw.json", [op("a", 1, 2), op("b", 2, 3)])
    raw = read_trace(path, read_bytes(path))
    durations = raw.take_durations()
    durations = durations.with_columns(
        pl.when(pl.col("name") == "a")
        .then(pl.lit(dur))
        .otherwise(pl.col("dur"))
        .cast(durations["dur"].dtype)
        .alias("dur")
    )
    # WHEN the linker gets them THEN that dur is dropped with a warning, not cast into Int64
    linked = link(durations, raw.counters, raw.memory, None)
    assert linked.events.sort("ts_ns")["dur_ns"].to_list() == [0, 3_000]
    assert any("1 duration events had no usable 'dur'" in w for w in linked.warnings)
    assert not any("negative" in w for w in linked.warnings)


def test_counters_at_2_62_ns_or_beyond_are_dropped_like_events(tmp_path: Path) -> None:
    # GIVEN the raw columns of a hand-made trace with a counter at exactly 2**62 ns, where event
    # times stop being usable (4611686018427388 µs is 2**62 ns to the double)
    from traceinsight.trace.link import link
    from traceinsight.trace.reader import read_bytes, read_trace

    events = [
        op("a", 1, 2),
        {"ph": "C", "name": "mem", "pid": 0, "ts": 5, "args": {"bytes": 1}},
        {"ph": "C", "name": "mem", "pid": 0, "ts": 7, "args": {"bytes": 2}},
    ]
    path = write_trace(tmp_path / "counters.json", events)
    raw = read_trace(path, read_bytes(path))
    counters = raw.counters.with_columns(
        pl.when(pl.col("ts") == 7)
        .then(pl.lit(4611686018427388.0))
        .otherwise(pl.col("ts"))
        .alias("ts")
    )
    # WHEN the linker gets them THEN that counter is left out, the other kept
    linked = link(raw.take_durations(), counters, raw.memory, 0)
    assert linked.counters["ts_ns"].to_list() == [5_000]


def test_kernels_carry_the_host_context_of_their_launch_or_none(tmp_path: Path) -> None:
    # GIVEN a hand-made step: a kernel launched by aten::mm inside a "forward" annotation, one
    # launched outside any op or annotation, one with no launch call in the trace; and a host
    # op between steps 1 and 2
    events = [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        op("forward", 5, 45, cat="user_annotation"),
        op("aten::mm", 10, 10),
        launch("cudaLaunchKernel", 12, 2, correlation=1),
        kernel("k_mm", 30, 5, correlation=1),
        launch("cudaLaunchKernel", 60, 2, correlation=2),
        kernel("k_bare", 70, 5, correlation=2),
        kernel("k_unlaunched", 80, 5, correlation=99),
        op("between_steps", 110, 5),
        op("ProfilerStep#2", 120, 80, cat="user_annotation"),
    ]
    trace = ti.load(write_trace(tmp_path / "context.json", events), cache=False)
    ids = dict(trace.events.select(pl.col("name").cast(pl.String), "id").iter_rows())
    k = {
        r["name"]: r
        for r in trace.kernels.with_columns(pl.col(pl.Categorical).cast(pl.String)).iter_rows(
            named=True
        )
    }
    # THEN each kernel has its launch's op, outermost op and annotation (not the step), by id
    mm = k["k_mm"]
    assert (mm["launch_name"], mm["op_name"], mm["top_op_name"], mm["annotation"]) == (
        "cudaLaunchKernel",
        "aten::mm",
        "aten::mm",
        "forward",
    )
    assert (mm["op_id"], mm["top_op_id"], mm["annotation_id"], mm["step"]) == (
        ids["aten::mm"],
        ids["aten::mm"],
        ids["forward"],
        1,
    )
    # a launch under no op or annotation: no op, no annotation, still the step's
    bare = k["k_bare"]
    assert bare["launch_name"] == "cudaLaunchKernel" and bare["step"] == 1
    assert [
        bare[c]
        for c in ("op_id", "op_name", "top_op_id", "top_op_name", "annotation_id", "annotation")
    ] == [None] * 6
    # no launch call: no host context at all
    lone = k["k_unlaunched"]
    assert [
        lone[c]
        for c in ("launch_id", "launch_name", "launch_ts_ns", "launch_tid", "top_op_name", "step")
    ] == [None] * 6
    # a host op after step 1 ended and before step 2 began belongs to neither
    step_of = dict(trace.events.select(pl.col("name").cast(pl.String), "step").iter_rows())
    assert step_of["between_steps"] is None and step_of["aten::mm"] == 1
    # and host events at the top of their thread have no parent (null, not a row number)
    parent_of = dict(trace.events.select(pl.col("name").cast(pl.String), "parent").iter_rows())
    assert parent_of["ProfilerStep#1"] is None and parent_of["between_steps"] is None
    assert parent_of["aten::mm"] == ids["forward"]
    # GPU work is on no host tree: no parent, no depth
    depth_of = dict(trace.events.select(pl.col("name").cast(pl.String), "depth").iter_rows())
    assert (depth_of["ProfilerStep#1"], depth_of["aten::mm"]) == (0, 2)
    assert depth_of["k_mm"] is None and parent_of["k_mm"] is None


def test_begin_end_pairs_become_durations(tmp_path: Path) -> None:
    # GIVEN hand-made nested B/E pairs on one thread and one E too many
    events = [
        {"ph": "B", "name": "outer", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 10},
        {"ph": "B", "name": "inner", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 12},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 15},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 20},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 30},
    ]
    # WHEN they are loaded
    trace = ti.load(write_trace(tmp_path / "be.json", events), cache=False)
    # THEN the pairs become nested durations and the lone E is reported, not invented
    rows = {r["name"]: r for r in trace.events.iter_rows(named=True)}
    assert rows["outer"]["dur_ns"] == 10_000 and rows["inner"]["dur_ns"] == 3_000
    assert rows["inner"]["parent"] == rows["outer"]["id"]
    assert any("without a partner" in w for w in trace.meta.warnings)


def test_json_array_form_and_gzip_by_magic(tmp_path: Path) -> None:
    path = tmp_path / "array.trace"  # no telling suffix: gzip is detected by its bytes
    path.write_bytes(gzip.compress(json.dumps([op("a", 1, 2), op("b", 2, 1)]).encode()))
    trace = ti.load(path, cache=False)
    assert trace.events["name"].cast(pl.String).to_list() == ["a", "b"]


def test_counters_land_in_the_counters_frame(tmp_path: Path) -> None:
    events = [
        op("a", 0, 100),
        {
            "ph": "C",
            "name": "nvml.utilization",
            "pid": 0,
            "ts": 50.5,
            "args": {"gpu_pct": 97, "memory_pct": 40.5},
        },
    ]
    trace = ti.load(write_trace(tmp_path / "c.json", events, baseTimeNanoseconds=0), cache=False)
    rows = trace.counters.sort("series").to_dicts()
    assert [(r["series"], r["value"], r["ts_ns"], r["device"]) for r in rows] == [
        ("gpu_pct", 97.0, 50_500, 0),
        ("memory_pct", 40.5, 50_500, 0),
    ]


@pytest.mark.parametrize("layout", ["compact", "indented", "events_first"])
@pytest.mark.parametrize("chunk_bytes", [700, 4096, 65536])
def test_chunked_decode_matches_single_piece(
    layout: str, chunk_bytes: int, monkeypatch: pytest.MonkeyPatch, sample_trace, tmp_path: Path
) -> None:
    # GIVEN the same real trace, written three ways: compact "},{" (each piece is copied),
    # indented (pieces are cut in place), and with the header keys after the events array
    # (found when the last piece is decoded)
    whole = sample_trace("train_compiled")
    doc = json.loads(gzip.decompress(sample_path("train_compiled").read_bytes()))
    if layout == "events_first":
        doc = {"traceEvents": doc.pop("traceEvents")} | doc
    text = json.dumps(
        doc,
        indent=1 if layout == "indented" else None,
        separators=None if layout == "indented" else (",", ":"),
    )
    path = tmp_path / "trace.json"
    path.write_text(text)
    # WHEN it is decoded in pieces of chunk_bytes
    monkeypatch.setattr(chunking, "CHUNK_BYTES", chunk_bytes)
    chunked = ti.load(path, cache=False)
    # THEN every frame and the header fields equal those of the whole file read at once
    assert chunked.events.equals(whole.events)
    assert chunked.kernels.equals(whole.kernels)
    assert chunked.counters.equals(whole.counters)
    assert chunked.meta.base_time_ns == whole.meta.base_time_ns
    assert chunked.meta.devices == whole.meta.devices
    assert chunked.meta.capture == whole.meta.capture
    assert chunked.meta.warnings == whole.meta.warnings


def test_traceevents_key_inside_an_earlier_value_is_not_taken_for_the_real_one(
    tmp_path: Path,
) -> None:
    # hand-made: a header value holds its own "traceEvents" list before the real key
    events = [op(f"op{i}", i * 10, 5) for i in range(50)]
    path = tmp_path / "decoy.json"
    decoy = {
        "schemaVersion": 1,
        "notes": {"traceEvents": [op("decoy", 0, 1)]},
        "traceEvents": events,
        "traceName": "t",
    }
    path.write_text(json.dumps(decoy))
    trace = ti.load(path, cache=False)
    assert trace.events["name"].cast(pl.String).to_list() == [f"op{i}" for i in range(50)]


def test_chunk_cut_inside_nested_objects_falls_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a hand-made trace whose args hold a list of objects, so "}, {" also occurs
    # inside events
    events = [
        op(f"op{i}", i * 10, 5, args={"External id": i, "list": [{"a": 1}, {"b": 2}] * 20})
        for i in range(200)
    ]
    path = write_trace(tmp_path / "nested.json", events)
    # WHEN it is decoded in pieces small enough that some cut lands inside an event
    monkeypatch.setattr(chunking, "CHUNK_BYTES", 300)
    trace = ti.load(path, cache=False)
    # THEN the bad cuts are undone and every event is read once
    assert trace.events.height == 200
    assert trace.events["external_id"].to_list() == list(range(200))


def test_lenient_args_keep_good_fields(tmp_path: Path) -> None:
    # GIVEN hand-made events with a bad grid and a ts written as a string
    events = [
        launch("cudaLaunchKernel", 1, 1, correlation=3),
        kernel("k", 3, 2, correlation=3, extra={"grid": "oops", "registers per thread": 32}),
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "x",
            "pid": HOST_PID,
            "tid": MAIN_TID,
            "ts": "7.5",
            "dur": 1,
        },
    ]
    # WHEN they are loaded
    trace = ti.load(
        write_trace(tmp_path / "lenient.json", events, baseTimeNanoseconds=0), cache=False
    )
    # THEN the bad fields alone are dropped (the kernel keeps its other args and its link) and
    # the numeric string is read as a number
    k = trace.kernels.row(0, named=True)
    assert (
        k["registers_per_thread"] == 32
        and k["grid"] is None
        and k["launch_name"] == "cudaLaunchKernel"
    )
    assert trace.events.filter(pl.col("name").cast(pl.String) == "x")["ts_ns"].to_list() == [7_500]


def test_lenient_args_keep_raw_shapes_and_unknown_phases_are_counted(tmp_path: Path) -> None:
    # GIVEN hand-made events: a bad sequence number beside good shapes, and a phase no
    # reader knows
    events = [
        op(
            "aten::mm",
            1,
            2,
            args={
                "Input Dims": [[2, 3], [3, 4]],
                "Input type": ["float", "float"],
                "Sequence number": "x",
            },
        ),
        {"ph": "Z", "name": "mystery", "pid": HOST_PID, "tid": MAIN_TID, "ts": 2},
        op("aten::add", 4, 1),
    ]
    # WHEN they are loaded
    trace = ti.load(write_trace(tmp_path / "odd.json", events, baseTimeNanoseconds=0), cache=False)
    # THEN the shapes survive as compact JSON, the bad field is dropped with a warning, and the
    # unknown phase is counted but makes no row
    mm = trace.events.filter(pl.col("name").cast(pl.String) == "aten::mm").row(0, named=True)
    assert mm["input_dims"] == "[[2,3],[3,4]]" and mm["input_types"] == '["float","float"]'
    assert mm["seq_num"] is None
    assert trace.meta.phase_counts["Z"] == 1 and trace.events.height == 2
    assert any("malformed args" in w for w in trace.meta.warnings)


@pytest.mark.parametrize("rank", [0, 1])
def test_two_gpu_ddp_trace_keeps_rank_and_collectives(rank: int, sample_trace) -> None:
    trace = sample_trace(f"ddp_train.rank{rank}")
    assert trace.meta.rank == rank
    assert trace.meta.distributed["world_size"] == 2 and trace.meta.distributed["backend"] == "nccl"
    nccl = trace.kernels.filter(pl.col("name").cast(pl.String).str.starts_with("ncclDevKernel"))
    assert nccl.height > 0
    assert (nccl["collective_name"].cast(pl.String) == "allreduce").all()
    assert (nccl["group_size"] == 2).all() and (nccl["in_msg_nelems"] > 0).all()
    # the all-reduces run on their own stream, beside the compute stream
    assert nccl["stream"].n_unique() == 1
    assert (
        nccl["stream"][0]
        not in trace.kernels.filter(~pl.col("name").cast(pl.String).str.starts_with("nccl"))[
            "stream"
        ]
        .unique()
        .to_list()
    )


@pytest.mark.parametrize("inflater", ["default", "zlib"])
def test_gzip_text_is_the_same_whichever_inflater(
    inflater: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import zlib

    from traceinsight.errors import TraceFormatError
    from traceinsight.trace import source

    if inflater == "zlib":  # as on a platform without ISA-L's wheels
        monkeypatch.setattr(source, "_inflate", zlib)
    else:
        import importlib.util

        expected = "isal.isal_zlib" if importlib.util.find_spec("isal") else "zlib"
        assert source._inflate.__name__ == expected
    # GIVEN a real gzip trace, the same written as two gzip members, and a corrupt one
    real = sample_path("train_compiled").read_bytes()
    text = gzip.decompress(real)
    two_members = tmp_path / "two.json.gz"
    two_members.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    corrupt = tmp_path / "corrupt.json.gz"
    corrupt.write_bytes(real[:-6] + bytes(b ^ 0xFF for b in real[-6:-4]) + real[-4:])  # its CRC
    # WHEN they are read
    # THEN the text is the file's, byte for byte, and the corrupt one is named as such
    for path in (sample_path("train_compiled"), two_members):
        data = source.read_bytes(path)
        assert bytes(data[:]) == text
    with pytest.raises(TraceFormatError, match="corrupt gzip data"):
        source.read_bytes(corrupt)
