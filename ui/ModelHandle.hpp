#pragma once
// A model ready for translation: weights (a published copy or a loaded
// checkpoint, CPU, eval mode) together with the vocabularies and token level
// that give its ids a meaning. Shared, immutable: safe to hand to any thread.
#include <memory>
#include <string>

#include "core/decode.hpp"

namespace attnviz::ui {

struct ModelHandle {
    std::shared_ptr<Seq2Seq> model;
    std::shared_ptr<const Vocab> srcVocab, tgtVocab;
    TokenLevel level = TokenLevel::word;
    ModelConfig config;
    std::string corpusName;
    int epoch = 0;            ///< epochs done when the weights were taken
    int64_t globalStep = 0;   ///< batches done when the weights were taken

    bool valid() const { return model && *model && srcVocab && tgtVocab; }
};

using ModelHandlePtr = std::shared_ptr<const ModelHandle>;

}  // namespace attnviz::ui
