#pragma once
// The private half of core/io/torch_bin.hpp: the restricted unpickler
// (torch_bin_pickle.cpp), which torch_bin.cpp runs on data.pkl before it binds the
// storages it names to the zip's entries.
#include <string>
#include <string_view>
#include <vector>

#include "core/io/torch_bin.hpp"

namespace attnviz::torch_bin::detail {

/// A storage as the pickle names it (its bytes are found in the zip afterwards).
struct PickledStorage {
    std::string key;
    DType dtype = DType::F32;
    uint64_t numel = 0;
};

/// What data.pkl holds: the tensors (with `storage` indexing `storages`), each already
/// checked to lie inside its storage's numel elements.
struct PickledStateDict {
    std::vector<PickledStorage> storages;
    std::vector<TensorRecord> tensors;
};

/// Unpickles a state_dict from `pickle` (the bytes of data.pkl) with the restricted
/// unpickler core/io/torch_bin.hpp describes. Throws FileError "'FILE' ... (data.pkl,
/// byte N)" naming what was refused.
PickledStateDict unpickle_state_dict(std::string_view pickle, const std::string& file, const Limits& limits);

}  // namespace attnviz::torch_bin::detail
