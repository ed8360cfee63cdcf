"""Record inference decode loops the way generation is usually profiled: a plain
``torch.profiler.profile()`` around the loop, no schedule and no ``prof.step()``.

On a CUDA machine:   python3 sample_traces/make_decode_samples.py --out sample_traces/decode
On a CPU-only one:   python3 sample_traces/make_decode_samples.py --smoke --out /tmp/decode

- ``decode_eager``: a decoder-only transformer (8 layers, d=1024, 16 heads, bf16) with a static
  KV cache, batch 1, 16 prompt tokens fed one by one, then 64 generated: one forward per token.
- ``decode_graph``: the same loop, each token's forward replayed from one captured CUDA graph.
- ``hf_generate``: Hugging Face ``GPT2LMHeadModel`` built from a config (12 layers, d=768),
  ``generate(max_new_tokens=64)`` greedy after a 32-token prompt (a real prefill, then decode).

Before profiling, each loop's latency per token is timed outside the profiler with CUDA events
(mean over the generated tokens, after a warm-up run). The table goes to ``decode_timings.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import time_step

PROMPT, NEW = 16, 64


class Layer(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        q, k, v = self.qkv(self.ln1(x)).view(b, 1, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        a = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
        x = x + self.out(a.transpose(1, 2).reshape(b, 1, -1))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Decoder(nn.Module):
    """One token in, next-token logits out; the KV cache and the attention mask are static."""

    def __init__(self, layers: int, d: int, heads: int, vocab: int, max_len: int, dev: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.emb, self.pos_emb = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab, bias=False)
        self.to(dev, dtype)
        shape = (1, heads, max_len, d // heads)
        self.k = [torch.zeros(shape, device=dev, dtype=dtype) for _ in range(layers)]
        self.v = [torch.zeros(shape, device=dev, dtype=dtype) for _ in range(layers)]
        self.mask = torch.zeros(1, 1, 1, max_len, device=dev, dtype=torch.bool)

    def forward(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.mask.index_fill_(3, pos, True)
        x = self.emb(token) + self.pos_emb(pos)[None]
        for layer, k, v in zip(self.layers, self.k, self.v, strict=True):
            x = layer(x, k, v, pos, self.mask)
        return self.head(x[:, -1])


def decode_loop(model: Decoder, dev: torch.device, graph: bool):  # type: ignore[no-untyped-def]
    token = torch.zeros(1, 1, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    step = model
    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                model(token, pos)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            logits_out = model(token, pos)

        def replay(t: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
            g.replay()
            return logits_out

        step = replay  # type: ignore[assignment]

    @torch.no_grad()
    def run() -> None:
        model.mask.zero_()
        token.zero_()
        for i in range(PROMPT + NEW):
            pos.fill_(i)
            with torch.profiler.record_function("decode_step"):
                logits = step(token, pos)
                token.copy_(logits.argmax(-1, keepdim=True))

    return run


def profiled(fn, path: Path, dev: torch.device) -> Path:  # type: ignore[no-untyped-def]
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        fn()
        if dev.type == "cuda":
            torch.cuda.synchronize()
    raw = path.with_suffix("")  # .json
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "decode")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    dev = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    layers, d, heads = (2, 64, 4) if args.smoke else (8, 1024, 16)
    model = Decoder(layers, d, heads, vocab=32000, max_len=PROMPT + NEW, dev=dev, dtype=dtype).eval()
    rows = []
    loops = [("decode_eager", False)] + ([("decode_graph", True)] if cuda else [])
    for name, graph in loops:
        run = decode_loop(model, dev, graph)
        ms = time_step(run, cuda, warmup=1, iters=1)  # one timed run after a warm-up run
        path = profiled(run, args.out / f"{name}.json.gz", dev)
        tokens = PROMPT + NEW
        rows.append({"name": name, "forwards": tokens, "ms_total": round(ms, 3), "ms_per_token": round(ms / tokens, 4), "bytes": path.stat().st_size})
        print(f"{name}: {ms / tokens:.4f} ms/token ({tokens} forwards, {ms:.2f} ms)  {path.name}", flush=True)
    try:
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(n_layer=2 if args.smoke else 12, n_embd=64 if args.smoke else 768, n_head=4 if args.smoke else 12)
        hf = GPT2LMHeadModel(cfg).to(dev, dtype).eval()
        ids = torch.randint(0, cfg.vocab_size, (1, 32), device=dev)

        @torch.no_grad()
        def generate() -> None:
            hf.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, pad_token_id=0)

        ms = time_step(generate, cuda, warmup=1, iters=1)
        path = profiled(generate, args.out / "hf_generate.json.gz", dev)
        rows.append({"name": "hf_generate", "forwards": NEW, "ms_total": round(ms, 3), "ms_per_token": round(ms / NEW, 4), "bytes": path.stat().st_size})
        print(f"hf_generate: {ms / NEW:.4f} ms/token ({NEW} new tokens after a 32-token prompt, {ms:.2f} ms)  {path.name}", flush=True)
    except ImportError as exc:
        print(f"hf_generate skipped: {exc}")
    (args.out / "decode_timings.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
