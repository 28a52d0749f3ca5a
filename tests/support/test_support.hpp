#pragma once
// Small helpers shared by the core tests.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include <ATen/Parallel.h>

#include "core/config/pretrained_config.hpp"
#include "core/model/rnn_model.hpp"
#include "core/train/train.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz::testing {

/// Runs a scope with `threads` intra-op threads, then puts the previous count back.
struct ThreadCount {
    int previous = at::get_num_threads();
    explicit ThreadCount(int threads) { at::set_num_threads(threads); }
    ~ThreadCount() { at::set_num_threads(previous); }
    ThreadCount(const ThreadCount&) = delete;
    ThreadCount& operator=(const ThreadCount&) = delete;
};

/// The device of the tests that can run on either (tag `[device]`): the CPU, or
/// ATTNVIZ_TEST_DEVICE ("cuda", "cuda:1") on a machine with a GPU; CI runs them on the
/// CPU, tools/gpu_check.sh on the GPU too. Naming a device that is absent fails the test.
inline torch::Device test_device() {
    const char* env = std::getenv("ATTNVIZ_TEST_DEVICE");
    if (!env || !*env) return torch::kCPU;
    const torch::Device d{std::string(env)};
    // "cuda" means the current GPU, which tensors name with its index ("cuda:0").
    return d.is_cuda() && !d.has_index() ? torch::Device(torch::kCUDA, 0) : d;
}

/// A tiny model config over the given vocabulary sizes.
/// The sizes of a pretrained model in Marian's layout that a test builds (marian_config).
struct MarianSizes {
    int64_t d_model = 16, encoder_layers = 1, decoder_layers = 2, encoder_heads = 2, decoder_heads = 4;
    int64_t encoder_ffn = 24, decoder_ffn = 24, max_positions = 64;
    int64_t vocab = 9;  ///< one vocabulary for both sides
};

/// A ModelConfig of the pretrained architecture, Marian's family, of those sizes.
inline ModelConfig marian_config(const MarianSizes& s = {}) {
    auto spec = std::make_shared<PretrainedSpec>();
    PretrainedConfig& p = spec->model;
    p.family = PretrainedFamily::marian;
    p.d_model = s.d_model;
    p.encoder_layers = s.encoder_layers;
    p.decoder_layers = s.decoder_layers;
    p.encoder_heads = s.encoder_heads;
    p.decoder_heads = s.decoder_heads;
    p.encoder_ffn = s.encoder_ffn;
    p.decoder_ffn = s.decoder_ffn;
    p.max_positions = s.max_positions;
    p.vocab_size = p.decoder_vocab_size = s.vocab;
    ModelConfig c;
    c.arch = ModelArch::pretrained;
    c.pretrained = spec;
    return c;
}

inline ModelConfig tiny_config(Scoring scoring, int64_t src_vocab = 12, int64_t tgt_vocab = 11) {
    ModelConfig c;
    c.src_vocab = src_vocab;
    c.tgt_vocab = tgt_vocab;
    c.embed_size = 8;
    c.hidden_size = 16;
    c.num_layers = 2;
    c.scoring = scoring;
    c.seed = 7;
    return c;
}

/// A network and its vocabularies as the TranslationModel every translation goes through.
inline TranslationModelPtr as_model(Network network, const Vocab& src, const Vocab& tgt,
                                    TokenLevel level = TokenLevel::word) {
    return std::make_shared<const TranslationModel>(std::move(network), std::make_shared<const Vocab>(src),
                                                    std::make_shared<const Vocab>(tgt), level);
}
/// The same for an RNN held as the tests build it (Seq2Seq(config)).
inline TranslationModelPtr as_model(const Seq2Seq& network, const Vocab& src, const Vocab& tgt,
                                    TokenLevel level = TokenLevel::word) {
    return as_model(Network(network.ptr()), src, tgt, level);
}

/// A padded batch of random ids with the given source lengths (ids >= 4, <eos> last).
struct RandomBatch {
    torch::Tensor src, src_len, tgt_in, tgt_out;
};

inline RandomBatch random_batch(const std::vector<int64_t>& src_lens, int64_t tgt_len, int64_t src_vocab,
                                int64_t tgt_vocab) {
    torch::manual_seed(3);
    const int64_t B = static_cast<int64_t>(src_lens.size());
    int64_t S = 0;
    for (auto l : src_lens) S = std::max(S, l);
    RandomBatch r;
    r.src = torch::zeros({B, S}, torch::kLong);
    for (int64_t b = 0; b < B; ++b) {
        r.src[b].narrow(0, 0, src_lens[b]) = torch::randint(4, src_vocab, {src_lens[b]}, torch::kLong);
        r.src[b][src_lens[b] - 1] = 2;
    }
    r.src_len = torch::tensor(src_lens, torch::kLong);
    r.tgt_out = torch::randint(4, tgt_vocab, {B, tgt_len}, torch::kLong);
    r.tgt_in = torch::cat({torch::ones({B, 1}, torch::kLong), r.tgt_out.narrow(1, 0, tgt_len - 1)}, 1);
    return r;
}

/// Removes a directory tree. (std::filesystem::remove_all crashes in programs
/// linked with LibTorch 2.11's libtorch.so, which exports a broken copy of it.)
/// A batch of sentences of the given lengths (each ending in <eos>; targets start with
/// <bos>), random tokens >= 4 from the seed, padded to the longest.
inline RandomBatch ragged_batch(const std::vector<int64_t>& src_lens, const std::vector<int64_t>& tgt_lens,
                                int64_t src_vocab, int64_t tgt_vocab, uint64_t seed) {
    const auto B = static_cast<int64_t>(src_lens.size());
    const int64_t S = *std::max_element(src_lens.begin(), src_lens.end());
    const int64_t T = *std::max_element(tgt_lens.begin(), tgt_lens.end());
    torch::manual_seed(seed);
    RandomBatch r;
    r.src = torch::zeros({B, S}, torch::kLong);
    r.tgt_in = torch::zeros({B, T}, torch::kLong);
    r.tgt_out = torch::zeros({B, T}, torch::kLong);
    for (int64_t b = 0; b < B; ++b) {
        r.src[b].narrow(0, 0, src_lens[b]) = torch::randint(4, src_vocab, {src_lens[b]}, torch::kLong);
        r.src[b][src_lens[b] - 1] = Vocab::eos_id;
        auto out = torch::randint(4, tgt_vocab, {tgt_lens[b]}, torch::kLong);
        out[tgt_lens[b] - 1] = Vocab::eos_id;
        r.tgt_out[b].narrow(0, 0, tgt_lens[b]) = out;
        r.tgt_in[b][0] = Vocab::bos_id;
        if (tgt_lens[b] > 1) r.tgt_in[b].narrow(0, 1, tgt_lens[b] - 1) = out.narrow(0, 0, tgt_lens[b] - 1);
    }
    r.src_len = torch::tensor(src_lens, torch::kLong);
    return r;
}

/// A whole file's bytes ("" when it cannot be read).
inline std::string read_all(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
/// Writes bytes to a file, replacing it.
inline void write_all(const std::filesystem::path& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary);
    out << s;
}

inline void remove_tree(const std::filesystem::path& p) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
        std::vector<std::filesystem::path> children;
        for (const auto& e : std::filesystem::directory_iterator(p, ec)) children.push_back(e.path());
        for (const auto& c : children) remove_tree(c);
    }
    std::filesystem::remove(p, ec);
}

/// A fresh temporary directory ("attnviz-<tag>-XXXXXX"), removed with what it holds at the
/// end of the scope.
struct ScratchDir {
    std::string path;
    explicit ScratchDir(const std::string& tag = "test") {
        std::string tmpl = std::filesystem::temp_directory_path().string() + "/attnviz-" + tag + "-XXXXXX";
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed: " + tmpl);
        path = tmpl;
    }
    ~ScratchDir() { remove_tree(path); }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    std::string operator/(const std::string& name) const { return path + "/" + name; }
};

/// Runs `read` (a reader that must refuse a FIFO without a writer at once) on another
/// thread and returns its error message; "(blocked)" when it waited for a writer for a
/// minute (the FIFO is then opened for writing, so that the reader sees an end of file and
/// the thread ends), "(read)" when it did not refuse.
template <class Error, class Read>
std::string refusal_without_blocking(const std::string& fifo, Read read) {
    auto refused = std::async(std::launch::async, [&] {
        try {
            read();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(read)");
    });
    if (refused.wait_for(std::chrono::seconds(60)) == std::future_status::ready) return refused.get();
    const int fd = ::open(fifo.c_str(), O_WRONLY);
    if (fd >= 0) ::close(fd);
    refused.wait();
    return "(blocked)";
}

}  // namespace attnviz::testing
