#!/usr/bin/env python3
"""vkmoe against Hugging Face transformers on random-initialised models.

For each architecture: a tiny HF model with random weights (fixed seed) is
saved, converted to GGUF (F32) with llama.cpp's own converter
(convert_hf_to_gguf.py from the llama.cpp source tree), run by vkmoe
(`vkmoe logits`, CPU reference and GPU backends), and compared position by
position with the HF model's float32 logits on the same token ids.

Usage: scripts/hf_compare.py VKMOE_BINARY LLAMA_CPP_DIR OUTDIR [arch ...]
LLAMA_CPP_DIR holds convert_hf_to_gguf.py, conversion/ and gguf-py/.
The converter needs a tokenizer: a byte-level BPE of 256 byte tokens plus the
special tokens the converter looks up is written beside the weights; its
pre-tokenizer check (a hash of known tokenizers) is answered with "gpt-2".
"""
import json
import math
import os
import subprocess
import sys

import torch

VK, LLAMA, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
WANT = sys.argv[4:]
sys.path.insert(0, os.path.join(LLAMA, "gguf-py"))
sys.path.insert(0, LLAMA)

TOKENS = [5, 77, 300, 12, 450, 9, 131, 260, 17, 401, 3, 222]
VOCAB = 512


def tiny_configs():
    import transformers as tf
    out = {}
    common = dict(vocab_size=VOCAB, hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False)
    if hasattr(tf, "Qwen3MoeConfig"):
        out["qwen3moe"] = (tf.Qwen3MoeConfig(num_hidden_layers=2, intermediate_size=512, moe_intermediate_size=128,
                                             num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
                                             rope_theta=1e6, **common), tf.Qwen3MoeForCausalLM)
    if hasattr(tf, "Glm4MoeConfig"):
        out["glm4moe"] = (tf.Glm4MoeConfig(num_hidden_layers=3, intermediate_size=512, moe_intermediate_size=128,
                                           n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                                           first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                                           n_group=1, topk_group=1, partial_rotary_factor=0.5, attention_bias=True,
                                           use_qk_norm=False, rope_theta=1e6, **common), tf.Glm4MoeForCausalLM)
    if hasattr(tf, "GptOssConfig"):
        cfg = tf.GptOssConfig(num_hidden_layers=4, intermediate_size=256, num_local_experts=8,
                              num_experts_per_tok=2, sliding_window=4, rope_theta=150000.0,
                              rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                            "truncate": True, "original_max_position_embeddings": 128},
                              layer_types=["sliding_attention", "full_attention"] * 2, **common)
        out["gpt-oss"] = (cfg, tf.GptOssForCausalLM)
    # scoring_func: real DeepSeek-V3 configs name it (the converter writes expert_gating_func from it);
    # transformers' DeepseekV3Config leaves it out.
    mla = dict(vocab_size=VOCAB, hidden_size=256, num_attention_heads=4, num_key_value_heads=4,
               max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False, num_hidden_layers=3,
               intermediate_size=384, moe_intermediate_size=128, n_routed_experts=16, num_experts_per_tok=4,
               first_k_dense_replace=1, kv_lora_rank=64, qk_rope_head_dim=32, qk_nope_head_dim=48,
               v_head_dim=48, rope_theta=10000.0)
    if hasattr(tf, "DeepseekV3Config"):  # V3: q bottleneck, sigmoid scores, selection bias, groups, scaling
        out["deepseek2"] = (tf.DeepseekV3Config(q_lora_rank=96, n_shared_experts=1, routed_scaling_factor=2.5,
                                                n_group=4, topk_group=2, norm_topk_prob=True, scoring_func="sigmoid",
                                                **mla),
                            tf.DeepseekV3ForCausalLM)
    if hasattr(tf, "DeepseekV2Config"):  # V2-Lite: no q bottleneck, softmax, YaRN with mscale_all_dim
        out["deepseek2-lite"] = (tf.DeepseekV2Config(q_lora_rank=None, n_shared_experts=2, routed_scaling_factor=1.0,
                                                     topk_method="greedy", norm_topk_prob=False,
                                                     rope_scaling={"type": "yarn", "rope_type": "yarn", "factor": 8.0,
                                                                   "original_max_position_embeddings": 512,
                                                                   "beta_fast": 32.0, "beta_slow": 1.0,
                                                                   "mscale": 0.707, "mscale_all_dim": 0.707},
                                                     **mla), tf.DeepseekV2ForCausalLM)
    return out


def write_tokenizer(d):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import PreTrainedTokenizerFast
    byte_chars = pre_tokenizers.ByteLevel.alphabet()
    vocab = {c: i for i, c in enumerate(sorted(byte_chars))}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "[gMASK]", "<sop>", "<|user|>", "<|observation|>", "<|assistant|>", "<|return|>",
                "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|im_start|>", "<|im_end|>"]
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>", bos_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": specials})
    fast.save_pretrained(d)


def convert(d, gguf):
    from conversion import base
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
    import convert_hf_to_gguf as cv
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", d, "--outfile", gguf, "--outtype", "f32"]
    try:
        cv.main()
    finally:
        sys.argv = argv


def compare(got, want, n_vocab):
    rel, top1, mx = [], 0, 0.0
    for t in range(len(TOKENS)):
        g, w = got[t * n_vocab:(t + 1) * n_vocab], want[t]
        num = sum((a - b) ** 2 for a, b in zip(g, w))
        den = sum(b * b for b in w)
        rel.append(math.sqrt(num / den))
        mx = max(mx, max(abs(a - b) for a, b in zip(g, w)))
        top1 += max(range(n_vocab), key=lambda i: g[i]) == max(range(n_vocab), key=lambda i: w[i])
    return max(rel), mx, top1


def main():
    os.makedirs(OUT, exist_ok=True)
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    results = {}
    for name, (cfg, cls) in tiny_configs().items():
        if WANT and name not in WANT:
            continue
        try:
            run_one(name, cfg, cls, results)
        except Exception as e:  # one architecture's failure does not hide the others
            print(f"{name}: failed: {type(e).__name__}: {e}")
            results[name] = {"error": f"{type(e).__name__}: {e}"}
    with open(os.path.join(OUT, "hf_compare.json"), "w") as fh:
        json.dump(results, fh, indent=1)


def run_one(name, cfg, cls, results):
    import array
    torch.manual_seed(0)
    model = cls(cfg).float().eval()
    with torch.no_grad():  # biases and sinks are zero at init: make them matter
        for pname, p in list(model.named_parameters()) + list(model.named_buffers()):
            if pname.endswith("bias") or "sinks" in pname:
                p.normal_(0, 0.5)
            if pname.endswith("e_score_correction_bias"):  # transformers masks other groups' experts
                p.abs_()  # with 0, not -inf: keep the eligible experts' scores above that
    d = os.path.join(OUT, name + "-hf")
    model.save_pretrained(d, safe_serialization=True)
    write_tokenizer(d)
    gguf = os.path.join(OUT, name + ".gguf")
    convert(d, gguf)
    with torch.no_grad():
        logits = model(torch.tensor([TOKENS])).logits[0].float().tolist()
    for backend in ("cpu", "gpu"):
        f32 = os.path.join(OUT, f"{name}-{backend}.f32")
        r = subprocess.run([VK, "logits", "-m", gguf, "--tokens", ",".join(map(str, TOKENS)), "-o", f32,
                            "--backend", backend, "-c", "64"], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name} {backend}: vkmoe failed: {r.stderr.strip()}")
            results[f"{name}/{backend}"] = {"error": r.stderr.strip()}
            continue
        got = array.array("f")
        with open(f32, "rb") as fh:
            got.frombytes(fh.read())
        rel, mx, top1 = compare(got, logits, VOCAB)
        print(f"{name:9s} {backend}: max rel L2 {rel:.2e}, max abs {mx:.2e}, top-1 {top1}/{len(TOKENS)}")
        results[f"{name}/{backend}"] = {"rel_l2": rel, "max_abs": mx, "top1": top1, "n": len(TOKENS)}


main()
