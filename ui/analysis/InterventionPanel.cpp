#include "ui/analysis/InterventionPanel.hpp"

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/common/Background.hpp"
#include "ui/common/Format.hpp"
#include "ui/common/TextFit.hpp"

namespace attnviz::ui {
namespace {
constexpr int kLabelHeight = 18;
constexpr int kBarMargin = 4;

/// The tokens of `tokens` as text, the ones that differ from `other` at the same position in bold.
QString markedText(const std::vector<std::string>& tokens, const std::vector<std::string>& other) {
    QStringList out;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const QString t = displayToken(qs(tokens[i])).toHtmlEscaped();
        out << ((i >= other.size() || other[i] != tokens[i]) ? QStringLiteral("<b style='color:#b00020'>%1</b>").arg(t) : t);
    }
    return out.join(QLatin1Char(' '));
}

/// What the intervention did, steps counted from 1 as the heatmap's rows are.
QString describe(const Intervention& iv, const std::vector<std::string>& source) {
    const int step = int(iv.step) + 1;
    switch (iv.kind) {
    case InterventionKind::uniform: return QObject::tr("Uniform attention at step %1").arg(step);
    case InterventionKind::permute: return QObject::tr("Permuted attention at step %1").arg(step);
    case InterventionKind::zero_token:
        return QObject::tr("“%1” zeroed (the rest renormalised) at step %2")
            .arg(size_t(iv.source_token) < source.size() ? displayToken(qs(source[size_t(iv.source_token)])) : QString())
            .arg(step);
    case InterventionKind::replace: return QObject::tr("The drawn attention at step %1").arg(step);
    case InterventionKind::head_off:
        return QObject::tr("Layer %1, head %2 switched off at step %3").arg(iv.head.layer).arg(iv.head.head).arg(step);
    case InterventionKind::none: break;
    }
    return {};
}
}  // namespace

DrawnRow::DrawnRow(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("drawnRow"));
    setToolTip(tr("Drag over the bars to draw the step's attention: the height under the pointer becomes that "
                  "source token's weight (normalised to sum 1 when used)"));
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

void DrawnRow::setValues(const QStringList& labels, const std::vector<float>& values) {
    m_labels = labels;
    m_values = values;
    m_values.resize(size_t(labels.size()), 0.0f);
    update();
}

QRect DrawnRow::barArea(int column) const {
    const int n = std::max<int>(1, int(m_labels.size()));
    const int w = (width() - 2 * kBarMargin) / n;
    return QRect(kBarMargin + column * w, kBarMargin, w, height() - 2 * kBarMargin - kLabelHeight);
}

QSize DrawnRow::sizeHint() const { return QSize(std::max(200, int(m_labels.size()) * 48), 110); }
QSize DrawnRow::minimumSizeHint() const { return QSize(100, 90); }

void DrawnRow::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    float largest = 0.0f;
    for (float v : m_values) largest = std::max(largest, v);
    for (int c = 0; c < int(m_labels.size()); ++c) {
        const QRect area = barArea(c);
        const double share = largest > 0 ? double(m_values[size_t(c)]) / largest : 0.0;
        const int h = int(std::lround(share * area.height()));
        p.fillRect(QRect(area.left() + 2, area.bottom() - h + 1, area.width() - 4, h), QColor(0x2c, 0x7f, 0xb8));
        p.setPen(QColor(0xc0, 0xc0, 0xc0));
        p.drawRect(area.adjusted(0, 0, -1, -1));
        p.setPen(palette().color(QPalette::Text));
        const QRect label(area.left(), area.bottom() + 2, area.width(), kLabelHeight);
        drawFittedLabel(p, label, Qt::AlignCenter, displayToken(m_labels[c]));
    }
}

void DrawnRow::mousePressEvent(QMouseEvent* event) {
    if (event->button() == Qt::LeftButton) drawAt(event->position().toPoint());
}

void DrawnRow::mouseMoveEvent(QMouseEvent* event) {
    if (event->buttons() & Qt::LeftButton) drawAt(event->position().toPoint());
}

void DrawnRow::drawAt(const QPoint& pos) {
    for (int c = 0; c < int(m_labels.size()); ++c) {
        const QRect area = barArea(c);
        if (pos.x() < area.left() || pos.x() > area.right()) continue;
        // The height is a share of the tallest bar's scale: the top of the area is 1.
        float largest = 0.0f;
        for (float v : m_values) largest = std::max(largest, v);
        if (largest <= 0) largest = 1.0f;
        const double share = std::clamp(double(area.bottom() - pos.y()) / std::max(1, area.height() - 1), 0.0, 1.0);
        m_values[size_t(c)] = float(share * largest);
        update();
        Q_EMIT edited();
        return;
    }
}

InterventionPanel::InterventionPanel(QWidget* parent) : QWidget(parent), m_jobs(new LatestOnly(this)) {
    setObjectName(QStringLiteral("interventionPanel"));
    m_title = new QLabel(tr("<b>What if?</b> Select a step, change its attention, decode again from there."), this);
    m_title->setWordWrap(true);
    m_kind = new QComboBox(this);
    m_kind->addItem(tr("Uniform attention"), int(InterventionKind::uniform));
    m_kind->addItem(tr("Permuted attention"), int(InterventionKind::permute));
    m_kind->addItem(tr("One source token zeroed"), int(InterventionKind::zero_token));
    m_kind->addItem(tr("Attention drawn below"), int(InterventionKind::replace));
    m_kind->addItem(tr("A head switched off"), int(InterventionKind::head_off));
    m_token = new QComboBox(this);
    m_token->setToolTip(tr("The source token whose weight is set to 0 (the rest renormalised)"));
    m_layer = new QSpinBox(this);
    m_head = new QSpinBox(this);
    m_headRow = new QWidget(this);
    auto* headLayout = new QHBoxLayout(m_headRow);
    headLayout->setContentsMargins(0, 0, 0, 0);
    headLayout->addWidget(new QLabel(tr("Layer"), m_headRow));
    headLayout->addWidget(m_layer);
    headLayout->addWidget(new QLabel(tr("Head"), m_headRow));
    headLayout->addWidget(m_head);
    headLayout->addStretch(1);
    m_drawn = new DrawnRow(this);
    m_run = new QPushButton(tr("Decode again from this step"), this);
    m_run->setObjectName(QStringLiteral("whatIfRun"));
    m_resultLabel = new QLabel(this);
    m_resultLabel->setWordWrap(true);
    m_resultLabel->setTextFormat(Qt::RichText);
    m_resultLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* form = new QFormLayout();
    form->addRow(tr("Change"), m_kind);
    form->addRow(tr("Token"), m_token);
    form->addRow(QString(), m_headRow);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(m_title);
    layout->addLayout(form);
    layout->addWidget(m_drawn);
    layout->addWidget(m_run);
    layout->addWidget(m_resultLabel);
    layout->addStretch(1);

    connect(m_kind, &QComboBox::currentIndexChanged, this, &InterventionPanel::updateControls);
    connect(m_run, &QPushButton::clicked, this, &InterventionPanel::run);
    connect(m_drawn, &DrawnRow::edited, this, [this] { m_kind->setCurrentIndex(m_kind->findData(int(InterventionKind::replace))); });
    setTranslation(nullptr, nullptr, 0);
}

bool InterventionPanel::busy() const { return m_jobs->busy(); }

void InterventionPanel::setTranslation(TranslationModelPtr model, std::shared_ptr<const Translation> translation,
                                       int hypothesis) {
    m_jobs->cancel();
    m_result.reset();
    m_resultLabel->clear();
    const bool usable = model && translation && !translation->empty() && translation->attention_available &&
                        hypothesis >= 0 && hypothesis < int(translation->hypotheses.size());
    m_model = usable ? std::move(model) : nullptr;
    m_translation = usable ? std::move(translation) : nullptr;
    m_hypothesis = hypothesis;
    m_token->clear();
    if (m_translation) {
        for (const std::string& t : m_translation->src_tokens) m_token->addItem(displayToken(qs(t)));
        const AttentionRecord& record = m_translation->hypotheses[size_t(hypothesis)].attention;
        m_layer->setRange(0, std::max(0, record.layer_count(AttentionKind::cross) - 1));
        m_head->setRange(0, std::max(0, record.head_count(AttentionKind::cross) - 1));
    }
    m_step = -1;
    setStep(0);
}

void InterventionPanel::setStep(int step) {
    const Hypothesis* h = m_translation ? &m_translation->hypotheses[size_t(m_hypothesis)] : nullptr;
    m_step = h && step >= 0 && step < int(h->tokens.size()) ? step : -1;
    if (m_step < 0) {
        m_drawn->setValues({}, {});
        m_title->setText(tr("<b>What if?</b> Translate, select a step, change its attention, decode again from there."));
    } else {
        const AttentionMatrix& weights = h->attention.weights();
        m_drawn->setValues(toQStringList(m_translation->src_tokens),
                           size_t(m_step) < weights.size() ? weights[size_t(m_step)] : std::vector<float>{});
        m_title->setText(tr("<b>What if?</b> Step %1, “%2”: change its attention and decode again from there.")
                             .arg(m_step + 1)
                             .arg(displayToken(qs(h->tokens[size_t(m_step)])).toHtmlEscaped()));
    }
    updateControls();
}

void InterventionPanel::updateControls() {
    const auto kind = InterventionKind(m_kind->currentData().toInt());
    m_token->setEnabled(kind == InterventionKind::zero_token);
    m_headRow->setVisible(kind == InterventionKind::head_off);
    m_drawn->setEnabled(m_step >= 0);
    m_run->setEnabled(m_step >= 0);
}

Intervention InterventionPanel::intervention() const {
    Intervention iv;
    iv.kind = InterventionKind(m_kind->currentData().toInt());
    iv.step = m_step;
    iv.source_token = std::max(0, m_token->currentIndex());
    if (iv.kind == InterventionKind::replace) iv.weights = m_drawn->values();
    iv.head = AttentionMapId{AttentionKind::cross, m_layer->value(), m_head->value()};
    return iv;
}

void InterventionPanel::run() {
    if (!m_model || m_step < 0) return;
    const Hypothesis& h = m_translation->hypotheses[size_t(m_hypothesis)];
    std::vector<std::string> source = m_translation->src_tokens;
    if (!source.empty() && source.back() == "<eos>") source.pop_back();
    std::function<WhatIf()> work = [model = m_model, source, output = h.tokens, iv = intervention()] {
        return what_if(*model, source, output, iv);
    };
    m_resultLabel->setText(tr("Decoding…"));
    m_jobs->run<WhatIf>(
        std::move(work),
        [this](WhatIf w) {
            showResult(w);
            m_result = std::move(w);
            Q_EMIT whatIfReady();
        },
        [this](const QString& message) {
            m_resultLabel->setText(tr("<span style='color:#b00020'>%1</span>").arg(message.toHtmlEscaped()));
            Q_EMIT whatIfFailed(message);
        });
}

void InterventionPanel::showResult(const WhatIf& w) {
    const double before = w.original_log_prob, after = w.changed_log_prob;
    m_resultLabel->setText(
        tr("%1:<br>before: %2<br>after: %3<br>log p(“%4”) at step %5: %6 → %7 (Δ <b>%8</b>; p %9 → %10)%11")
            .arg(describe(w.intervention, w.source).toHtmlEscaped(), markedText(w.original_output, w.changed.tokens),
                 markedText(w.changed.tokens, w.original_output), displayToken(qs(w.original_token)).toHtmlEscaped())
            .arg(w.intervention.step + 1)
            .arg(before, 0, 'f', 3)
            .arg(after, 0, 'f', 3)
            .arg(w.delta_log_prob(), 0, 'f', 3)
            .arg(std::exp(before), 0, 'f', 3)
            .arg(std::exp(after), 0, 'f', 3)
            .arg(w.output_changed() ? QString() : tr("<br>The output is the same.")));
}

}  // namespace attnviz::ui
