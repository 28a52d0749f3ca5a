#pragma once
// Grouped bars: how many pairs have a source / target of each length.
#include <QWidget>
#include <vector>

namespace attnviz::ui {

class LengthHistogram : public QWidget {
    Q_OBJECT
public:
    explicit LengthHistogram(QWidget* parent = nullptr);
    /// Pairs per length in tokens (index = length; the last bin counts that length or more).
    void setCounts(const std::vector<size_t>& source, const std::vector<size_t>& target);
    void clear() { setCounts({}, {}); }
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    std::vector<size_t> m_src, m_tgt;
};

}  // namespace attnviz::ui
