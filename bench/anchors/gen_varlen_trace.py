#!/usr/bin/env python3
"""Generates the allocation trace of BERT-like inference with variable batch shapes, without a GPU.

    python3 bench/anchors/gen_varlen_trace.py [--seed 1] [--batches 120] [--attention sdpa|math]
        [--lengths uniform|lognormal|bimodal|zipf] [--max-batch 32] > data/NAME.trace

The trace is a model of what PyTorch's caching allocator is asked for when a BERT-base-sized
encoder (Hugging Face `BertModel` structure: embeddings, 12 layers of self-attention and a
feed-forward block with post-LayerNorm, pooler) runs inference in eval mode under
`torch.no_grad()` on float32, one batch at a time, each batch of a random shape
(`batch` uniform in 1..32, `seq` uniform in 16..512, from Python's `random.Random(seed)`),
as an inference server fed requests of any length (`--lengths` draws them from other
distributions: traces that no pool was tuned on, for testing on fresh seeds). Every tensor an eager forward pass
creates is one allocation, freed when its last Python reference goes away (the order is
that of the forward code), with sizes rounded up to 512 B as PyTorch's block sizes are:

- parameters first (allocated once, `.cuda()` of the model, freed at the end): word
  embeddings 30522 x H, positions 512 x H, token types 2 x H, per layer the Q/K/V/output
  projections (H x H + H), the feed-forward (H x 4H + 4H, 4H x H + H) and two LayerNorms
  (2 x H each), the pooler (H x H + H), H = 768;
- per batch: the token ids and the attention mask (batch x seq int64), the embeddings
  (word, token type, their sum, plus positions, LayerNorm with its mean and rstd of
  batch x seq float32), then per layer Q, K, V (batch x seq x H), the attention (`sdpa`:
  one batch x seq x H output, the fused kernel keeps no scores; `math`: scores and
  softmax of batch x 12 x seq x seq and a context copy), the output projection, residual
  sum and LayerNorm, the feed-forward's two batch x seq x 4H tensors, its projection,
  residual and LayerNorm; the pooler's two batch x H tensors; everything freed at the end
  of the batch.

Sizes thus span 512 B to batch x 12 x seq^2 x 4 B (402 MB with `math` at 32 x 512), with a
new size set for every batch: the case where an allocator's cache does not match the next
request. Output: the format of data/README.md (a '#' JSON header, `a <id> <bytes>`,
`f <id>`). Deterministic for a given seed and options.
"""
import argparse
import json
import random
import sys

H, HEADS, LAYERS, INTER, VOCAB, MAXPOS = 768, 12, 12, 3072, 30522, 512


class Trace:
    def __init__(self):
        self.lines, self.next, self.live, self.cur, self.peak = [], 0, {}, 0, 0

    def a(self, nbytes):
        size = max(512, (nbytes + 511) // 512 * 512)
        i = self.next
        self.next += 1
        self.live[i] = size
        self.cur += size
        self.peak = max(self.peak, self.cur)
        self.lines.append(f"a {i} {size}")
        return i

    def f(self, *ids):
        for i in ids:
            self.cur -= self.live.pop(i)
            self.lines.append(f"f {i}")


def layernorm(t, b, s):
    """LayerNorm of a batch x seq x H tensor: the output, with mean and rstd freed at once."""
    out, mean, rstd = t.a(b * s * H * 4), t.a(b * s * 4), t.a(b * s * 4)
    t.f(mean, rstd)
    return out


def forward(t, b, s, attention):
    ids, mask = t.a(b * s * 8), t.a(b * s * 8)
    we, tte = t.a(b * s * H * 4), t.a(b * s * H * 4)
    e1 = t.a(b * s * H * 4)
    t.f(we, tte)
    e2 = t.a(b * s * H * 4)
    t.f(e1)
    hidden = layernorm(t, b, s)
    t.f(e2)
    for _ in range(LAYERS):
        q, k, v = t.a(b * s * H * 4), t.a(b * s * H * 4), t.a(b * s * H * 4)
        if attention == "math":
            scores = t.a(b * HEADS * s * s * 4)
            probs = t.a(b * HEADS * s * s * 4)
            t.f(scores)
            ctx = t.a(b * s * H * 4)
            context = t.a(b * s * H * 4)  # transpose + reshape copies
            t.f(ctx, probs)
        else:
            context = t.a(b * s * H * 4)
        t.f(q, k, v)
        dense = t.a(b * s * H * 4)
        res = t.a(b * s * H * 4)
        t.f(dense)
        att = layernorm(t, b, s)
        t.f(res, context)
        inter = t.a(b * s * INTER * 4)
        act = t.a(b * s * INTER * 4)
        t.f(inter)
        out = t.a(b * s * H * 4)
        t.f(act)
        res2 = t.a(b * s * H * 4)
        t.f(out)
        new = layernorm(t, b, s)
        t.f(res2, att, hidden)
        hidden = new
    pd = t.a(b * H * 4)
    pooled = t.a(b * H * 4)
    t.f(pd)
    t.f(hidden, pooled, ids, mask)


def shape(rng, lengths, max_batch):
    """(batch, seq) of one request batch under the distribution `lengths` (see --lengths);
    seq always within 16..512 (BERT's positions), batch within 1..max_batch."""
    if lengths == "uniform":
        return rng.randint(1, max_batch), rng.randint(16, 512)
    if lengths == "lognormal":
        s = int(rng.lognormvariate(4.16, 0.8))  # median e^4.16 = 64
        b = int(rng.lognormvariate(1.5, 0.9))
        return min(max(b, 1), max_batch), min(max(s, 16), 512)
    if lengths == "bimodal":
        if rng.random() < 0.5:
            return rng.randint(max(1, max_batch // 2), max_batch), rng.randint(16, 64)
        return rng.randint(1, max(1, max_batch // 4)), rng.randint(384, 512)
    # zipf: seq = 16 * k, k in 1..32 with weight 1/rank over a seeded order of the k
    ks = list(range(1, 33))
    order = random.Random(0x5EED).sample(ks, len(ks))
    k = rng.choices(order, weights=[1 / (r + 1) for r in range(len(order))])[0]
    return rng.randint(1, max_batch), 16 * k


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batches", type=int, default=120)
    ap.add_argument("--attention", choices=["sdpa", "math"], default="sdpa")
    ap.add_argument("--name", default=None)
    ap.add_argument(
        "--lengths",
        choices=["uniform", "lognormal", "bimodal", "zipf"],
        default="uniform",
        help="distribution of seq (and batch): uniform (the default above); lognormal (most "
        "requests short, a long tail, median seq 64); bimodal (short chat turns 16..64 or "
        "long documents 384..512, half each); zipf (a few lengths far more frequent: seq a "
        "multiple of 16 drawn with weight 1/rank)",
    )
    ap.add_argument("--max-batch", type=int, default=32, help="largest batch (batch is drawn from 1..max-batch)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    t = Trace()
    params = [t.a(VOCAB * H * 4), t.a(MAXPOS * H * 4), t.a(2 * H * 4), t.a(H * 4), t.a(H * 4)]
    for _ in range(LAYERS):
        for _ in range(4):
            params += [t.a(H * H * 4), t.a(H * 4)]
        params += [t.a(H * INTER * 4), t.a(INTER * 4), t.a(INTER * H * 4), t.a(H * 4)]
        params += [t.a(H * 4), t.a(H * 4), t.a(H * 4), t.a(H * 4)]
    params += [t.a(H * H * 4), t.a(H * 4)]
    shapes = []
    for _ in range(a.batches):
        b, s = shape(rng, a.lengths, a.max_batch)
        shapes.append([b, s])
        forward(t, b, s, a.attention)
    t.f(*params)
    name = a.name or f"bertlike_{a.attention}_varlen"
    hdr = {
        "workload": name,
        "generator": "bench/anchors/gen_varlen_trace.py",
        "args": {
            "seed": a.seed,
            "batches": a.batches,
            "attention": a.attention,
            "lengths": a.lengths,
            "max_batch": a.max_batch,
        },
        "allocs": t.next,
        "peak_live": t.peak,
        "shapes": shapes,
    }
    out = sys.stdout
    out.write("# " + json.dumps(hdr) + "\n")
    out.write("\n".join(t.lines) + "\n")


if __name__ == "__main__":
    main()
