#include "core/model/row_gather.hpp"

#include <algorithm>
#include <cstring>

#include <ATen/Parallel.h>

namespace attnviz {

void gather_runs(char* dst, const char* src, const int64_t* from, int64_t rows, int64_t runs_per_row,
                 size_t stride_bytes, size_t run_bytes) {
    const int64_t total = rows * runs_per_row;
    if (total <= 0 || run_bytes == 0) return;
    const auto grain = static_cast<int64_t>(std::max<size_t>(1, (size_t{1} << 18) / run_bytes));
    at::parallel_for(0, total, grain, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
            const int64_t i = j / runs_per_row, h = j % runs_per_row;
            std::memcpy(dst + static_cast<size_t>(j) * stride_bytes,
                        src + static_cast<size_t>(from[i] * runs_per_row + h) * stride_bytes, run_bytes);
        }
    });
}

}  // namespace attnviz
