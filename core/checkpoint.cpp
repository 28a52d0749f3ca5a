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


std::string model_bytes(Seq2Seq model) {
    torch::serialize::OutputArchive archive;
    model->save(archive);
    std::ostringstream os;
    archive.save_to(os);
    return os.str();
}
}  // namespace

void save_checkpoint(const Checkpoint& c, const std::string& path) {
    if (!c.model) throw ConfigError("there is no model to save");
    const TranslationModel& m = *c.model;
    nlohmann::json meta = {{"format", "attnviz-checkpoint"},
                           {"version", checkpoint_version},
                           {"attnviz", ATTNVIZ_VERSION},
                           {"model", m.config().to_json()},
                           {"train", m.trained_with().to_json()},
                           {"level", to_string(m.level())},
                           {"tokenizer", m.tokenizer().to_json()},
                           {"src_vocab", m.src_vocab().to_json()},
                           {"tgt_vocab", m.tgt_vocab().to_json()},
                           {"history", m.history().to_json()},
                           {"corpus", m.corpus_name()}};
    std::string out(k_magic, sizeof(k_magic));
    put<uint32_t>(out, checkpoint_version);
    put_blob(out, meta.dump());
    put_blob(out, model_bytes(m.network()));
    put_blob(out, c.optimizer_state);
    put<uint64_t>(out, fnv1a(out.data(), out.size()));
    write_file_atomic(path, out);
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

    ModelConfig model_config;
    TrainConfig train_config;
    TokenizerPtr tokenizer;
    std::shared_ptr<const Vocab> src_vocab, tgt_vocab;
    TrainHistory history;
    std::string corpus_name;
    try {
        const auto meta = nlohmann::json::parse(meta_text);
        if (meta.at("format") != "attnviz-checkpoint") throw FileError("unknown format");
        model_config = ModelConfig::from_json(meta.at("model"));
        train_config = TrainConfig::from_json(meta.at("train"));
        // "tokenizer" (with a subword model) since attnviz has subwords; "level" before.
        tokenizer = meta.contains("tokenizer")
                        ? Tokenizer::from_json(meta.at("tokenizer"))
                        : Tokenizer::for_level(meta.at("level") == "char" ? TokenLevel::character : TokenLevel::word);
        src_vocab = std::make_shared<const Vocab>(Vocab::from_json(meta.at("src_vocab")));
        tgt_vocab = std::make_shared<const Vocab>(Vocab::from_json(meta.at("tgt_vocab")));
        history = TrainHistory::from_json(meta.at("history"));
        corpus_name = meta.value("corpus", std::string());
    } catch (const std::exception& e) {
        throw FileError("checkpoint '" + path + "' has unreadable metadata: " + e.what());
    }
    if (model_config.src_vocab != static_cast<int64_t>(src_vocab->size()) ||
        model_config.tgt_vocab != static_cast<int64_t>(tgt_vocab->size()))
        throw FileError("checkpoint '" + path + "' is inconsistent: vocabulary sizes differ from the model's");
    Seq2Seq network{nullptr};
    try {
        network = Seq2Seq(model_config);
        torch::serialize::InputArchive archive;
        archive.load_from(weights.data(), weights.size());
        network->load(archive);
    } catch (const c10::Error& e) {
        throw FileError("checkpoint '" + path + "': the model weights do not match its configuration (" +
                        std::string(e.what_without_backtrace()).substr(0, 200) + ")");
    } catch (const ConfigError& e) {
        throw FileError("checkpoint '" + path + "': " + e.what());
    }
    Checkpoint c;
    c.model = std::make_shared<const TranslationModel>(network, src_vocab, tgt_vocab, tokenizer, train_config,
                                                       std::move(history), corpus_name);
    c.optimizer_state = optimizer;
    return c;
}

}  // namespace attnviz
