// The bounded per-batch curve (core/config/bounded_curve.hpp).
#include "core/config/bounded_curve.hpp"

namespace attnviz {

bool BoundedCurve::add(int64_t step, double value) {
    m_pending_sum += value;
    if (++m_pending < m_stride) return false;
    m_points.emplace_back(step, m_pending_sum / static_cast<double>(m_pending));
    m_pending_sum = 0.0;
    m_pending = 0;
    return true;
}

int BoundedCurve::compact() {
    int halvings = 0;
    while (m_points.size() >= m_max) {
        if (m_points.size() % 2 == 1) {
            m_pending_sum += m_points.back().second * static_cast<double>(m_stride);
            m_pending += m_stride;
            m_points.pop_back();
        }
        size_t out = 0;
        for (size_t i = 0; i + 1 < m_points.size(); i += 2)
            m_points[out++] = {m_points[i + 1].first, 0.5 * (m_points[i].second + m_points[i + 1].second)};
        m_points.resize(out);
        m_stride *= 2;
        ++halvings;
    }
    return halvings;
}

void BoundedCurve::restore(std::vector<Point> points, int64_t stride, double pending_sum, int64_t pending_count) {
    m_points = std::move(points);
    m_stride = stride < 1 ? 1 : stride;
    m_pending_sum = pending_sum;
    m_pending = pending_count;
}

}  // namespace attnviz
