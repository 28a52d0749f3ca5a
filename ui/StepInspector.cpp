#include "ui/StepInspector.hpp"

#include "ui/Format.hpp"

#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace attnviz::ui {

WeightBars::WeightBars(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void WeightBars::setValues(const QStringList& labels, const std::vector<float>& weights) {
    m_labels = labels;
    m_weights = weights;
    update();
}

void WeightBars::setColorMap(ColorMap::Kind kind) {
    m_colorMap = ColorMap(kind);
    update();
}

QSize WeightBars::sizeHint() const { return QSize(260, 150); }
QSize WeightBars::minimumSizeHint() const { return QSize(120, 100); }

void WeightBars::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    const int n = int(std::min<size_t>(m_weights.size(), size_t(m_labels.size())));
    const QFontMetrics fm(font());
    if (n == 0) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("Click a row of the heatmap"));
        return;
    }
    const int labelH = fm.height() + 4, valueH = fm.height() + 2;
    const QRect plot = rect().adjusted(6, valueH + 4, -6, -labelH - 2);
    const double slot = double(plot.width()) / n;
    const double barW = std::max(2.0, slot * 0.7);
    p.setPen(palette().color(QPalette::Mid));
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    for (int i = 0; i < n; ++i) {
        const double w = std::clamp(double(m_weights[i]), 0.0, 1.0);
        const double x = plot.left() + i * slot + (slot - barW) / 2;
        const double h = w * plot.height();
        const QRectF bar(x, plot.bottom() - h, barW, h);
        p.fillRect(bar, m_colorMap.color(w));
        p.setPen(palette().color(QPalette::Text));
        if (slot >= fm.horizontalAdvance(QStringLiteral(".00")) + 2)
            p.drawText(QRectF(x - slot, bar.top() - valueH, barW + 2 * slot, valueH), Qt::AlignHCenter | Qt::AlignBottom,
                       [w] {
                           const QString t = QString::number(w, 'f', 2);
                           return t.startsWith(QLatin1String("0.")) ? t.mid(1) : t;  // ".85" saves room
                       }());
        const QString label = fm.elidedText(displayToken(m_labels[i]), Qt::ElideRight, int(slot) - 1);
        p.drawText(QRectF(plot.left() + i * slot, plot.bottom() + 3, slot, labelH), Qt::AlignHCenter | Qt::AlignTop, label);
    }
}

StepInspector::StepInspector(QWidget* parent) : QWidget(parent) {
    m_title = new QLabel(this);
    m_title->setWordWrap(true);
    m_title->setTextFormat(Qt::RichText);
    m_context = new QLabel(this);
    m_context->setTextFormat(Qt::RichText);
    m_bars = new WeightBars(this);
    m_table = new QTableWidget(0, 3, this);
    m_table->setHorizontalHeaderLabels({tr("Source token"), tr("1 · raw score eₜⱼ"), tr("2 · weight αₜⱼ = softmax")});
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_table->verticalHeader()->setVisible(false);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionMode(QAbstractItemView::NoSelection);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_title);
    layout->addWidget(m_bars, 2);
    layout->addWidget(m_table, 3);
    layout->addWidget(m_context);
    clear();
}

void StepInspector::setColorMap(ColorMap::Kind kind) { m_bars->setColorMap(kind); }

void StepInspector::clear() {
    m_step = -1;
    m_title->setText(tr("<b>Step inspector</b> — click an output row of the heatmap."));
    m_context->setText(QString());
    m_bars->setValues({}, {});
    m_table->setRowCount(0);
}

int StepInspector::tableRows() const { return m_table->rowCount(); }

double StepInspector::weightAt(int column) const {
    const QTableWidgetItem* item = m_table->item(column, 2);
    return item ? item->data(Qt::UserRole).toDouble() : std::nan("");
}

void StepInspector::setStep(const HeatmapData& data, int step) {
    if (step < 0 || step >= data.rows()) {
        clear();
        return;
    }
    m_step = step;
    const auto& weights = data.weights[step];
    m_title->setText(tr("<b>Step %1</b> — producing <b>%2</b>: the decoder state scores every source token (1), "
                        "the softmax turns the scores into weights (2), and the context vector is the weighted sum "
                        "of the encoder states (3–4).")
                         .arg(step + 1)
                         .arg(displayToken(data.output[step]).toHtmlEscaped()));
    m_bars->setValues(data.source, weights);
    m_table->setRowCount(data.columns());
    const bool haveScores = step < int(data.rawScores.size());
    for (int c = 0; c < data.columns(); ++c) {
        auto* token = new QTableWidgetItem(displayToken(data.source[c]));
        QString scoreText = QStringLiteral("–");
        if (haveScores) {
            const float s = data.rawScores[step][c];
            scoreText = std::isfinite(s) ? QString::number(s, 'f', 4) : QStringLiteral("−∞ (padding)");
        }
        auto* score = new QTableWidgetItem(scoreText);
        auto* weight = new QTableWidgetItem(QString::number(weights[c], 'f', 4));
        weight->setData(Qt::UserRole, double(weights[c]));
        score->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        weight->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        m_table->setItem(c, 0, token);
        m_table->setItem(c, 1, score);
        m_table->setItem(c, 2, weight);
    }
    const auto best = std::max_element(weights.begin(), weights.end()) - weights.begin();
    QString ctx = tr("Most attended: <b>%1</b> (%2).").arg(displayToken(data.source.value(int(best))).toHtmlEscaped())
                      .arg(weights.empty() ? 0.0 : weights[best], 0, 'f', 3);
    if (step < int(data.contextNorm.size()))
        ctx += tr(" 3–4 · context vector ‖cₜ‖ = Σⱼ αₜⱼ hⱼ, norm <b>%1</b>.").arg(data.contextNorm[step], 0, 'f', 4);
    m_context->setText(ctx);
}

}  // namespace attnviz::ui
