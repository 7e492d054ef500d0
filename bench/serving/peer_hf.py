#!/usr/bin/env python3
"""HF transformers peer of the serving benchmark: eager `generate` on the same GGUF file.

Loads the model with transformers (`from_pretrained(dir, gguf_file=name)`: the GGUF weights are
dequantized into torch tensors), builds prompts of exactly --prompt-tokens token ids (the
filler text of `flashserve-cli load`, tokenized and repeated, as the load client does) and
runs greedy `generate` with min_new_tokens = max_new_tokens = --new-tokens (EOS ignored)
for each batch size. Prints the table of bench/serving/run.sh (summarize.format_table):
output tokens/s = batch * new_tokens / time of the whole generate; TTFT = the time of a
generate of one new token on the same batch; ITL = (time - TTFT) / (new_tokens - 1), a mean
per step (one figure, so p50 = p99).

Offline: HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE are set before transformers is imported.
Needs torch, transformers and the PyPI `gguf` package (transformers reads GGUF with it).

Usage: peer_hf.py --model MODEL.gguf [--batch-sizes 1,256] [--prompt-tokens 128]
                  [--new-tokens 128] [--dtype bfloat16] [--device cuda] [--out table.md]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import format_table  # noqa: E402

# The load client's filler text (tools/cli/load.cc kFillerText).
FILLER_TEXT = "The quick brown fox jumps over the lazy dog while the sun sets behind the hills. "


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="the GGUF file")
    p.add_argument("--batch-sizes", default="1,256")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", help="also write the table here")
    args = p.parse_args()
    try:
        args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    except ValueError:
        p.error(f"--batch-sizes {args.batch_sizes!r}: expected comma-separated integers")
    if min(args.batch_sizes) < 1 or args.prompt_tokens < 1 or args.new_tokens < 2:
        p.error("batch sizes and --prompt-tokens must be >= 1, --new-tokens >= 2")
    if not os.path.isfile(args.model):
        p.error(f"--model {args.model}: no such file")
    return args


def synchronize(torch, device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_generate(torch, model, input_ids, new_tokens, device):
    """Seconds of one greedy generate of exactly new_tokens tokens, and the tokens made."""
    synchronize(torch, device)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             pad_token_id=model.config.eos_token_id)
    synchronize(torch, device)
    return time.perf_counter() - start, out.shape[1] - input_ids.shape[1]


def main():
    args = parse_args()
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        sys.exit(f"peer_hf.py: {e} (needs torch, transformers and gguf)")
    folder, name = os.path.split(os.path.abspath(args.model))
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=getattr(torch, args.dtype))
    model.to(args.device).eval()
    filler = tokenizer(FILLER_TEXT, add_special_tokens=False)["input_ids"]
    prompt = [filler[i % len(filler)] for i in range(args.prompt_tokens)]

    warm = torch.tensor([prompt], device=args.device)
    timed_generate(torch, model, warm, 2, args.device)
    rows = []
    for batch in args.batch_sizes:
        input_ids = torch.tensor([prompt] * batch, device=args.device)
        ttft, _ = timed_generate(torch, model, input_ids, 1, args.device)
        total, made = timed_generate(torch, model, input_ids, args.new_tokens, args.device)
        itl_ms = 1e3 * (total - ttft) / (args.new_tokens - 1)
        rows.append({"concurrency": batch, "requests": batch, "ok": batch,
                     "tokens_per_s": batch * made / total, "ttft_p50": 1e3 * ttft, "ttft_p99": 1e3 * ttft,
                     "itl_p50": itl_ms, "itl_p99": itl_ms, "tokens_per_request": float(made)})
        print(f"batch {batch}: {made} new tokens per sequence in {total:.2f} s", file=sys.stderr)
    label = (f"HF transformers {transformers.__version__} eager generate, torch {torch.__version__}, "
             f"{args.dtype}, {os.path.basename(args.model)} (concurrency = batch size)")
    table = format_table(label, rows)
    print(table)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(table)
    return 0 if all(r["tokens_per_request"] == args.new_tokens for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
