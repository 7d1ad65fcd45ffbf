#!/usr/bin/env python3
"""Writes a llama-architecture GGUF model with seeded random weights for goodput's tests.

The tokenizer (tokens, scores, types, special ids) is copied from a vocab-only GGUF shipped in
the llama.cpp tree, and a ChatML chat template is added so `/v1/chat/completions` works. The
weights are random, so the text is gibberish, but llama-server does real tokenization, slots,
batching and streaming with it. Used by scripts/llama-server.sh; needs the PyPI packages
`gguf` and `numpy`.
"""
import argparse

import gguf
import numpy as np

# width, layers, heads, feed-forward width. "small" is wide and deep enough that prefill time
# grows visibly with prompt length on a 2-core CPU; "tiny" is for fast functional checks.
SIZES = {
    "tiny": dict(embd=64, layers=2, heads=4, ffn=128),
    "small": dict(embd=512, layers=8, heads=8, ffn=1408),
}
CONTEXT = 8192
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def field_value(field):
    """The Python value of a GGUFReader field (scalar, string, or array of either)."""
    kinds = field.types
    if kinds[0] == gguf.GGUFValueType.ARRAY:
        if kinds[1] == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    part = field.parts[field.data[0]]
    if kinds[0] == gguf.GGUFValueType.STRING:
        return bytes(part).decode("utf-8")
    return part.tolist()[0]


def copy_tokenizer(vocab_path, writer):
    """Copies every `tokenizer.*` key of the vocab-only file; returns the vocabulary size."""
    reader = gguf.GGUFReader(vocab_path)
    n_vocab = None
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        value = field_value(field)
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(name, value)
            if name == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(name, value)
        elif kind == gguf.GGUFValueType.BOOL:
            writer.add_bool(name, bool(value))
        elif kind == gguf.GGUFValueType.FLOAT32:
            writer.add_float32(name, value)
        else:
            writer.add_uint32(name, int(value))
    if n_vocab is None:
        raise SystemExit(f"{vocab_path} has no tokenizer.ggml.tokens")
    return n_vocab


def add_tensors(writer, size, n_vocab, rng):
    """Random projection weights (std 0.02) and unit norm weights, f32."""
    embd, ffn = size["embd"], size["ffn"]

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    ones = np.ones(embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", rand(n_vocab, embd))
    writer.add_tensor("output_norm.weight", ones)
    for i in range(size["layers"]):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", rand(embd, embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", rand(ffn, embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", rand(ffn, embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", rand(embd, ffn))
    # No output.weight: llama.cpp ties the output projection to token_embd.


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=sorted(SIZES), required=True)
    parser.add_argument("--vocab", required=True, help="a vocab-only ggml-vocab-*.gguf")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    size = SIZES[args.size]

    writer = gguf.GGUFWriter(args.out, "llama")
    writer.add_name(f"goodput-test-{args.size}")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(size["embd"])
    writer.add_block_count(size["layers"])
    writer.add_feed_forward_length(size["ffn"])
    writer.add_head_count(size["heads"])
    writer.add_head_count_kv(size["heads"])
    writer.add_rope_dimension_count(size["embd"] // size["heads"])
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    n_vocab = copy_tokenizer(args.vocab, writer)
    writer.add_vocab_size(n_vocab)
    writer.add_chat_template(CHATML)
    add_tensors(writer, size, n_vocab, np.random.default_rng(8))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {args.out}: {args.size}, {n_vocab} tokens")


if __name__ == "__main__":
    main()
