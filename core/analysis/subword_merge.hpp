#pragma once
// Subword pieces merged back into words, for reading and exporting attention:
// the columns of one source word are summed (the attention the word received),
// the rows of one target word are averaged (so each merged row is still a
// distribution that sums to 1).
#include <cstddef>
#include <string>
#include <vector>

#include "core/analysis/attribution_result.hpp"
#include "core/decode/translation.hpp"

namespace attnviz {

/// The note exports and the heatmap carry for merged attention (Translation::merged).
extern const char* const merged_words_note;  ///< "words (columns summed, rows averaged)"

/// Consecutive pieces that make one word.
struct WordGroups {
    std::vector<std::string> words;           ///< the word of each group ("▁при" + "вет" -> "привет")
    std::vector<std::vector<size_t>> members;  ///< the piece indices of each group, ascending
};

/// Groups SentencePiece pieces into words: a piece starting with "▁" (U+2581) begins
/// a word, any other piece continues the one before. Special tokens (<eos>, <pad>,
/// <bos>, and <unk> unless `unknown` says what it stood for) are groups of their own, and so
/// is a pretrained model's markup such as BART's "<s>" or "<mask>" (not a byte piece "<0xE4>").
/// `unknown` lists, in order, the pieces shown as <unk> (Translation::unknown): one
/// that began with "▁" begins a word. A word's text is its pieces joined, "▁" dropped
/// (a lone "▁" that nothing continues stays "▁"), and pieces named by their bytes (a
/// byte-level BPE model's parts of a character, "\xE2" "\x98" "\x83") made the text they
/// spell ("☃") where it is UTF-8.
WordGroups group_subwords(const std::vector<std::string>& pieces, const std::vector<std::string>& unknown = {});

/// Merges an attention matrix [target pieces][source pieces]: merged[r][c] is the
/// mean over the pieces of target word r of the sum over the pieces of source word c.
/// Rows that summed to 1 still do; with one piece per target word, every column's
/// total is kept. Throws Error when the groups do not cover the matrix.
std::vector<std::vector<float>> merge_attention(const std::vector<std::vector<float>>& attention,
                                                const WordGroups& target, const WordGroups& source);

/// The translation with its pieces merged into words, every hypothesis: src_tokens and
/// each hypothesis' tokens are words, attention merged (merge_attention), context_norm
/// averaged and step_log_prob summed per word (a word's log-probability); raw scores,
/// ranks, ids, top-k candidates and the beam tree are dropped (they belong to pieces);
/// forced_steps counts the words wholly forced, first_divergence is the word holding
/// that step. merged = merged_words_note. An empty translation stays empty.
Translation merge_subwords(const Translation& t);

/// An attribution of a subword translation with its pieces merged into words, as the heatmap
/// merges attention (merge_subwords above), so both show the same rows and columns. A word's
/// value is log p(word) = the sum of its pieces' log p, so its attribution is the sum over its
/// pieces' rows -- exact for gradient x input, integrated gradients and occlusion (each is
/// additive in the value attributed), and for saliency an upper bound of the word's gradient
/// norm (the triangle inequality). Columns: a source word's pieces are summed, except saliency,
/// whose column is the L2 norm over the word's pieces (the gradient's norm over the word's
/// embeddings, exact). Attention rows are merged as merge_attention does; baseline_log_prob and
/// completeness_error are summed. Target-prefix attributions, top-k and contrast tokens belong
/// to pieces and are dropped. `unknown`: Translation::unknown (which <unk> began a word).
SentenceAttribution merge_subwords(const SentenceAttribution& a, const std::vector<std::string>& unknown = {});

}  // namespace attnviz
