// The Setup dock's fine-tune languages: the Translate tab's two lists, shown again where Train is.
#include "ui/training/FineTuneLanguages.hpp"

#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "core/text/pretrained_tokenizer.hpp"
#include "ui/common/Format.hpp"

namespace attnviz::ui {

FineTuneLanguages::FineTuneLanguages(QComboBox* source, QComboBox* target, QWidget* parent)
    : QGroupBox(tr("Fine-tune languages"), parent), m_translateSource(source), m_translateTarget(target) {
    setObjectName(QStringLiteral("fineTuneLanguages"));
    m_source = new QComboBox(this);
    m_source->setObjectName(QStringLiteral("fineTuneSourceLanguage"));
    m_target = new QComboBox(this);
    m_target->setObjectName(QStringLiteral("fineTuneTargetLanguage"));
    // One list of items, one choice: the Translate tab's lists and these show the same.
    m_source->setModel(source->model());
    m_target->setModel(target->model());
    // Sized to a code, not to the longest of 200 items: the row must not widen the Setup dock past
    // its width (everything in it was cut at the right edge).
    for (QComboBox* box : {m_source, m_target}) {
        box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        box->setMinimumContentsLength(8);
    }
    m_source->setToolTip(tr("The language of the corpus's sources: its code starts each source, as the model reads "
                            "it. The Translate tab's “From” list is the same choice"));
    m_target->setToolTip(tr("The language of the corpus's targets: the model learns to write its code first. The "
                            "Translate tab's “to” list is the same choice"));
    m_note = new QLabel(this);
    m_note->setObjectName(QStringLiteral("fineTuneLanguagesNote"));
    m_note->setWordWrap(true);
    // One list a row, as the dock's other settings: side by side they widened the dock.
    auto* rows = new QFormLayout();
    rows->addRow(tr("From"), m_source);
    rows->addRow(tr("To"), m_target);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(rows);
    layout->addWidget(m_note);
    const auto follow = [this](QComboBox* from, QComboBox* to) {
        connect(from, &QComboBox::currentIndexChanged, this, [this, from, to](int index) {
            if (to->currentIndex() != index && index < to->count()) to->setCurrentIndex(index);
            refresh();
        });
    };
    follow(m_translateSource, m_source);
    follow(m_source, m_translateSource);
    follow(m_translateTarget, m_target);
    follow(m_target, m_translateTarget);
    m_source->setCurrentIndex(source->currentIndex());
    m_target->setCurrentIndex(target->currentIndex());
    setVisible(false);
}

bool FineTuneLanguages::multilingual(const TranslationModel* model) {
    const PretrainedTokenizer* pt = model ? model->tokenizer().pretrained().get() : nullptr;
    if (!pt) return false;
    const PretrainedTokenizerKind kind = pt->kind();
    return kind == PretrainedTokenizerKind::m2m100 || kind == PretrainedTokenizerKind::nllb ||
           kind == PretrainedTokenizerKind::mbart50;
}

void FineTuneLanguages::setModel(TranslationModelPtr model, bool fineTuning) {
    m_model = std::move(model);
    m_fineTuning = fineTuning;
    refresh();
}

QString FineTuneLanguages::sourceLanguage() const { return m_source->currentData().toString(); }
QString FineTuneLanguages::targetLanguage() const { return m_target->currentData().toString(); }

QString FineTuneLanguages::effectiveSource() const {
    if (!sourceLanguage().isEmpty() || !multilingual(m_model.get())) return sourceLanguage();
    return qs(m_model->tokenizer().pretrained()->default_source_language());
}

QString FineTuneLanguages::effectiveTarget() const {
    if (!targetLanguage().isEmpty() || !multilingual(m_model.get())) return targetLanguage();
    return qs(m_model->tokenizer().pretrained()->default_target_language());
}

QString FineTuneLanguages::problem() const {
    if (!m_fineTuning || !multilingual(m_model.get()) || !effectiveTarget().isEmpty()) return {};
    const auto languages = m_model->target_languages();
    return tr("This model translates into %1 languages and its tokenizer_config.json names no target language "
              "(tgt_lang): choose the language of the corpus's targets in Setup → Fine-tune languages (or the Translate "
              "tab's “to” list) before Train.")
        .arg(languages.size());
}

void FineTuneLanguages::refresh() {
    const bool shown = m_fineTuning && multilingual(m_model.get());
    setVisible(shown);
    if (!shown) return;
    const QString target = effectiveTarget();
    if (target.isEmpty()) {
        m_note->setText(tr("<span style=\"color:#b00020\">Choose a target: the model names none.</span>"));
        return;
    }
    m_note->setText(tr("Train fine-tunes %1 → %2.").arg(effectiveSource(), target));
    m_note->setToolTip(tr("The Translate tab's languages: the tuned model keeps the pair as its own"));
}

}  // namespace attnviz::ui
