#pragma once
// T5's relative position bias as curves over relative distance (core/model/t5_model.hpp's
// position_bias_curves): for one kind of self-attention, what each head adds to a score before the
// softmax when the key lies d positions after the query. Every head of the kind is drawn faint, the
// chosen head bold (the head whose map is shown beside it); a layer's mean choice draws the heads'
// mean bold. The tooltip under the pointer names the distance and the chosen head's bias there.
#include <QWidget>
#include <vector>

#include "core/model/t5_model.hpp"

namespace attnviz::ui {

class PositionBiasView : public QWidget {
    Q_OBJECT
public:
    explicit PositionBiasView(QWidget* parent = nullptr);

    /// The model's curves (every kind; empty: none, the view says so and wants no space) and the
    /// kind and head to show; head < 0: the heads' mean.
    void setCurves(std::vector<PositionBiasCurve> curves);
    void setChoice(AttentionKind kind, int head);
    /// Whether there is a curve to show for the chosen kind (T5's encoder_self and decoder_self).
    bool hasCurves() const;
    AttentionKind kind() const { return m_kind; }
    int head() const { return m_head; }
    /// The curve drawn bold: the chosen head's, or the mean of the kind's heads.
    std::vector<float> chosenCurve() const;

    QSize sizeHint() const override { return QSize(320, 170); }
    QSize minimumSizeHint() const override { return QSize(160, 110); }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    QRect plotRect() const;
    std::vector<PositionBiasCurve> m_curves;
    AttentionKind m_kind = AttentionKind::encoder_self;
    int m_head = -1;
};

}  // namespace attnviz::ui
