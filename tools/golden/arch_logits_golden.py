#!/usr/bin/env python3
"""Reference logits of small random-weight GGUF files of every architecture we serve, from
HF transformers (an implementation independent of ours).

For each case, `flashserve-make-gguf` writes a random-weight file (deterministic bytes for a
given seed and shape; the golden records the file's FNV-1a 64 hash, which the C++ test checks
on the file it writes itself with the same options). HF transformers loads the SAME file
(`AutoModelForCausalLM.from_pretrained(dir, gguf_file=name, dtype=torch.float32)`: the `gguf`
package dequantizes, transformers undoes llama.cpp's Q/K row permutation for llama files)
and runs its own PyTorch model in fp32 on the CPU, once per prompt, without a cache.

Llama 3 RoPE scaling: transformers' GGUF loader does not read `rope_freqs.weight`; the
script sets the llama3 rope parameters of the preset on the config and rebuilds the rotary
embedding with HF's own llama3 code, then checks that HF's frequencies equal the file's
factors applied to the unscaled ones (to 1e-6), so the reference uses HF's implementation
of the scaling, and the file's tensor is checked against it. Its last prompt has 8,250
tokens: attention then spans more than 8,192 positions, where the scaling changes the
rotation of the low frequencies most.

Gemma 3: transformers' loader reads neither the global layers' linear RoPE scaling nor the
query scale; the script gives HF the file's scaling as HF's own rope parameters and uses
head_dim 256, for which HF's default query_pre_attn_scalar (256) is llama.cpp's scale.

Per prompt the golden stores the token ids, the positions, and at the last token: the top-10
ids and logits, the logits at 64 fixed ids spread over the vocabulary, the L2 norm of the
full logit row and the best-minus-second margin, plus the greedy argmax.

Usage (venv outside the repo; torch's PyPI wheel is large):
  python3 -m venv "$VENV"
  "$VENV"/bin/pip install torch transformers==5.24.0 gguf==0.19.0 accelerate numpy
  "$VENV"/bin/python tools/golden/arch_logits_golden.py \
      --make-gguf build/bin/flashserve-make-gguf \
      --tokenizer-from models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --out tests/data/model_arch_random.json
"""
import argparse
import importlib.metadata
import json
import os
import subprocess
import tempfile

import numpy as np
import torch
from transformers import AutoModelForCausalLM

# The shapes: small (2 layers, hidden 256) so that HF on the CPU and our CPU runner take a
# second; head_dim 64 or 128 so that the CUDA runner (64 and 128 only) can run them too.
COMMON = ["--layers", "2", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
          "--ffn", "512", "--context", "16384", "--type", "q8_0", "--seed", "7"]
CASES = {
    "llama3": COMMON + ["--preset", "llama-3.1-8b", "--tied-embeddings", "false"],
    "mistral": COMMON + ["--arch", "mistral", "--rope-theta", "1000000"],
    "qwen2": COMMON + ["--preset", "qwen2.5-0.5b"],
    "qwen3": COMMON + ["--preset", "qwen3-0.6b", "--head-dim", "128"],
    # Six layers: five local (a window of 40 keys, RoPE base 1e4) and the global sixth (base
    # 1e6, linear x8), head_dim 256 as the real models (the query scale HF takes from its
    # query_pre_attn_scalar, 256 by default, is then llama.cpp's 1 / sqrt(head_dim)).
    "gemma3": ["--preset", "gemma-3-4b", "--layers", "6", "--hidden", "256", "--heads", "4",
               "--kv-heads", "2", "--ffn", "512", "--context", "16384", "--type", "q8_0",
               "--seed", "7", "--sliding-window", "40"],
    # Fused attn_qkv ([Q; K; V], GQA 4/2) and ffn_up ([gate; up]), head_dim 96 as Phi-3-mini.
    # The preset's window (2,047) is past every prompt here: HF's GGUF loader ignores it.
    "phi3": ["--preset", "phi-3-mini", "--layers", "2", "--hidden", "384", "--heads", "4",
             "--kv-heads", "2", "--ffn", "512", "--context", "4096", "--type", "q8_0",
             "--seed", "7"],
}
# What transformers' GGUF loader does not read from a gemma3 file: the global layers' linear
# RoPE scaling (rope.scaling.*), given here as HF's own rope parameters; the local layers'
# base (10,000) and the layer pattern (every sixth global) are HF's defaults, as llama.cpp's.
HF_KWARGS = {
    "gemma3": {"rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
}
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
# transformers' GGUF loader does not know the "mistral" architecture name (gguf-py has no
# such arch): HF runs a twin file written with --arch llama, whose tensors are the same bytes
# (only the metadata keys' prefix differs); the C++ test runs the mistral file itself.
HF_TWIN_ARCH = {"mistral": "llama"}
PROMPT_LENGTHS = [1, 17, 300]
LONG_PROMPT = 8250  # the Llama 3 case's last prompt: positions past 8192
NUM_SAMPLE_IDS = 64


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def make_file(make_gguf, tokenizer_from, args, path):
    subprocess.run([make_gguf, "--tokenizer-from", tokenizer_from, "--out", path,
                    "--threads", "1", *args], check=True)
    with open(path, "rb") as f:
        return fnv1a64(f.read())


def apply_llama3_rope(model, file_factors):
    """Rebuilds HF's rotary embedding with its llama3 scaling; checks it against the file."""
    config = model.config
    before = model.model.rotary_emb.inv_freq.detach().double().clone()
    params = dict(getattr(config, "rope_parameters", None) or {})
    params.update(LLAMA3_ROPE)
    params.setdefault("rope_theta", getattr(config, "rope_theta", None) or params.get("rope_theta"))
    config.rope_parameters = params
    config.rope_scaling = params
    model.model.rotary_emb = type(model.model.rotary_emb)(config=config)
    after = model.model.rotary_emb.inv_freq.detach().double()
    expected = before / torch.tensor(file_factors, dtype=torch.float64)
    err = ((after - expected).abs() / expected.abs()).max().item()
    assert err < 1e-6, f"HF's llama3 frequencies differ from the file's factors by {err}"
    return err


def prompts_for(case, vocab, rng):
    out = []
    for n in PROMPT_LENGTHS:
        out.append({"ids": rng.integers(0, vocab, n).tolist(), "positions": list(range(n))})
    if case == "llama3":  # attention across more than 8192 positions
        out.append({"ids": rng.integers(0, vocab, LONG_PROMPT).tolist(),
                    "positions": list(range(LONG_PROMPT))})
    return out


def run_case(case, path, file_hash, rng):
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 dtype=torch.float32, **HF_KWARGS.get(case, {}))
    model.eval()
    if case == "gemma3":  # the file's window and head size reached HF's config
        assert model.config.sliding_window == 40 and model.config.head_dim == 256
        assert model.config.layer_types.count("full_attention") == 1
    record = {"case": case, "make_gguf_args": CASES[case], "file_fnv1a64": f"{file_hash:016x}"}
    if case == "llama3":
        from gguf import GGUFReader
        reader = GGUFReader(path)
        factors = [t for t in reader.tensors if t.name == "rope_freqs.weight"][0].data.tolist()
        record["hf_llama3_frequency_error"] = apply_llama3_rope(model, factors)
    vocab = model.config.vocab_size
    sample_ids = np.linspace(0, vocab - 1, NUM_SAMPLE_IDS).round().astype(int).tolist()
    record["sample_ids"] = sample_ids
    record["prompts"] = []
    for p in prompts_for(case, vocab, rng):
        with torch.no_grad():
            logits = model(torch.tensor([p["ids"]]), position_ids=torch.tensor([p["positions"]]),
                           use_cache=False).logits[0, -1].double()
        top = torch.topk(logits, 10)
        p.update({
            "top_ids": top.indices.tolist(),
            "top_logits": top.values.tolist(),
            "sample_logits": logits[sample_ids].tolist(),
            "norm": logits.norm().item(),
            "margin": (top.values[0] - top.values[1]).item(),
            "argmax": int(top.indices[0]),
        })
        record["prompts"].append(p)
    return record


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--make-gguf", required=True)
    ap.add_argument("--tokenizer-from", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)  # one summation order: the command reproduces the file
    rng = np.random.default_rng(20261201)
    versions = {m: importlib.metadata.version(m) for m in ("torch", "transformers", "gguf", "numpy")}
    golden = {"producer": "tools/golden/arch_logits_golden.py", "versions": versions, "cases": []}
    with tempfile.TemporaryDirectory() as tmp:
        for case, case_args in CASES.items():
            path = os.path.join(tmp, f"{case}.gguf")
            file_hash = make_file(args.make_gguf, args.tokenizer_from, case_args, path)
            if case in HF_TWIN_ARCH:
                path = os.path.join(tmp, f"{case}-as-{HF_TWIN_ARCH[case]}.gguf")
                make_file(args.make_gguf, args.tokenizer_from,
                          case_args + ["--arch", HF_TWIN_ARCH[case]], path)
            golden["cases"].append(run_case(case, path, file_hash, rng))
            print(case, [round(p["margin"], 4) for p in golden["cases"][-1]["prompts"]])
    with open(args.out, "w") as f:
        json.dump(golden, f, indent=1)


if __name__ == "__main__":
    main()
