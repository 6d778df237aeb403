#!/usr/bin/env python3
"""Records allocation traces of real PyTorch inference with varying batch shapes, on a GPU.

    OUT=/tmp/traces python3 bench/anchors/record_trace.py [WORKLOAD...]

Workloads (default: all that import; each one is skipped with a message if its package
is missing; nothing is downloaded, the models are built with random weights):

  encoder_infer_varlen   a 12-layer `torch.nn.TransformerEncoder` (d_model 768, 12 heads,
                         feed-forward 3072, as BERT-base), 200 batches in eval mode under
                         `torch.no_grad()`, batch 1..32 and sequence 16..512 drawn from a
                         seeded generator (PyTorch only)
  gpt2_generate_varlen   GPT-2 small (transformers), 24 greedy generations with its KV cache,
                         batch 1..16, prompt 16..256 tokens, 16..128 new tokens, seeded
  bert_infer_varlen      BERT-base (transformers), 60 batches, batch 1..32, sequence 16..512,
                         as the `bert_infer_varlen` of the anchors' record_traces.py
  bertsmall_infer_varlen a smaller BERT (transformers; hidden 512, 8 layers, 8 heads,
                         feed-forward 2048, random weights), 100 batches, batch 1..32,
                         sequence 16..512, seed 1: a variable-length trace of the same kind
                         as bert_infer_varlen that is not it (the pools are tuned on it)

The trace is what PyTorch's caching allocator was asked for, taken the same way as
data/gpt2_train.trace and data/resnet50_train.trace: `torch.cuda.memory._record_memory_history`
around the run, then every `alloc` and `free_completed` of device 0's trace in
`torch.cuda.memory._snapshot()`, in order (sizes are PyTorch's block sizes, rounded up to
512 B). Format (data/README.md): '#' comment lines (a JSON header with the workload and
PyTorch's own peak figures), then `a <id> <bytes>` and `f <id>` lines; blocks alive at the
end are not freed by the trace.

Writes OUT/<workload>.trace (OUT defaults to ./traces) and prints one JSON header per trace.
Run on the GPU machine; copy the trace into data/ (and its row into data/README.md) to make
it part of `cumem-bench replay` and bench/anchors/anchor_bench.py.
"""
import json
import os
import sys
import time

import torch

OUT = os.environ.get("OUT", "traces")
SEED = 0


def record(name, fn):
    """Runs `fn` with the memory history on and writes OUT/<name>.trace."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=10_000_000)
    t0 = time.time()
    shapes = fn()
    torch.cuda.synchronize()
    dt = time.time() - t0
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats()
    live, lines, next_id = {}, [], 0
    for e in snap["device_traces"][0]:
        if e["action"] == "alloc":
            live[e["addr"]] = next_id
            lines.append(f"a {next_id} {e['size']}")
            next_id += 1
        elif e["action"] == "free_completed":
            i = live.pop(e["addr"], None)
            if i is not None:
                lines.append(f"f {i}")
    hdr = {
        "workload": name,
        "seconds": round(dt, 3),
        "allocs": next_id,
        "live_at_end": len(live),
        "shapes": shapes,
        "torch_peak_allocated": stats["allocated_bytes.all.peak"],
        "torch_peak_reserved": stats["reserved_bytes.all.peak"],
        "torch_num_alloc_retries": stats["num_alloc_retries"],
        "torch_version": torch.__version__,
        "device": torch.cuda.get_device_name(),
    }
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"{name}.trace")
    with open(path, "w") as f:
        f.write("# " + json.dumps(hdr) + "\n")
        f.write("\n".join(lines) + "\n")
    print(json.dumps({k: v for k, v in hdr.items() if k != "shapes"}), flush=True)
    return path


def draw(g, lo, hi):
    """An integer in [lo, hi] from generator `g`."""
    return int(torch.randint(lo, hi + 1, (1,), generator=g))


def encoder_infer_varlen():
    layer = torch.nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False).cuda().eval()
    g = torch.Generator().manual_seed(SEED)
    shapes = []
    with torch.no_grad():
        for _ in range(200):
            bs, seq = draw(g, 1, 32), draw(g, 16, 512)
            shapes.append([bs, seq])
            x = torch.randn(bs, seq, 768, device="cuda")
            y = model(x)
            y.sum().item()  # consume the output, as a server returns it
            del x, y
    del model
    return shapes


def gpt2_generate_varlen():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024)
    model = GPT2LMHeadModel(cfg).cuda().eval()
    g = torch.Generator().manual_seed(SEED)
    shapes = []
    with torch.no_grad():
        for _ in range(24):
            bs, prompt, new = draw(g, 1, 16), draw(g, 16, 256), draw(g, 16, 128)
            shapes.append([bs, prompt, new])
            x = torch.randint(0, cfg.vocab_size, (bs, prompt), generator=g).cuda()
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=new, min_new_tokens=new,
                                 do_sample=False, pad_token_id=0)
            out.cpu()
            del x, out
    del model
    return shapes


def bert_infer_varlen():
    from transformers import BertConfig, BertModel

    cfg = BertConfig()
    model = BertModel(cfg).cuda().eval()
    g = torch.Generator().manual_seed(SEED)
    shapes = []
    with torch.no_grad():
        for _ in range(60):
            bs, seq = draw(g, 1, 32), draw(g, 16, 512)
            shapes.append([bs, seq])
            x = torch.randint(0, cfg.vocab_size, (bs, seq), generator=g).cuda()
            model(x)
            del x
    del model
    return shapes


def bertsmall_infer_varlen():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, intermediate_size=2048)
    model = BertModel(cfg).cuda().eval()
    g = torch.Generator().manual_seed(1)
    shapes = []
    with torch.no_grad():
        for _ in range(100):
            bs, seq = draw(g, 1, 32), draw(g, 16, 512)
            shapes.append([bs, seq])
            x = torch.randint(0, cfg.vocab_size, (bs, seq), generator=g).cuda()
            model(x)
            del x
    del model
    return shapes


WORKLOADS = ["encoder_infer_varlen", "gpt2_generate_varlen", "bert_infer_varlen", "bertsmall_infer_varlen"]

if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("record_trace.py: no CUDA GPU (the traces are PyTorch's GPU allocations)")
    which = sys.argv[1:] or WORKLOADS
    status = 0
    for w in which:
        if w not in WORKLOADS:
            sys.exit(f"record_trace.py: {w!r} is not a workload; accepted: {', '.join(WORKLOADS)}")
        try:
            record(w, globals()[w])
        except ImportError as ex:
            print(f"SKIPPED {w}: {ex}", file=sys.stderr, flush=True)
        except Exception as ex:  # keep going: the other workloads may still record
            print(f"FAILED {w}: {ex!r}", file=sys.stderr, flush=True)
            status = 1
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
    sys.exit(status)
