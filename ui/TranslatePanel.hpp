#pragma once
// Translate and inspect: a sentence box (Enter translates with the current
// weights), beam width and N-best list, the heatmap of the selected hypothesis
// and the step inspector for the selected output row.
#include <QWidget>
#include <memory>

#include "core/translation_model.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QSpinBox;
class QToolBar;
QT_END_NAMESPACE

namespace attnviz::ui {

class HeatmapWidget;
class StepInspector;
class Translator;

class TranslatePanel : public QWidget {
    Q_OBJECT
public:
    explicit TranslatePanel(QWidget* parent = nullptr);

    void setModel(TranslationModelPtr model);
    TranslationModelPtr model() const { return m_model; }
    void setExamples(const QStringList& examples);
    DecodeOptions decodeOptions() const;
    void setBeamWidth(int width);

    std::shared_ptr<const Translation> translation() const { return m_translation; }
    /// The model that produced translation() (for export settings).
    TranslationModelPtr translationModel() const { return m_translationModel; }
    int selectedHypothesis() const;
    void selectHypothesis(int index);

    QLineEdit* lineEdit() const { return m_input; }
    HeatmapWidget* heatmap() const { return m_heatmap; }
    StepInspector* inspector() const { return m_inspector; }
    QToolBar* heatmapToolBar() const { return m_tools; }
    int hypothesisCount() const;
    QString resultText() const;

public Q_SLOTS:
    /// Translates the line edit's text (Enter does this).
    void translateInput();
    void translateText(const QString& sentence);

Q_SIGNALS:
    void translationReady();
    void translationFailed(const QString& message);

private:
    void showTranslation(std::shared_ptr<const Translation> t, TranslationModelPtr model);
    void showHypothesis(int index);

    Translator* m_translator;
    TranslationModelPtr m_model, m_translationModel;
    std::shared_ptr<const Translation> m_translation;
    QLineEdit* m_input;
    QPushButton* m_go;
    QSpinBox* m_beam;
    QSpinBox* m_nbest;
    QLabel* m_modelLabel;
    QLabel* m_result;
    QListWidget* m_hypotheses;
    QToolBar* m_tools;
    HeatmapWidget* m_heatmap;
    StepInspector* m_inspector;
};

}  // namespace attnviz::ui
