// Checkpoint file layout (all integers little-endian):
//   8 bytes  magic "ATTNVIZ\x01"
//   u32      format version
//   u64 n, n bytes   JSON metadata (configs, vocabularies, history)
//   u64 n, n bytes   model weights (a LibTorch archive)
//   u64 n, n bytes   optimiser state (a LibTorch archive; may be empty)
//   u64      FNV-1a 64 checksum of everything above
// The checksum catches truncation and corruption before LibTorch parses
// anything, so a damaged file is a clear error instead of wrong weights.
#include "core/checkpoint.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/export.hpp"

namespace attnviz {

namespace {
constexpr char k_magic[8] = {'A', 'T', 'T', 'N', 'V', 'I', 'Z', '\x01'};

uint64_t fnv1a(const char* data, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= static_cast<unsigned char>(data[i]);
        h *= 1099511628211ull;
    }
    return h;
}

template <typename T>
void put(std::string& out, T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

void put_blob(std::string& out, const std::string& blob) {
    put<uint64_t>(out, blob.size());
    out += blob;
}

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
            throw FileError("checkpoint '" + m_path + "' is truncated: it ends inside the " + what + " (file has " +
                            std::to_string(m_data.size()) + " bytes)");
    }
    const std::string& m_data;
    const std::string& m_path;
    size_t m_pos = 0;
};

std::string level_name(TokenLevel l) { return l == TokenLevel::character ? "char" : "word"; }

std::string model_bytes(Seq2Seq& model) {
    torch::serialize::OutputArchive archive;
    model->save(archive);
    std::ostringstream os;
    archive.save_to(os);
    return os.str();
}
}  // namespace

void save_checkpoint(const Checkpoint& c, const std::string& path) {
    nlohmann::json meta = {{"format", "attnviz-checkpoint"},
                           {"version", checkpoint_version},
                           {"attnviz", ATTNVIZ_VERSION},
                           {"model", c.model_config.to_json()},
                           {"train", c.train_config.to_json()},
                           {"level", level_name(c.level)},
                           {"src_vocab", c.src_vocab.to_json()},
                           {"tgt_vocab", c.tgt_vocab.to_json()},
                           {"history", c.history.to_json()},
                           {"corpus", c.corpus_name}};
    Seq2Seq model = c.model;
    std::string out(k_magic, sizeof(k_magic));
    put<uint32_t>(out, checkpoint_version);
    put_blob(out, meta.dump());
    put_blob(out, model_bytes(model));
    put_blob(out, c.optimizer_state);
    put<uint64_t>(out, fnv1a(out.data(), out.size()));
    write_file_atomic(path, out);
}

void save_checkpoint(Trainer& trainer, const std::string& path) {
    Checkpoint c;
    c.model_config = trainer.model_config();
    c.train_config = trainer.train_config();
    c.level = trainer.data().level;
    c.src_vocab = trainer.data().src_vocab;
    c.tgt_vocab = trainer.data().tgt_vocab;
    c.history = trainer.history();
    c.corpus_name = trainer.data().name;
    c.model = trainer.model();
    torch::serialize::OutputArchive archive;
    trainer.optimizer().save(archive);
    std::ostringstream os;
    archive.save_to(os);
    c.optimizer_state = os.str();
    save_checkpoint(c, path);
}

Checkpoint load_checkpoint(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw FileError("cannot open checkpoint '" + path + "': " + std::strerror(errno));
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.size() < sizeof(k_magic) || std::memcmp(data.data(), k_magic, sizeof(k_magic)) != 0)
        throw FileError("'" + path + "' is not an attnviz checkpoint (it does not start with the ATTNVIZ header)");
    Reader r(data, path);
    for (size_t i = 0; i < sizeof(k_magic); ++i) r.get<uint8_t>("header");
    const auto version = r.get<uint32_t>("header");
    if (version > static_cast<uint32_t>(checkpoint_version) || version == 0)
        throw FileError("checkpoint '" + path + "' has format version " + std::to_string(version) +
                        "; this attnviz reads version " + std::to_string(checkpoint_version) +
                        " (was it written by a newer attnviz?)");
    const std::string meta_text = r.blob("metadata");
    const std::string weights = r.blob("model weights");
    const std::string optimizer = r.blob("optimiser state");
    const size_t body = r.pos();
    const auto checksum = r.get<uint64_t>("checksum");
    if (checksum != fnv1a(data.data(), body))
        throw FileError("checkpoint '" + path + "' is corrupt (checksum mismatch); it was damaged after it was written");
    if (r.pos() != data.size())
        throw FileError("checkpoint '" + path + "' has " + std::to_string(data.size() - r.pos()) +
                        " unexpected bytes after its end");

    Checkpoint c;
    try {
        const auto meta = nlohmann::json::parse(meta_text);
        if (meta.at("format") != "attnviz-checkpoint") throw FileError("unknown format");
        c.model_config = ModelConfig::from_json(meta.at("model"));
        c.train_config = TrainConfig::from_json(meta.at("train"));
        c.level = meta.at("level") == "char" ? TokenLevel::character : TokenLevel::word;
        c.src_vocab = Vocab::from_json(meta.at("src_vocab"));
        c.tgt_vocab = Vocab::from_json(meta.at("tgt_vocab"));
        c.history = TrainHistory::from_json(meta.at("history"));
        c.corpus_name = meta.value("corpus", std::string());
    } catch (const std::exception& e) {
        throw FileError("checkpoint '" + path + "' has unreadable metadata: " + e.what());
    }
    if (c.model_config.src_vocab != static_cast<int64_t>(c.src_vocab.size()) ||
        c.model_config.tgt_vocab != static_cast<int64_t>(c.tgt_vocab.size()))
        throw FileError("checkpoint '" + path + "' is inconsistent: vocabulary sizes differ from the model's");
    try {
        c.model = Seq2Seq(c.model_config);
        torch::serialize::InputArchive archive;
        archive.load_from(weights.data(), weights.size());
        c.model->load(archive);
        c.model->eval();
    } catch (const c10::Error& e) {
        throw FileError("checkpoint '" + path + "': the model weights do not match its configuration (" +
                        std::string(e.what_without_backtrace()).substr(0, 200) + ")");
    }
    c.optimizer_state = optimizer;
    return c;
}

std::unique_ptr<Trainer> resume_trainer(const Checkpoint& c, TrainingData data, TrainConfig config) {
    data.src_vocab = c.src_vocab;
    data.tgt_vocab = c.tgt_vocab;
    data.level = c.level;
    auto trainer = std::make_unique<Trainer>(std::move(data), c.model_config, config);
    {
        torch::NoGradGuard no_grad;
        auto src = c.model->named_parameters();
        for (auto& item : trainer->model()->named_parameters()) item.value().copy_(src[item.key()]);
    }
    if (!c.optimizer_state.empty() && c.train_config.optimizer == config.optimizer) {
        try {
            torch::serialize::InputArchive archive;
            archive.load_from(c.optimizer_state.data(), c.optimizer_state.size(), trainer->device());
            trainer->optimizer().load(archive);
            for (auto& group : trainer->optimizer().param_groups()) group.options().set_lr(config.lr);
        } catch (const c10::Error& e) {
            throw FileError(std::string("checkpoint: the optimiser state could not be restored (") +
                            e.what_without_backtrace() + ")");
        }
    }
    trainer->history() = c.history;
    return trainer;
}

}  // namespace attnviz
