#pragma once
// "What if it had looked elsewhere?" under the step inspector: the selected
// step's attention changed (uniform, permuted, one source token zeroed, a head
// switched off, or a distribution the user draws by dragging over the step's
// row) and the sentence decoded again from that step (core/decode/what_if.hpp),
// off the GUI thread: the old and the new output side by side and how the
// step's original token fared (Δ log p).
#include <QWidget>
#include <memory>
#include <optional>

#include "core/decode/translation_model.hpp"
#include "core/decode/what_if.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
QT_END_NAMESPACE

namespace attnviz::ui {

class LatestOnly;

/// One weight per source token as bars; dragging over them draws a new distribution
/// (the height under the pointer becomes that token's weight).
class DrawnRow : public QWidget {
    Q_OBJECT
public:
    explicit DrawnRow(QWidget* parent = nullptr);
    void setValues(const QStringList& labels, const std::vector<float>& values);
    const std::vector<float>& values() const { return m_values; }
    /// The bar of column `column`, in widget coordinates (for tests and hit-testing).
    QRect barArea(int column) const;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

Q_SIGNALS:
    void edited();

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;

private:
    void drawAt(const QPoint& pos);
    QStringList m_labels;
    std::vector<float> m_values;
};

class InterventionPanel : public QWidget {
    Q_OBJECT
public:
    explicit InterventionPanel(QWidget* parent = nullptr);

    /// The translation whose hypothesis `hypothesis` interventions change (null: disabled).
    void setTranslation(TranslationModelPtr model, std::shared_ptr<const Translation> translation, int hypothesis);
    /// The output step to change; the drawn row starts from its attention.
    void setStep(int step);
    int step() const { return m_step; }

    /// The intervention the controls describe, at step().
    Intervention intervention() const;
    /// Re-decodes with it in the background; whatIfReady() or whatIfFailed() answers.
    void run();
    const std::optional<WhatIf>& result() const { return m_result; }
    bool busy() const;

    QComboBox* kindBox() const { return m_kind; }
    QComboBox* tokenBox() const { return m_token; }
    QSpinBox* layerBox() const { return m_layer; }
    QSpinBox* headBox() const { return m_head; }
    DrawnRow* drawnRow() const { return m_drawn; }
    QPushButton* runButton() const { return m_run; }
    QLabel* resultLabel() const { return m_resultLabel; }

Q_SIGNALS:
    void whatIfReady();
    void whatIfFailed(const QString& message);

private:
    void updateControls();
    void showResult(const WhatIf& w);

    QLabel* m_title;
    QComboBox* m_kind;
    QComboBox* m_token;
    QSpinBox* m_layer;
    QSpinBox* m_head;
    QWidget* m_headRow;
    DrawnRow* m_drawn;
    QPushButton* m_run;
    QLabel* m_resultLabel;
    LatestOnly* m_jobs;
    TranslationModelPtr m_model;
    std::shared_ptr<const Translation> m_translation;
    int m_hypothesis = 0;
    int m_step = -1;
    std::optional<WhatIf> m_result;
};

}  // namespace attnviz::ui
