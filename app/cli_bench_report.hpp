#pragma once
// What attnviz-cli's timing commands (bench-decode, bench-attribute) share: the median of
// their rounds and the lines of their JSON that say what was timed where.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/decode/translation_model.hpp"
#include "core/model/device.hpp"
#include "core/model/mkl_dispatch.hpp"

namespace attnviz::cli {

/// The upper median of the rounds (0 when none).
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

/// {"model": its configuration, "tgt_vocab", "repeat", "device", "threads", "torch",
/// "mkl_code_path" (mkl_dispatch.hpp)}.
inline nlohmann::json bench_environment(const TranslationModel& model, int64_t repeat) {
    return {{"model", model.config().to_json()},
            {"tgt_vocab", model.tgt_vocab().size()},
            {"repeat", repeat},
            {"device", describe_device(model.device())},
            {"threads", at::get_num_threads()},
            {"torch", libtorch_version()},
            {"mkl_code_path", mkl_code_path()}};
}

}  // namespace attnviz::cli
