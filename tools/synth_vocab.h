#pragma once
// Self-consistent synthetic vocabularies for synthetic GGUF models.
#include "engine/model/tokenizer.h"

namespace vkmoe {

class GgufWriter;

// Exactly n_vocab (>= 512) distinct tokens.
//  Bpe: 256 byte tokens, merges learned from a small built-in English text
//       (qwen2 pre-tokenizer), filler merges, then <|endoftext|> (bos, pad),
//       <|im_start|>, <|im_end|> (eos) as control tokens.
//  Spm: <unk>, <s>, </s>, <0x00>..<0xFF>, single characters, then pieces
//       learned from the same text and filler pieces, scored so that earlier
//       pieces merge first.
// Throws Error for n_vocab < 512. Deterministic.
VocabData make_synth_vocab(TokenizerKind kind, int n_vocab);
// Writes make_synth_vocab(kind, n_vocab) as tokenizer.ggml.* metadata.
void add_synth_tokenizer(GgufWriter& w, TokenizerKind kind, int n_vocab);

}  // namespace vkmoe
