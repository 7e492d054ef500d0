#!/usr/bin/env python3
"""One cuDNN SDPA launch (after two warm-ups) per prefill grid row of length S, for ncu: the
peer's side of `attention_bench --profile=S` (bench/attention/NOTES.md, thirty-seventh
session). Rows: batch 16384 / S, h32 d64 and h16 d128 (attention_bench's grid), bf16, dense
[b, h, s, d] as peers_sdpa.py feeds cuDNN; non-causal then causal, d128 then d64 (the order
of attention_bench --profile=S). Under ncu, filter the kernels with
`--kernel-name regex:cudnn` (two launches a row are the warm-ups: --launch-skip / -count).

    ncu --kernel-name regex:cudnn ... python3 bench/attention/peers_profile.py --seq 512
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=8192, help="sequence length S (divides 16384)")
    ap.add_argument("--warmups", type=int, default=2)
    a = ap.parse_args()
    if a.seq < 64 or 16384 % a.seq != 0:
        ap.error("--seq must divide 16384 and be >= 64")
    for causal in (False, True):
        for heads, head_dim in ((16, 128), (32, 64)):
            q, k, v = (torch.randn(16384 // a.seq, heads, a.seq, head_dim, device="cuda",
                                   dtype=torch.bfloat16) for _ in range(3))
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                for _ in range(a.warmups + 1):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            print(f"s{a.seq} h{heads} d{head_dim} {'causal' if causal else 'full'}", flush=True)


if __name__ == "__main__":
    main()
