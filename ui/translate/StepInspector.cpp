#include "ui/translate/StepInspector.hpp"

#include "ui/common/Format.hpp"
#include "ui/common/TextFit.hpp"

#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QStyle>
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
        drawFittedLabel(p, QRectF(plot.left() + i * slot, plot.bottom() + 3, slot - 1, labelH), Qt::AlignHCenter | Qt::AlignTop,
                        displayToken(m_labels[i]));
    }
}

CandidateList::CandidateList(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void CandidateList::setValues(const std::vector<Candidate>& candidates, const QString& token, double prob,
                              long long rank, bool forced) {
    m_candidates = candidates;
    m_token = token;
    m_prob = prob;
    m_rank = rank;
    m_forced = forced;
    updateGeometry();
    update();
}

QSize CandidateList::sizeHint() const {
    const int line = QFontMetrics(font()).height() + 4;
    return QSize(260, std::max(2, int(m_candidates.size()) + 1) * line + 4);
}
// Every candidate line whole (at most top-k + 1): a short window scrolls the inspector instead.
QSize CandidateList::minimumSizeHint() const { return QSize(120, sizeHint().height()); }

void CandidateList::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    const QFontMetrics fm(font());
    const int line = fm.height() + 4;
    if (m_candidates.empty()) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("No candidates recorded for this step"));
        return;
    }
    int tokenWidth = fm.horizontalAdvance(QStringLiteral("MMMMMM"));
    for (const Candidate& c : m_candidates) tokenWidth = std::max(tokenWidth, fm.horizontalAdvance(displayToken(c.token)));
    tokenWidth = std::min(tokenWidth + 8, width() / 3);
    const int rankWidth = fm.horizontalAdvance(QStringLiteral("10.")) + 6;
    const int valueWidth = fm.horizontalAdvance(QStringLiteral("0.000")) + 8;
    const int barLeft = 4 + rankWidth + tokenWidth, barMax = std::max(10, width() - barLeft - valueWidth - 4);
    bool tokenListed = false;
    auto row = [&](int y, const QString& rank, const QString& token, double prob, bool mine) {
        if (mine) p.fillRect(QRect(0, y, width(), line), QColor(0xff, 0xe0, 0x8a));
        QFont f = font();
        f.setBold(mine);
        p.setFont(f);
        p.setPen(palette().color(QPalette::Text));
        p.drawText(QRect(4, y, rankWidth, line), Qt::AlignRight | Qt::AlignVCenter, rank);
        p.drawText(QRect(4 + rankWidth + 4, y, tokenWidth - 4, line), Qt::AlignLeft | Qt::AlignVCenter,
                   fm.elidedText(displayToken(token), Qt::ElideRight, tokenWidth - 6));
        const int w = int(std::lround(std::clamp(prob, 0.0, 1.0) * barMax));
        p.fillRect(QRect(barLeft, y + 3, std::max(1, w), line - 6), mine ? QColor(0xd3, 0x54, 0x00) : QColor(0x3a, 0x6e, 0xa5));
        p.drawText(QRect(barLeft + w + 4, y, valueWidth, line), Qt::AlignLeft | Qt::AlignVCenter, QString::number(prob, 'f', 3));
    };
    int y = 2;
    for (size_t i = 0; i < m_candidates.size(); ++i, y += line) {
        const bool mine = m_candidates[i].token == m_token;
        tokenListed = tokenListed || mine;
        row(y, QStringLiteral("%1.").arg(i + 1), m_candidates[i].token, m_candidates[i].prob, mine);
    }
    // A given token outside the top-k: show where it stands.
    if (!tokenListed && m_prob >= 0)
        row(y, m_rank >= 0 ? QStringLiteral("%1.").arg(m_rank + 1) : QStringLiteral("?"), m_token, m_prob, true);
}

StepInspector::StepInspector(QWidget* parent) : QWidget(parent) {
    m_title = new QLabel(this);
    m_title->setWordWrap(true);
    m_title->setTextFormat(Qt::RichText);
    m_context = new QLabel(this);
    m_context->setTextFormat(Qt::RichText);
    m_context->setWordWrap(true);  // a narrow inspector wraps it rather than widening the column
    m_bars = new WeightBars(this);
    m_candidatesTitle = new QLabel(this);
    m_candidatesTitle->setTextFormat(Qt::RichText);
    m_candidatesTitle->setWordWrap(true);
    m_candidates = new CandidateList(this);
    m_candidates->setObjectName(QStringLiteral("candidateList"));
    m_table = new QTableWidget(0, 3, this);
    // Two lines each, so that three columns fit a narrow inspector (fitHeaders keeps them whole).
    m_table->setHorizontalHeaderLabels({tr("Source\ntoken"), tr("1 · raw score\neₜⱼ"), tr("2 · weight αₜⱼ\n= softmax")});
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_table->horizontalHeader()->setDefaultAlignment(Qt::AlignCenter);
    m_table->verticalHeader()->setVisible(false);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setMinimumHeight(m_table->horizontalHeader()->sizeHint().height() + 4 * m_table->verticalHeader()->defaultSectionSize());
    m_table->setSelectionMode(QAbstractItemView::NoSelection);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(m_title);
    layout->addWidget(m_bars, 2);
    layout->addWidget(m_candidatesTitle);
    layout->addWidget(m_candidates, 2);
    layout->addWidget(m_table, 3);
    layout->addWidget(m_context);
    clear();
    fitHeaders();
}

int StepInspector::headerTextWidth(int section) const {
    const QTableWidgetItem* item = m_table->horizontalHeaderItem(section);
    if (!item) return 0;
    const QFontMetrics fm = m_table->horizontalHeader()->fontMetrics();
    int widest = 0;
    for (const QString& line : item->text().split(QLatin1Char('\n'))) widest = std::max(widest, fm.horizontalAdvance(line));
    return widest + 2 * m_table->style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, m_table) + 4;
}

void StepInspector::fitHeaders() {
    // The columns share the width equally (Stretch): the table is never narrower than three of
    // the widest header, so no header is cut, with room for a vertical scroll bar.
    int section = 0;
    for (int i = 0; i < m_table->columnCount(); ++i) section = std::max(section, headerTextWidth(i));
    m_table->horizontalHeader()->setMinimumSectionSize(section);
    m_table->setMinimumWidth(m_table->columnCount() * section + 2 * m_table->frameWidth() +
                             m_table->style()->pixelMetric(QStyle::PM_ScrollBarExtent, nullptr, m_table) + 2);
}

void StepInspector::setColorMap(ColorMap::Kind kind) { m_bars->setColorMap(kind); }

void StepInspector::clear() {
    m_step = -1;
    m_title->setText(tr("<b>Step inspector</b> — click an output row of the heatmap."));
    m_context->setText(QString());
    m_bars->setValues({}, {});
    m_candidatesTitle->setText(QString());
    m_candidates->setValues({}, QString(), -1, -1, false);
    m_table->setRowCount(0);
}

int StepInspector::candidateCount() const { return m_candidates->count(); }

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
    // A Transformer's head, mean or rollout; encoder self-attention's rows are source tokens, not steps.
    const bool outputRows = data.mapName.isEmpty() || !data.stepLogProb.empty() || !data.topK.empty();
    if (!data.mapName.isEmpty())
        m_title->setText((outputRows ? tr("<b>Step %1</b> — <b>%2</b>, <i>%3</i>: %4") : tr("<b>Source token %1</b> — <b>%2</b>, <i>%3</i>: %4"))
                             .arg(step + 1)
                             .arg(displayToken(data.output[step]).toHtmlEscaped(), data.mapName.toHtmlEscaped(),
                                  data.mapExplanation));
    m_candidatesTitle->setVisible(outputRows);
    m_candidates->setVisible(outputRows);
    const QString scoreHeader = data.mapName.isEmpty() ? tr("1 · raw score\neₜⱼ") : tr("1 · raw score\nq·k/√d");
    if (m_table->horizontalHeaderItem(1)->text() != scoreHeader) {
        m_table->horizontalHeaderItem(1)->setText(scoreHeader);
        fitHeaders();
    }
    m_bars->setValues(data.source, weights);
    const bool haveProb = step < int(data.stepLogProb.size());
    const double prob = haveProb ? std::exp(double(data.stepLogProb[step])) : -1.0;
    const long long rank = step < int(data.rank.size()) ? data.rank[step] : -1;
    const bool forced = step < data.forcedRows;
    m_candidates->setValues(step < int(data.topK.size()) ? data.topK[step] : std::vector<Candidate>{}, data.output[step],
                            prob, rank, forced);
    QString why = tr("<b>Why this word?</b> The most probable next tokens at this step");
    if (haveProb)
        why += forced ? tr(": the given <b>%1</b> had p = %2 (rank %3)") : tr(": it chose <b>%1</b> with p = %2 (rank %3)");
    if (haveProb) why = why.arg(displayToken(data.output[step]).toHtmlEscaped()).arg(prob, 0, 'f', 3).arg(rank + 1);
    if (step == data.highlightRow) why += tr(" — <span style='color:#b00020'>the model would have said something else here</span>");
    m_candidatesTitle->setText(why + QStringLiteral("."));
    m_table->setRowCount(data.columns());
    const bool haveScores = step < int(data.rawScores.size());
    for (int c = 0; c < data.columns(); ++c) {
        auto* token = new QTableWidgetItem(displayToken(data.source[c]));
        QString scoreText = QStringLiteral("–");
        if (haveScores) {
            const float s = data.rawScores[step][c];
            scoreText = std::isfinite(s) ? QString::number(s, 'f', 4) : QStringLiteral("−∞ (masked)");
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
