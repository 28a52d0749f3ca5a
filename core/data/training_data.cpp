// Preparing a corpus for training: subword pieces, filter by length, split, build vocabularies.
#include "core/data/training_data.hpp"

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/text/pretrained_tokenizer.hpp"

namespace attnviz {

namespace {

// Subword corpora are read as normalised words: train a SentencePiece model on the
// training pairs (unless one is given) and cut every pair into its pieces.
TokenizerPtr split_into_subwords(std::vector<SentencePair>& train, std::vector<SentencePair>& val,
                                 const TrainConfig& config, TokenizerPtr tokenizer) {
    if (!tokenizer) {
        std::vector<std::string> sentences;
        sentences.reserve(2 * train.size());
        for (const auto& p : train) {
            sentences.push_back(detokenize(p.src, TokenLevel::word));
            sentences.push_back(detokenize(p.tgt, TokenLevel::word));
        }
        tokenizer = Tokenizer::train_subword(sentences, SubwordOptions::from(config));
    }
    for (auto* pairs : {&train, &val})
        for (auto& p : *pairs) {
            p.src = tokenizer->split_words(p.src);
            p.tgt = tokenizer->split_words(p.tgt);
            p.alignment.reset();  // a word alignment does not hold for pieces
        }
    return tokenizer;
}

}  // namespace

TrainingData prepare_data(const Corpus& corpus_in, const TrainConfig& config, TokenizerPtr tokenizer) {
    config.validate();
    // A pretrained model cuts sentences as they are with its own tokenizer: a corpus read so is
    // ready; another (a built-in task's words) is joined back into text and cut again.
    const bool pretrained = tokenizer && tokenizer->pretrained();
    Corpus recut;
    if (pretrained && !corpus_in.model_pieces) {
        recut.name = corpus_in.name;
        recut.skipped = corpus_in.skipped;
        recut.level = TokenLevel::subword;
        recut.model_pieces = true;
        for (const auto& p : corpus_in.pairs) {
            SentencePair q{tokenizer->encode(detokenize(p.src, corpus_in.level), false),
                           tokenizer->encode_target(detokenize(p.tgt, corpus_in.level), false)};
            q.line = p.line;
            recut.pairs.push_back(std::move(q));
        }
    }
    const Corpus& corpus = pretrained && !corpus_in.model_pieces ? recut : corpus_in;
    if (tokenizer && tokenizer->level() != corpus.level)
        throw ConfigError("corpus " + quote(corpus.name, quote_path_max) + " is tokenised into " + level_noun(corpus.level) +
                          " but the model works on " + level_noun(tokenizer->level()));
    TrainingData d;
    d.name = corpus.name;
    d.level = corpus.level;
    d.skipped_lines = corpus.skipped.size();
    if (corpus.level == TokenLevel::subword && !corpus.model_pieces) {
        // Split first and train the model on the training side only; lengths count pieces.
        std::vector<SentencePair> train, val;
        std::tie(train, val) = split_train_val(corpus.pairs, config.val_fraction, config.seed, config.split_shuffle);
        tokenizer = split_into_subwords(train, val, config, tokenizer);
        const size_t max_len = static_cast<size_t>(config.max_length);
        d.train = filter_by_length(train, max_len);
        d.val = filter_by_length(val, max_len);
        if (d.train.empty() && d.val.empty())
            throw ConfigError("corpus " + quote(corpus.name, quote_path_max) + ": no pair is short enough for max length " +
                              std::to_string(config.max_length));
    } else {
        // Positions rather than copies: each pair is copied once, into train or val (a corpus
        // of 200,000 pairs is ~100 MB of token strings; see docs/corpora.md).
        const auto max_length = static_cast<size_t>(config.max_length);
        std::vector<size_t> keep;
        keep.reserve(corpus.pairs.size());
        for (size_t i = 0; i < corpus.pairs.size(); ++i) {
            const SentencePair& p = corpus.pairs[i];
            if (max_length == 0 || (p.src.size() <= max_length && p.tgt.size() <= max_length)) keep.push_back(i);
        }
        if (keep.empty())
            throw ConfigError("corpus " + quote(corpus.name, quote_path_max) + ": no pair is short enough for max length " +
                              std::to_string(config.max_length));
        const auto [train, val] = split_indices(keep.size(), config.val_fraction, config.seed, config.split_shuffle);
        d.train.reserve(train.size());
        d.val.reserve(val.size());
        for (size_t i : train) d.train.push_back(corpus.pairs[keep[i]]);
        for (size_t i : val) d.val.push_back(corpus.pairs[keep[i]]);
    }
    d.tokenizer = tokenizer ? tokenizer : Tokenizer::for_level(corpus.level);
    if (d.train.empty()) throw ConfigError("corpus " + quote(corpus.name, quote_path_max) + ": no training pairs left after the split");
    // One side at a time: only one side's tokens are copied for Vocab::build at once.
    auto side = [&](std::vector<std::string> SentencePair::*member) {
        std::vector<std::vector<std::string>> sentences;
        sentences.reserve(d.train.size() + (config.vocab_includes_val ? d.val.size() : 0));
        for (const auto& p : d.train) sentences.push_back(p.*member);
        if (config.vocab_includes_val)
            for (const auto& p : d.val) sentences.push_back(p.*member);
        return Vocab::build(sentences, config.min_freq, static_cast<size_t>(config.max_vocab));
    };
    d.src_vocab = side(&SentencePair::src);
    d.tgt_vocab = side(&SentencePair::tgt);
    return d;
}

void add_language_codes(std::vector<SentencePair>& pairs, const Tokenizer& tokenizer, const std::string& source_lang,
                        const std::string& target_lang) {
    const auto& pt = tokenizer.pretrained();
    if (!pt) return;
    const PretrainedTokenizerKind kind = pt->kind();
    if (kind != PretrainedTokenizerKind::m2m100 && kind != PretrainedTokenizerKind::nllb &&
        kind != PretrainedTokenizerKind::mbart50)
        return;
    const std::string src = !source_lang.empty() ? source_lang : pt->default_source_language();
    const std::string tgt = !target_lang.empty() ? target_lang : pt->default_target_language();
    if (tgt.empty()) {
        const auto langs = pt->target_languages();
        throw ConfigError("fine-tuning this model needs its target language, which its tokenizer_config.json does not name "
                          "(\"tgt_lang\"): give --target-lang (the model has " + std::to_string(langs.size()) + ", e.g. " +
                          (langs.empty() ? std::string("fr") : langs.front()) + ")");
    }
    // attnviz's names of the codes (the model's tokens but for a few: core/text/tokenizer.hpp).
    const std::string src_code = tokenizer.pretrained_name(pt->language_token(src, false), false);
    const std::string tgt_code = tokenizer.pretrained_name(pt->language_token(tgt, true), true);
    for (auto& p : pairs) {
        if (p.src.empty() || p.src.front() != src_code) p.src.insert(p.src.begin(), src_code);
        if (p.tgt.empty() || p.tgt.front() != tgt_code) p.tgt.insert(p.tgt.begin(), tgt_code);
        p.alignment.reset();  // positions moved by one: a word alignment no longer holds
    }
}

}  // namespace attnviz
