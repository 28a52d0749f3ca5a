#pragma once
// The Setup dock's "Fine-tune languages" row: which pair Train fine-tunes a multilingual pretrained
// model (M2M100, NLLB, mBART-50) on, as attnviz-cli train --init-from DIR --source-lang X
// --target-lang Y. Its two lists are the Translate tab's (one model of items, the same choice kept in
// both places): the pair a user translates with is the pair the model is tuned on, and the tuned model
// keeps it as its own languages. Hidden for every other model (a Marian model's target is the >>xxx<<
// token in the corpus's sources; BART and T5 have no languages).
#include <QGroupBox>
#include <QString>

#include "core/decode/translation_model.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
QT_END_NAMESPACE

namespace attnviz::ui {

class FineTuneLanguages : public QGroupBox {
    Q_OBJECT
public:
    /// `source` and `target`: the Translate tab's lists, whose items and choice this row shares.
    FineTuneLanguages(QComboBox* source, QComboBox* target, QWidget* parent = nullptr);

    /// The pretrained model Train would fine-tune (null: none) and whether Train fine-tunes at all
    /// (the settings' architecture is Pretrained): the row shows itself for a multilingual one.
    void setModel(TranslationModelPtr model, bool fineTuning);
    /// Whether `model` is one whose pairs carry language codes (M2M100, NLLB, mBART-50).
    static bool multilingual(const TranslationModel* model);

    /// The languages chosen ("": the model's tokenizer_config.json's src_lang / tgt_lang).
    QString sourceLanguage() const;
    QString targetLanguage() const;
    /// The pair fine-tuning uses, the defaults filled in ("eng_Latn → fra_Latn"); empty target: none.
    QString effectiveSource() const;
    QString effectiveTarget() const;
    /// Why Train cannot fine-tune the model on these languages ("" when it can): a multilingual model
    /// whose tokenizer names no target language needs one chosen.
    QString problem() const;

    QComboBox* sourceBox() const { return m_source; }
    QComboBox* targetBox() const { return m_target; }
    QLabel* noteLabel() const { return m_note; }

private:
    void refresh();

    QComboBox* m_translateSource;
    QComboBox* m_translateTarget;
    QComboBox* m_source;
    QComboBox* m_target;
    QLabel* m_note;
    TranslationModelPtr m_model;
    bool m_fineTuning = false;
};

}  // namespace attnviz::ui
