#include "ui/translate/PrecisionCopy.hpp"

#include <exception>

#include "core/model/families.hpp"

namespace attnviz::ui {

PrecisionCopy::PrecisionCopy(TranslationModelPtr model, InferencePrecision wanted)
    : m_model(std::move(model)), m_wanted(wanted) {
    if (!m_model || m_wanted == InferencePrecision::fp32) {
        m_tried = true;
        return;
    }
    const std::string name = precision_name(m_wanted);
    if (m_model->config().arch == ModelArch::rnn) {
        m_reason = name + " is not available for the RNN encoder-decoder (its fused GRU kernels read float32 "
                          "weights): translating in fp32";
        m_tried = true;
    } else if (!m_model->device().is_cpu()) {
        m_reason = name + " runs on the CPU only and the model is on " + m_model->device().str() +
                   ": translating in fp32";
        m_tried = true;
    }
}

TranslationModelPtr PrecisionCopy::convert() {
    if (inference_precision(*m_model->network()) != InferencePrecision::fp32) {
        m_reason = "the model was converted to " + precision_name(inference_precision(*m_model->network())) +
                   " when it was opened: translating with it as it is";
        return nullptr;
    }
    try {
        // A network over the model's own tensors (no copy); converting it gives its parameters new
        // data and leaves the model's alone, so the model stays float32 and trainable.
        Network network = share_network(*m_model->network());
        network->set_head_gates(copied_head_gates(*m_model->network()));  // masked heads stay masked
        set_inference_precision(*network, m_wanted);
        return std::make_shared<const TranslationModel>(network, m_model->src_vocab_ptr(), m_model->tgt_vocab_ptr(),
                                                        m_model->tokenizer_ptr(), m_model->trained_with(),
                                                        m_model->history(), m_model->corpus_name());
    } catch (const std::exception& e) {
        m_reason = precision_name(m_wanted) + " could not be used (" + e.what() + "): translating in fp32";
        return nullptr;
    }
}

TranslationModelPtr PrecisionCopy::resolve(const std::vector<AttentionMapId>& maskedHeads) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_tried) {
        m_converted = convert();
        m_tried = true;
    }
    const TranslationModelPtr base = m_converted ? m_converted : m_model;
    if (!base || maskedHeads.empty()) return base;
    if (!m_masked || m_maskedFor != maskedHeads) {
        m_masked = base->with_heads_masked(maskedHeads);
        m_maskedFor = maskedHeads;
    }
    return m_masked;
}

std::string PrecisionCopy::fallbackReason() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_reason;
}

std::string PrecisionCopy::takeFallbackNote() {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_noted || m_reason.empty()) return {};
    m_noted = true;
    return m_reason;
}

bool PrecisionCopy::converted() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_converted != nullptr;
}

}  // namespace attnviz::ui
