#pragma once
// The model the Translate tab's translations run with when its Precision setting is int8 or bf16
// (issue 49 item 1; the CLI's --precision, core/model/inference_precision.hpp).
//
// The app trains and saves the very model it translates with, so the model is never converted in
// place: a PrecisionCopy makes a converted copy of it when a translation first needs one, on the
// worker thread that runs that translation (never the GUI thread), and keeps it for the next ones.
// The copy shares the network's float tensors that stay float (norms, biases, position tables)
// and holds converted ones of its own for the rest (share_network, then set_inference_precision on
// that network only), so no second float copy of the weights is ever made. One PrecisionCopy
// belongs to one model and one precision: the panel makes a new one when either changes (a
// training snapshot, a model opened, the setting changed), and the old copy goes with the old
// object once no translation holds it.
//
// When no copy can be made -- the RNN (its fused GRU kernels read float32 weights), a model on the
// GPU (conversion runs on the CPU only), or the conversion threw -- translations run with the
// model's own fp32 weights and fallbackReason() says why.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/decode/translation_model.hpp"
#include "core/model/inference_precision.hpp"

namespace attnviz::ui {

class PrecisionCopy {
public:
    /// Nothing is converted yet (resolve() does it). Checks what needs no work at once: the RNN and
    /// a model off the CPU fall back to fp32 (fallbackReason() says so before any translation).
    PrecisionCopy(TranslationModelPtr model, InferencePrecision wanted);

    TranslationModelPtr model() const { return m_model; }
    InferencePrecision wanted() const { return m_wanted; }

    /// The model to translate with: model() for fp32 and for a fallback, else its converted copy,
    /// made by the first call (which takes as long as the conversion: call it off the GUI thread;
    /// calls from several threads at once wait for that one conversion). With heads masked, a view
    /// of it with those heads off (TranslationModel::with_heads_masked: no copy), kept for the next
    /// call with the same heads.
    TranslationModelPtr resolve(const std::vector<AttentionMapId>& maskedHeads = {});

    /// Why translations run in fp32 although wanted() is not fp32 (empty: they do not, or resolve()
    /// has not found out yet).
    std::string fallbackReason() const;
    /// fallbackReason() the first time it is asked for after it became known, empty afterwards:
    /// the status line says it once.
    std::string takeFallbackNote();
    /// Whether the converted copy exists (made by a resolve()).
    bool converted() const;

private:
    TranslationModelPtr convert();  ///< the copy, or null with m_reason set (m_mutex held)

    const TranslationModelPtr m_model;
    const InferencePrecision m_wanted;
    mutable std::mutex m_mutex;
    bool m_tried = false;                  ///< the conversion ran (or was ruled out)
    TranslationModelPtr m_converted;       ///< null: not made, or fallback
    std::string m_reason;                  ///< fallback: why
    bool m_noted = false;                  ///< takeFallbackNote() gave m_reason already
    std::vector<AttentionMapId> m_maskedFor;
    TranslationModelPtr m_masked;          ///< resolve()'s masked view for m_maskedFor
};

using PrecisionCopyPtr = std::shared_ptr<PrecisionCopy>;

}  // namespace attnviz::ui
