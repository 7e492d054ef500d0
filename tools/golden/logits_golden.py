#!/usr/bin/env python3
"""Reference logits and greedy continuations of a GGUF Llama model, from HF transformers.

An implementation independent of ours: transformers loads the SAME GGUF file through the
`gguf` PyPI package (which dequantizes Q4_1 etc. to fp32 and undoes llama.cpp's Q/K row
permutation) and runs its own PyTorch Llama in fp32 on the CPU.

For every prompt the golden stores
  - prompt_ids: the prompt's token ids (from transformers' GGUF tokenizer, BOS handling as
    the file's tokenizer says); the C++ test feeds these ids directly, so it does not
    depend on our tokenizer,
  - greedy_ids: the greedy continuation (num_new_tokens tokens, argmax at every step),
  - steps: for a few generation steps i, the logits that predict greedy_ids[i] (i.e. the
    logits at sequence position len(prompt_ids) - 1 + i, computed from the prompt followed
    by greedy_ids[:i]): the top-10 ids and values, the values at a fixed sample of ids
    (`sample_ids`, the same for every step), the full-vocabulary L2 norm, and the margin
    between the best and second-best logit (a small margin warns of a near-tie),
  - greedy_margins: that best-minus-second margin at every generation step.

The C++ test's relative error is ||ours - ref|| / ||ref|| over all stored values (top-10 and
sample ids) of a step.

Usage (venv outside the repo with torch, transformers, gguf, numpy):
  /opt/golden-venv/bin/python tools/golden/logits_golden.py \
      --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --out tests/data/model_smollm2_135m_q4_1.json
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
    # A long prompt (~300 tokens, five 64-token KV blocks with the continuation): RoPE at
    # larger positions and attention over several blocks.
    " ".join([
        "The history of the printing press begins in the fifteenth century, when Johannes",
        "Gutenberg combined movable metal type, oil-based ink and a wooden screw press into a",
        "system that could produce books far faster than scribes copying by hand. Before that,",
        "most books in Europe were written out on parchment in monasteries, and a single Bible",
        "could take a scribe more than a year to finish. Gutenberg's workshop in Mainz printed",
        "about one hundred and eighty copies of the Bible around 1455, and within fifty years",
        "printing shops had opened in more than two hundred and fifty cities across Europe.",
        "Prices of books fell sharply, literacy spread beyond the clergy and the nobility, and",
        "scholars could compare identical copies of the same text for the first time. The",
        "Reformation, the Scientific Revolution and the rise of newspapers all depended on",
        "cheap printed material. Over the following centuries the technology kept improving:",
        "iron presses replaced wooden ones, steam power drove rotary presses in the nineteenth",
        "century, and the Linotype machine set whole lines of type from a keyboard. In the",
        "twentieth century offset lithography became the standard method for large print runs,",
        "and at the end of the century desktop publishing and laser printers put typesetting",
        "on every office desk. Today most text is read on screens, yet the basic ideas of",
        "standard fonts, page layout and mass distribution still come from the printing press.",
        "Historians often summarise its importance in one sentence:",
    ]),
]
NUM_SAMPLE_IDS = 50
TOP_K = 10


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="path to the .gguf file")
    p.add_argument("--out", required=True, help="output JSON path")
    p.add_argument("--new-tokens", type=int, default=40)
    p.add_argument("--steps", default="0,1,2,8,16,31,39",
                   help="generation steps whose logits are stored")
    return p.parse_args()


def full_logits(model, ids):
    """fp32 logits [len(ids), vocab] of one full forward pass over `ids` (no KV cache)."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].to(torch.float64).numpy()


def greedy(model, prompt_ids, num_new_tokens):
    """Greedy continuation; each step recomputes the whole sequence (no cache reuse)."""
    ids = list(prompt_ids)
    for _ in range(num_new_tokens):
        ids.append(int(np.argmax(full_logits(model, ids)[-1])))
    return ids[len(prompt_ids):]


def step_record(row, step, sample_ids):
    order = np.argsort(-row, kind="stable")
    top = order[:TOP_K]
    return {
        "step": step,
        "top_ids": [int(i) for i in top],
        "top_logits": [float(row[i]) for i in top],
        "sample_logits": [float(row[i]) for i in sample_ids],
        "norm": float(np.linalg.norm(row)),
        "margin": float(row[order[0]] - row[order[1]]),
    }


def rope_theta(cfg):
    """rope_theta from either the old (`rope_theta`) or new (`rope_parameters`) config."""
    params = getattr(cfg, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:
        return params["rope_theta"]
    return getattr(cfg, "rope_theta", 10000.0)


def main():
    args = parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    if max(steps) >= args.new_tokens:
        sys.exit(f"--steps {args.steps} reaches past --new-tokens {args.new_tokens}")
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model_dir, model_file = os.path.split(os.path.abspath(args.model))
    tokenizer = AutoTokenizer.from_pretrained(model_dir, gguf_file=model_file)
    model = AutoModelForCausalLM.from_pretrained(model_dir, gguf_file=model_file,
                                                 dtype=torch.float32)
    model.eval()
    cfg = model.config
    vocab_size = model.get_output_embeddings().weight.shape[0]
    # Fixed, hash-free sample of ids spread over the vocabulary.
    sample_ids = [int(i) for i in np.linspace(0, vocab_size - 1, NUM_SAMPLE_IDS).round()]

    cases = []
    for text in PROMPTS:
        prompt_ids = tokenizer(text, add_special_tokens=True)["input_ids"]
        new_ids = greedy(model, prompt_ids, args.new_tokens)
        logits = full_logits(model, prompt_ids + new_ids)
        rows = logits[len(prompt_ids) - 1:]  # row i predicts new_ids[i]
        records = [step_record(rows[s], s, sample_ids) for s in steps]
        top2 = np.sort(rows[:len(new_ids)], axis=1)[:, -2:]
        cases.append({
            "prompt": text,
            "prompt_ids": [int(i) for i in prompt_ids],
            "greedy_ids": [int(i) for i in new_ids],
            "greedy_text": tokenizer.decode(new_ids),
            "greedy_margins": [float(m) for m in top2[:, 1] - top2[:, 0]],
            "steps": records,
        })
        print(f"{text!r} -> {tokenizer.decode(new_ids)!r}", file=sys.stderr)

    from importlib.metadata import version
    golden = {
        "model_file": model_file,
        "generator": "tools/golden/logits_golden.py",
        "reference": (f"transformers {version('transformers')}, torch {version('torch')}, "
                      f"gguf {version('gguf')}, fp32 on CPU"),
        "config": {
            "vocab_size": int(vocab_size),
            "hidden_size": int(cfg.hidden_size),
            "num_layers": int(cfg.num_hidden_layers),
            "num_heads": int(cfg.num_attention_heads),
            "num_kv_heads": int(cfg.num_key_value_heads),
            "rope_theta": float(rope_theta(cfg)),
            "rms_eps": float(cfg.rms_norm_eps),
            "tie_word_embeddings": bool(cfg.tie_word_embeddings),
        },
        "top_k": TOP_K,
        "num_new_tokens": args.new_tokens,
        "sample_ids": sample_ids,
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
