#include "core/model/row_gather.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <ATen/Parallel.h>

namespace attnviz {

namespace {

/// copy(j) for every run j < total, split across LibTorch's intra-op threads in chunks of at least
/// 256 KB (fewer bytes: on this thread).
template <typename Copy>
void for_each_run(int64_t total, size_t run_bytes, const Copy& copy) {
    if (total <= 0) return;
    const auto grain = static_cast<int64_t>(std::max<size_t>(1, (size_t{1} << 18) / run_bytes));
    at::parallel_for(0, total, grain, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) copy(j);
    });
}

}  // namespace

void gather_runs(char* dst, const char* src, const int64_t* from, int64_t rows, int64_t runs_per_row,
                 size_t stride_bytes, size_t run_bytes) {
    if (run_bytes == 0) return;
    for_each_run(rows * runs_per_row, run_bytes, [&](int64_t j) {
        const int64_t i = j / runs_per_row, h = j % runs_per_row;
        std::memcpy(dst + static_cast<size_t>(j) * stride_bytes,
                    src + static_cast<size_t>(from[i] * runs_per_row + h) * stride_bytes, run_bytes);
    });
}

void reorder_runs_in_place(char* base, const int64_t* from, int64_t rows, int64_t runs_per_row, size_t stride_bytes,
                           size_t run_bytes) {
    if (rows <= 0 || runs_per_row <= 0 || run_bytes == 0) return;
    std::vector<int64_t> moved;                             // the rows that change
    std::vector<char> overwritten(static_cast<size_t>(rows), 0);
    for (int64_t i = 0; i < rows; ++i)
        if (from[i] != i) {
            moved.push_back(i);
            overwritten[static_cast<size_t>(i)] = 1;
        }
    if (moved.empty()) return;
    // A source row that is itself overwritten is read from its copy set aside beforehand.
    std::vector<int64_t> slot(static_cast<size_t>(rows), -1), kept;
    for (int64_t i : moved) {
        const int64_t s = from[i];
        if (overwritten[static_cast<size_t>(s)] && slot[static_cast<size_t>(s)] < 0) {
            slot[static_cast<size_t>(s)] = static_cast<int64_t>(kept.size());
            kept.push_back(s);
        }
    }
    const size_t row_runs = static_cast<size_t>(runs_per_row);
    std::unique_ptr<char[]> aside(kept.empty() ? nullptr : new char[kept.size() * row_runs * run_bytes]);
    for_each_run(static_cast<int64_t>(kept.size()) * runs_per_row, run_bytes, [&](int64_t j) {
        const int64_t k = j / runs_per_row, h = j % runs_per_row;
        std::memcpy(aside.get() + static_cast<size_t>(j) * run_bytes,
                    base + static_cast<size_t>(kept[static_cast<size_t>(k)] * runs_per_row + h) * stride_bytes, run_bytes);
    });
    for_each_run(static_cast<int64_t>(moved.size()) * runs_per_row, run_bytes, [&](int64_t j) {
        const int64_t i = moved[static_cast<size_t>(j / runs_per_row)], h = j % runs_per_row, s = from[i];
        const int64_t k = slot[static_cast<size_t>(s)];
        const char* src = k >= 0 ? aside.get() + static_cast<size_t>(k * runs_per_row + h) * run_bytes
                                 : base + static_cast<size_t>(s * runs_per_row + h) * stride_bytes;
        std::memcpy(base + static_cast<size_t>(i * runs_per_row + h) * stride_bytes, src, run_bytes);
    });
}

}  // namespace attnviz
