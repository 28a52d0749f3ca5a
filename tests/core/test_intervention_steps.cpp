// What-if interventions computed from a step's own weights (permute, zero=N) run a constant
// number of decoder steps per output token (core/decode/intervene.hpp), counted through
// the family seam rather than timed, and decode what replaying the decoder from its start
// at every step (the quadratic way they used to) decodes, on an RNN and a Transformer.
#include "catch_torch.hpp"

#include <sstream>

#include <ATen/CPUGeneratorImpl.h>

#include "core/decode/greedy.hpp"
#include "core/decode/intervene.hpp"
#include "core/model/families.hpp"
#include "test_support.hpp"
#include "tiny_transformer.hpp"
#include "trained_reverse.hpp"

using namespace attnviz;

namespace {

/// A network that counts its decoder steps and otherwise is the one it wraps.
class CountingNetwork : public EncoderDecoder {
public:
    explicit CountingNetwork(Network inner) : m_inner(std::move(inner)) { register_module("inner", m_inner); }
    int64_t steps = 0;
    const ModelConfig& config() const override { return m_inner->config(); }
    std::shared_ptr<const EncodedSource> encode(const torch::Tensor& src, const torch::Tensor& src_len,
                                                bool keep_maps = true) override {
        return m_inner->encode(src, src_len, keep_maps);
    }
    MemoryCost memory_cost() const override { return m_inner->memory_cost(); }
    ShapeCost forward_work() const override { return m_inner->forward_work(); }
    std::vector<HeadGroup> head_groups() const override { return m_inner->head_groups(); }
    std::unique_ptr<DecoderCache> start(const EncodedSource& source) override { return m_inner->start(source); }
    StepOutput step(const torch::Tensor& tokens, DecoderCache& cache, const EncodedSource& source,
                    const AttentionIntervention* intervention) override {
        ++steps;
        return m_inner->step(tokens, cache, source, intervention);
    }
    torch::Tensor embed_source(const torch::Tensor& src) override { return m_inner->embed_source(src); }
    torch::Tensor embed_target(const torch::Tensor& tgt) override { return m_inner->embed_target(tgt); }
    torch::Tensor forward_embedded(const torch::Tensor& src_emb, const torch::Tensor& src_len,
                                   const torch::Tensor& tgt_emb) override {
        return m_inner->forward_embedded(src_emb, src_len, tgt_emb);
    }
    torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                          double teacher_forcing) override {
        return m_inner->forward(src, src_len, tgt_in, teacher_forcing);
    }
    torch::Tensor loss(const torch::Tensor& src, const torch::Tensor& src_len, const torch::Tensor& tgt_in,
                       const torch::Tensor& tgt_out, const LossOptions& options) override {
        return m_inner->loss(src, src_len, tgt_in, tgt_out, options);
    }

private:
    Network m_inner;
};

std::vector<std::string> words(const std::string& sentence) {
    std::istringstream in(sentence);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

Intervention make_intervention(InterventionKind kind, int64_t source_token = 0, uint64_t seed = 0) {
    Intervention iv;
    iv.kind = kind;
    iv.source_token = source_token;
    iv.seed = seed;
    return iv;
}

/// What greedy decoding of one sentence gives, the quadratic way: each step's own weights read
/// by running the decoder again from its start with the tokens and interventions so far.
struct Replayed {
    std::vector<int64_t> ids;
    std::vector<float> log_probs;
    std::vector<std::vector<float>> weights;  ///< per step, the weights it used
};
Replayed replay_decode(const TranslationModel& model, const std::vector<std::string>& source, const Intervention& iv,
                       int64_t max_length) {
    torch::InferenceMode guard;
    EncoderDecoder& net = *model.network();
    const SourceBatch batch = encode_sources({source}, {0}, model.src_vocab(), torch::kCPU);
    const auto enc = net.encode(batch.src, batch.src_len);
    auto generator = at::detail::createCPUGenerator(iv.seed);
    std::vector<torch::Tensor> fed;
    std::vector<torch::Tensor> used;
    Replayed r;
    auto tokens = torch::full({1}, Vocab::bos_id, torch::kLong);
    for (int64_t step = 0; step < max_length; ++step) {
        auto cache = net.start(*enc);
        for (size_t k = 0; k < fed.size(); ++k) {
            AttentionIntervention before;
            before.cross_weights = used[k];
            net.step(fed[k], *cache, *enc, &before);
        }
        const auto own = net.step(tokens, *cache, *enc).maps.at(0).weights;
        AttentionIntervention now;
        now.cross_weights = intervention_weights(iv, own, enc->mask, batch.lengths(), generator);
        // The real step, from a cache replayed once more (the one above has moved on).
        auto fresh = net.start(*enc);
        for (size_t k = 0; k < fed.size(); ++k) {
            AttentionIntervention before;
            before.cross_weights = used[k];
            net.step(fed[k], *fresh, *enc, &before);
        }
        const auto out = net.step(tokens, *fresh, *enc, &now);
        const auto logp = output_log_probs(out.logits);
        const int64_t id = logp.argmax(-1).item<int64_t>();
        r.ids.push_back(id);
        r.log_probs.push_back(logp[0][id].item<float>());
        const auto w = now.cross_weights[0].contiguous();
        r.weights.emplace_back(w.data_ptr<float>(), w.data_ptr<float>() + batch.lengths()[0]);
        fed.push_back(tokens);
        used.push_back(now.cross_weights);
        if (id == Vocab::eos_id) break;
        tokens = torch::full({1}, id, torch::kLong);
    }
    return r;
}

/// The trained reverse RNN and a tiny Transformer (2 blocks, 4 heads, untrained), each with
/// sentences of its vocabulary.
struct InterventionCase {
    std::string name;
    TranslationModelPtr model;
    std::vector<std::string> sentences;
};
std::vector<InterventionCase> cases() {
    std::vector<InterventionCase> out;
    out.push_back({"rnn", testing::trained_reverse(), {"a b c d e", "j i h g f e d c", "c a"}});
    const Vocab src = Vocab::build({{"a", "b", "c", "d", "e"}});
    const Vocab tgt = Vocab::build({{"v", "w", "x", "y", "z"}});
    Network t = build_network(testing::tiny_transformer_config(static_cast<int64_t>(src.size()),
                                                               static_cast<int64_t>(tgt.size()), 4, 24, 3));
    {
        torch::NoGradGuard ng;  // sharper attention and outputs than an initialisation's
        for (auto& p : t->named_parameters())
            if (p.key().find("W_q") != std::string::npos || p.key().find("dense") != std::string::npos)
                p.value().mul_(4.0);
    }
    out.push_back({"transformer", testing::as_model(t, src, tgt), {"a b c d e", "e e d", "b"}});
    return out;
}

}  // namespace

TEST_CASE("permute and zero run two decoder steps per output token however long the output", "[intervention]") {
    for (const auto& c : cases()) {
        auto counting = std::make_shared<CountingNetwork>(c.model->network());
        const SearchModel searcher(counting, c.model->src_vocab(), c.model->tgt_vocab(), c.model->level());
        for (const auto kind : {InterventionKind::permute, InterventionKind::zero_token, InterventionKind::uniform}) {
            for (const int64_t length : {4, 40}) {
                INFO(c.name << ", " << to_string(kind) << ", " << length << " tokens");
                DecodeOptions o;
                o.max_length = length;
                o.generation.min_length = length + 1;  // <eos> barred: every output is `length` long
                o.intervention = make_intervention(kind, 0, 5);
                counting->steps = 0;
                const auto t = greedy_decode(searcher, {{"a", "b", "c"}}, o);
                REQUIRE(static_cast<int64_t>(t.at(0).best().ids.size()) == length);
                // Permuted and zeroed weights are read from a copy of the step: one more step
                // each; uniform needs none.
                const int64_t per_token = kind == InterventionKind::uniform ? 1 : 2;
                CHECK(counting->steps == per_token * length);
            }
        }
    }
}

TEST_CASE("permute and zero decode what replaying every step from the start decoded", "[intervention]") {
    for (const auto& c : cases()) {
        for (const auto& iv : {make_intervention(InterventionKind::permute, 0, 7), make_intervention(InterventionKind::permute, 0, 12),
                               make_intervention(InterventionKind::zero_token, 0), make_intervention(InterventionKind::zero_token, 1)}) {
            for (const auto& sentence : c.sentences) {
                INFO(c.name << ", " << iv.describe() << ", \"" << sentence << "\"");
                const std::vector<std::string> source = words(sentence);
                if (iv.source_token > static_cast<int64_t>(source.size())) continue;
                DecodeOptions o;
                o.max_length = 12;
                o.intervention = iv;
                const Hypothesis h = c.model->translate_tokens({source}, o).at(0).best();
                const Replayed r = replay_decode(*c.model, source, iv, o.max_length);
                CHECK(h.ids == r.ids);
                REQUIRE(h.step_log_prob.size() == r.log_probs.size());
                for (size_t s = 0; s < r.log_probs.size(); ++s) {
                    CHECK(h.step_log_prob[s] == Approx(r.log_probs[s]).margin(1e-5));
                    const auto& row = h.attention.weights().at(s);
                    REQUIRE(row.size() == r.weights[s].size());
                    for (size_t k = 0; k < row.size(); ++k) CHECK(row[k] == Approx(r.weights[s][k]).margin(1e-6));
                }
            }
        }
    }
}
