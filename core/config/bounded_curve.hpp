#pragma once
// A curve of per-batch values in bounded memory: what the training history
// keeps of the batch losses (core/config/history.hpp) and what the GUI's loss
// chart draws (ui/LossChart), by one rule. Each point is the mean of `stride`
// consecutive batches, at the last one's step. Reaching max_points halves the
// points (neighbours averaged, the later step kept) and doubles the stride, so
// a run of any length keeps a curve of uniform resolution in bounded memory.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace attnviz {

class BoundedCurve {
public:
    using Point = std::pair<int64_t, double>;  ///< (step, mean of the batches it covers)

    explicit BoundedCurve(size_t max_points) : m_max(max_points < 2 ? 2 : max_points) {}

    /// Adds one batch's value at `step`: it joins the pending batches, which become a
    /// point once `stride` are pending. Returns true when it completed a point
    /// (points().back()). It does not halve: call compact() after (and, for a series
    /// kept beside the points, halve_beside() as often as compact() halved).
    bool add(int64_t step, double value);

    /// Halves the points until fewer than max_points remain: an odd last point goes back to
    /// the pending batches (with those already there they are fewer than the doubled
    /// stride, and every point keeps covering as many batches as every other), neighbours
    /// are averaged, the stride doubles. Returns how many times it halved.
    int compact();

    /// What one halving does to a series kept beside the points, one value per point:
    /// an odd last one dropped, the later of each pair kept.
    template <typename T>
    static void halve_beside(std::vector<T>& series) {
        if (series.size() % 2 == 1) series.pop_back();
        for (size_t i = 0; i + 1 < series.size(); i += 2) series[i / 2] = series[i + 1];
        series.resize(series.size() / 2);
    }

    /// A curve as it was saved (the checkpoint's history): its points, stride and pending
    /// batches, taken as they are; compact() then brings them within max_points.
    void restore(std::vector<Point> points, int64_t stride, double pending_sum, int64_t pending_count);

    const std::vector<Point>& points() const { return m_points; }
    size_t size() const { return m_points.size(); }
    bool empty() const { return m_points.empty(); }
    size_t max_points() const { return m_max; }
    int64_t stride() const { return m_stride; }             ///< batches per point: 1, 2, 4, ...
    double pending_sum() const { return m_pending_sum; }    ///< values of the batches not yet in a point
    int64_t pending_count() const { return m_pending; }     ///< how many (fewer than stride())

    /// Same points, stride and pending batches.
    bool operator==(const BoundedCurve& o) const {
        return m_points == o.m_points && m_stride == o.m_stride && m_pending_sum == o.m_pending_sum &&
               m_pending == o.m_pending;
    }
    bool operator!=(const BoundedCurve& o) const { return !(*this == o); }

private:
    size_t m_max;
    std::vector<Point> m_points;
    int64_t m_stride = 1;
    double m_pending_sum = 0.0;
    int64_t m_pending = 0;
};

}  // namespace attnviz
