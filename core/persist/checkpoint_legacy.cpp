// Version-1 reader, for upgrade_checkpoint only. Layout (little-endian):
//   8 bytes  magic "ATTNVIZ\x01"
//   u32      format version (1)
//   u64 n, n bytes   JSON metadata (configs, vocabularies, history)
//   u64 n, n bytes   model weights (a LibTorch archive)
//   u64 n, n bytes   optimiser state (a LibTorch archive; may be empty)
//   u64      FNV-1a 64 checksum of everything above
#include "core/persist/checkpoint_legacy.hpp"
#include "core/persist/network_check.hpp"

#include <cstring>

#include <nlohmann/json.hpp>

#include "core/persist/checkpoint_meta.hpp"
#include "core/io/checksum.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/model/families.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/persist/parameter_names.hpp"

namespace attnviz {

namespace {
constexpr uint64_t k_max_file = uint64_t(8) << 30;
// A LibTorch archive is a zip of one pickle plus one raw entry per tensor;
// these bound what it may add to the raw float32 data (measured: ~1 KB per tensor).
constexpr uint64_t k_archive_base = 64 << 10;
constexpr uint64_t k_archive_per_tensor = 4 << 10;

class Reader {
public:
    Reader(const std::string& data, const std::string& path) : m_data(data), m_path(path) {}
    template <typename T>
    T get(const char* what) {
        need(sizeof(T), what);
        uint64_t v = 0;
        for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(m_data[m_pos + i])) << (8 * i);
        m_pos += sizeof(T);
        return static_cast<T>(v);
    }
    std::string blob(const char* what) {
        const auto n = get<uint64_t>(what);
        need(n, what);
        std::string s = m_data.substr(m_pos, n);
        m_pos += n;
        return s;
    }
    size_t pos() const { return m_pos; }

private:
    void need(uint64_t n, const char* what) {
        if (n > m_data.size() - m_pos)
            throw FileError("checkpoint " + quote(m_path, quote_path_max) + " is truncated: it ends inside the " + what + " (file has " +
                            std::to_string(m_data.size()) + " bytes)");
    }
    const std::string& m_data;
    const std::string& m_path;
    size_t m_pos = 0;
};

void check_archive_size(uint64_t size, uint64_t floats, size_t tensors, const char* what, const std::string& path) {
    uint64_t most = 0;
    if (__builtin_add_overflow(floats, k_archive_base + k_archive_per_tensor * tensors, &most) || size < floats ||
        size > most)
        throw FileError("checkpoint " + quote(path, quote_path_max) + ": its " + what + " take " + std::to_string(size) +
                        " bytes, implausible for its configuration (" + std::to_string(floats) +
                        " bytes of float32 data); refused before reading them");
}
}  // namespace

namespace {

/// A version-1 file taken apart, after every check that needs no LibTorch.
struct LegacyParts {
    CheckpointMeta meta;
    std::string weights, optimizer;
};

LegacyParts read_legacy(const std::string& path) {
    const std::string data = read_regular_file(path, k_max_file, "checkpoint");
    if (!is_legacy_checkpoint(data))
        throw FileError(quote(path, quote_path_max) + " is not a version-1 attnviz checkpoint (it does not start with ATTNVIZ\\x01)");
    Reader r(data, path);
    for (size_t i = 0; i < sizeof(legacy_checkpoint_magic); ++i) r.get<uint8_t>("header");
    const auto version = r.get<uint32_t>("header");
    if (version != 1)
        throw FileError("checkpoint " + quote(path, quote_path_max) + " has format version " + std::to_string(version) + ", expected 1");
    LegacyParts parts;
    const std::string meta_text = r.blob("metadata");
    parts.weights = r.blob("model weights");
    parts.optimizer = r.blob("optimiser state");
    const std::string& weights = parts.weights;
    const std::string& optimizer = parts.optimizer;
    const size_t body = r.pos();
    const auto checksum = r.get<uint64_t>("checksum");
    if (checksum != fnv1a(data.data(), body))
        throw FileError("checkpoint " + quote(path, quote_path_max) + " is corrupt (checksum mismatch); it was damaged after it was written");
    if (r.pos() != data.size())
        throw FileError("checkpoint " + quote(path, quote_path_max) + " has " + std::to_string(data.size() - r.pos()) +
                        " unexpected bytes after its end");

    const std::string what = "checkpoint " + quote(path, quote_path_max);
    const auto meta_json = parse_json_bounded(meta_text, what + ": metadata");
    if (!meta_json.is_object() || !meta_json.contains("format") || meta_json["format"] != "attnviz-checkpoint")
        throw FileError(what + ": its metadata is not an attnviz checkpoint's");
    const auto src = meta_json.find("src_vocab"), tgt = meta_json.find("tgt_vocab");
    if (src == meta_json.end() || tgt == meta_json.end()) throw FileError(what + ": its metadata has no vocabularies");
    parts.meta = read_json_fields(what + ": metadata", [&] { return meta_from_json(meta_json, *src, *tgt, what); });
    const CheckpointMeta& meta = parts.meta;

    // The archives must be about as large as the configuration's tensors before LibTorch reads them.
    const auto expected = parameter_names(meta.model);
    const uint64_t weight_bytes = parameter_bytes(expected);
    check_archive_size(weights.size(), weight_bytes, expected.size(), "weights", path);
    if (!optimizer.empty()) {
        // At most one float32 tensor per slot and parameter.
        const uint64_t slots = optimizer_slots(meta.train.optimizer).size();
        uint64_t floats = 0;
        if (__builtin_mul_overflow(weight_bytes, slots, &floats) ||
            optimizer.size() > floats + k_archive_base + k_archive_per_tensor * expected.size() * (slots + 1))
            throw FileError(what + ": its optimiser state takes " + std::to_string(optimizer.size()) +
                            " bytes, more than its configuration allows; refused before reading it");
    }
    return parts;
}

}  // namespace

void check_legacy_checkpoint(const std::string& path) { read_legacy(path); }

Checkpoint load_legacy_checkpoint(const std::string& path) {
    const LegacyParts parts = read_legacy(path);
    const CheckpointMeta& meta = parts.meta;
    const std::string& weights = parts.weights;
    const std::string& optimizer = parts.optimizer;
    const std::string what = "checkpoint " + quote(path, quote_path_max);
    Network network = build_network(meta.model);
    OptimizerState state;
    try {
        torch::serialize::InputArchive archive;
        archive.load_from(weights.data(), weights.size());
        network->load(archive);
        check_network_parameters(*network, what);
        if (!optimizer.empty()) {
            TrainConfig train = meta.train;
            auto opt = make_optimizer(*network, train);
            torch::serialize::InputArchive opt_archive;
            opt_archive.load_from(optimizer.data(), optimizer.size());
            opt->load(opt_archive);
            state = capture_optimizer_state(*opt, *network, train.optimizer);
        }
    } catch (const c10::Error& e) {
        throw FileError(what + ": its weights do not match its configuration (" +
                        std::string(e.what_without_backtrace()).substr(0, 200) + ")");
    }
    Checkpoint c;
    c.model = std::make_shared<const TranslationModel>(network, meta.src_vocab, meta.tgt_vocab, meta.tokenizer, meta.train,
                                                       meta.history, meta.corpus);
    c.optimizer_state = std::move(state);
    return c;
}

void upgrade_checkpoint(const std::string& from, const std::string& to) {
    save_checkpoint(load_legacy_checkpoint(from), to);
}

}  // namespace attnviz
