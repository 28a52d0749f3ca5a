// Corpora in other scripts train like d2l's French: the English-Russian and
// English-Greek test corpora (tests/data) through prepare_data and the Trainer.
#include "catch_torch.hpp"

#include <map>
#include <set>

#include "core/data/data.hpp"
#include "core/train/train.hpp"
#include "test_text_fixtures.hpp"

using namespace attnviz;

namespace {

std::set<std::string> real_tokens(const Vocab& v) { return {v.tokens().begin() + 4, v.tokens().end()}; }

std::set<std::string> keys(const nlohmann::json& counts) {
    std::set<std::string> out;
    for (const auto& [token, count] : counts.items()) out.insert(token);
    return out;
}

}  // namespace

TEST_CASE("English-Russian and English-Greek corpora train with d2l's vocabularies", "[languages][learning]") {
    const auto& fx = testing::text_fixtures();
    for (const char* name : {"eng-rus.tsv", "eng-ell.tsv"}) {
        INFO(name);
        TrainConfig train;
        train.device = "cpu";
        train.epochs = 25;
        train.batch_size = 8;
        train.lr = 0.01;
        train.seed = 3;
        train.eval_sample = 0;
        train.vocab_includes_val = true;  // as d2l, whose vocabularies see every pair
        ModelConfig model;
        model.embed_size = 16;
        model.hidden_size = 32;
        model.num_layers = 1;
        TrainingData data = prepare_data(read_tsv(testing::test_data_path(name)), train);
        // Python's str.lower() + d2l's preprocessing + split, as tools/make_text_fixtures.py computed them.
        CHECK(real_tokens(data.src_vocab) == keys(fx.at("corpora").at(name).at("src")));
        CHECK(real_tokens(data.tgt_vocab) == keys(fx.at("corpora").at(name).at("tgt")));

        Trainer trainer(std::move(data), model, train);
        REQUIRE(trainer.run() == StopReason::finished);
        const auto& epochs = trainer.history().epochs;
        REQUIRE(epochs.size() == 25);
        INFO("train loss " << epochs.front().train_loss << " -> " << epochs.back().train_loss);
        CHECK(epochs.back().train_loss < 0.5 * epochs.front().train_loss);
    }
}
