// The parameter registry: one declaration per hyperparameter, and the
// validation, JSON, parsing and `params --json` generated from it.
#include "catch_torch.hpp"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/config/config.hpp"
#include "core/io/error.hpp"
#include "core/config/model_description.hpp"
#include "core/config/registry.hpp"

using namespace attnviz;
using nlohmann::json;

namespace {

/// Every field of the structs under its checkpoint key, written out here rather
/// than through the registry, so a parameter bound to the wrong field shows up.
std::map<std::string, json> struct_fields(const ModelConfig& m, const TrainConfig& t) {
    return {{"arch", to_string(m.arch)}, {"num_heads", m.num_heads}, {"ffn_size", m.ffn_size},
            {"d2l_decode_positions", m.d2l_decode_positions}, {"warmup_steps", t.warmup_steps},
            {"alignment_layer", t.alignment_layer}, {"alignment_heads", t.alignment_heads},
            {"embed_size", m.embed_size}, {"hidden_size", m.hidden_size}, {"num_layers", m.num_layers},
            {"attention_size", m.attention_size}, {"cell", to_string(m.cell)}, {"bidirectional", m.bidirectional},
            {"reverse_source", m.reverse_source}, {"scoring", to_string(m.scoring)}, {"dropout", m.dropout},
            {"source_steps", m.source_steps}, {"init", to_string(m.init)}, {"epochs", t.epochs}, {"batch_size", t.batch_size},
            {"optimizer", to_string(t.optimizer)}, {"lr", t.lr}, {"momentum", t.momentum},
            {"grad_clip", t.grad_clip}, {"teacher_forcing", t.teacher_forcing}, {"seed", t.seed},
            {"device", t.device}, {"precision", to_string(t.precision)}, {"bucket_window", t.bucket_window},
            {"fixed_steps", t.fixed_steps},
            {"max_length", t.max_length}, {"val_fraction", t.val_fraction}, {"max_batches", t.max_batches},
            {"snapshot_every", t.snapshot_every},
            {"checkpoint_every_minutes", t.checkpoint_every_minutes}, {"min_freq", t.min_freq},
            {"max_vocab", t.max_vocab}, {"split_shuffle", t.split_shuffle},
            {"vocab_includes_val", t.vocab_includes_val}, {"eval_sample", t.eval_sample}, {"head_stats", t.head_stats},
            {"patience", t.patience}, {"min_delta", t.min_delta}, {"keep_best", t.keep_best},
            {"lr_schedule", to_string(t.lr_schedule)},
            {"lr_factor", t.lr_factor}, {"lr_step", t.lr_step}, {"lr_patience", t.lr_patience},
            {"subword_vocab", t.subword_vocab}, {"subword_model", to_string(t.subword_model)},
            {"tensorboard", t.tensorboard}, {"tensorboard_every", t.tensorboard_every}};
}

/// A valid value of p other than its default.
json other_value(const ParamSpec& p) {
    const json& d = p.default_value;
    switch (p.type) {
        case ParamType::integer: {
            const double x = d.get<double>();
            return json(static_cast<int64_t>(x + 1 <= *p.max ? x + 1 : x - 1));
        }
        case ParamType::real: return json((d.get<double>() + (d == *p.max ? *p.min : *p.max)) / 2);
        case ParamType::boolean: return json(!d.get<bool>());
        case ParamType::choice: return json(p.choices.at(p.choices.at(0) == d ? 1 : 0));
        case ParamType::text:
            if (p.name == "alignment_heads") return json("0,2");
            if (p.name == "tensorboard") return json("runs/a");
            return json(d == "cpu" ? "cuda:1" : "cpu");
    }
    return {};
}

bool numeric(const ParamSpec& p) { return p.type == ParamType::integer || p.type == ParamType::real; }

}  // namespace

TEST_CASE("registry: every struct field is declared once, with the struct's default", "[registry]") {
    const auto fields = struct_fields(ModelConfig{}, TrainConfig{});
    std::set<std::string> names, flags;
    for (const auto& p : parameters()) {
        INFO(p.name);
        CHECK(names.insert(p.name).second);
        CHECK(flags.insert(p.flag).second);
        REQUIRE(fields.count(p.name) == 1);
        CHECK(p.default_value == fields.at(p.name));
        if (p.name != "seed")  // the seed is written to both JSON objects
            CHECK((p.group == ParamGroup::model) == ModelConfig{}.to_json().contains(p.name));
    }
    CHECK(names.size() == fields.size());
    CHECK(find_parameter("hidden").default_value == ModelConfig{}.hidden_size);
    CHECK(find_parameter("lr_factor").default_value.get<double>() == TrainConfig{}.lr_factor);
    // The existing CLI flags and checkpoint keys stay.
    CHECK(find_parameter("batch").name == "batch_size");
    CHECK(find_parameter("clip").name == "grad_clip");
    CHECK(find_parameter("steps").name == "fixed_steps");
    CHECK(find_parameter("layers").name == "num_layers");
}

TEST_CASE("registry: help, flags, labels, and ranges that hold the default and d2l's value", "[registry]") {
    for (const auto& p : parameters()) {
        INFO(p.name);
        CHECK_FALSE(p.help.empty());
        CHECK_FALSE(p.flag.empty());
        CHECK(p.flag.find('_') == std::string::npos);
        CHECK_FALSE(p.label.empty());
        REQUIRE(p.get);
        REQUIRE(p.put);
        if (numeric(p)) {
            REQUIRE(p.min);
            REQUIRE(p.max);
            CHECK(*p.min < *p.max);
        }
        if (p.type == ParamType::choice) {
            CHECK(p.choices.size() >= 2);
            CHECK(p.choice_labels.size() == p.choices.size());
        }
        CHECK_NOTHROW(check_value(p, p.default_value));
        if (!p.d2l_value.is_null()) CHECK_NOTHROW(check_value(p, p.d2l_value));
        // What format_value writes, parse_value reads back.
        CHECK(parse_value(p, format_value(p, p.default_value)) == p.default_value);
    }
    CHECK(find_parameter("dropout").max == 0.99);
    CHECK(find_parameter("lr").min_exclusive);
    CHECK(find_parameter("embed").d2l_value == 256);
    CHECK(find_parameter("grad_clip").zero_means == "off");
    CHECK(find_parameter("scoring").choice_labels.at(0) == "additive (Bahdanau)");
}

TEST_CASE("registry: JSON round trip of values other than the defaults", "[registry]") {
    Hyperparameters h;
    for (const auto& p : parameters()) {
        const json v = other_value(p);
        INFO(p.name << " = " << v.dump());
        REQUIRE(v != p.default_value);
        REQUIRE_NOTHROW(check_value(p, v));
        p.put(h, v);
        CHECK(p.get(h) == v);
    }
    h.model.src_vocab = 17;
    h.model.tgt_vocab = 23;
    const ModelConfig m = ModelConfig::from_json(h.model.to_json());
    const TrainConfig t = TrainConfig::from_json(h.train.to_json());
    CHECK(m.to_json() == h.model.to_json());
    CHECK(t.to_json() == h.train.to_json());
    CHECK(struct_fields(m, t) == struct_fields(h.model, h.train));
    CHECK(m.src_vocab == 17);
    CHECK(m.tgt_vocab == 23);
    CHECK(m.seed == h.train.seed);  // the one seed parameter sets both
    CHECK(h.model.seed == h.train.seed);
    CHECK(h.train.seed != TrainConfig{}.seed);
}

TEST_CASE("registry: out-of-range values are refused, naming the flag or the key", "[registry]") {
    for (const auto& p : parameters()) {
        if (!numeric(p)) continue;
        const double step = p.type == ParamType::integer ? 1 : 0.001;
        std::vector<double> bad{*p.max + step, p.min_exclusive ? *p.min : *p.min - step};
        for (double x : bad) {
            const json v = p.type == ParamType::integer ? json(static_cast<int64_t>(x)) : json(x);
            INFO(p.name << " = " << v.dump());
            CHECK_THROWS_WITH(check_value(p, v), Catch::StartsWith("--" + p.flag + ": expected"));
            CHECK_THROWS_WITH(parse_value(p, format_value(p, v)), Catch::Contains("--" + p.flag + ":"));
            Hyperparameters h;
            CHECK_THROWS_WITH(parameters_from_json(h, p.group, json{{p.name, v}}),
                              Catch::StartsWith("'" + p.name + "': expected"));
            CHECK(p.get(h) == p.default_value);  // nothing written
            p.put(h, v);  // e.g. a struct filled in by code: validate() catches it
            if (p.group == ParamGroup::model)
                CHECK_THROWS_WITH(h.model.validate(), Catch::Contains("(--" + p.flag + ")"));
            else
                CHECK_THROWS_WITH(h.train.validate(), Catch::Contains("(--" + p.flag + ")"));
        }
    }
    // Wrong types and names, too.
    CHECK_THROWS_WITH(ModelConfig::from_json(json{{"dropout", "high"}}), Catch::Contains("'dropout'"));
    CHECK_THROWS_WITH(ModelConfig::from_json(json{{"hidden_size", 1.5}}), Catch::Contains("'hidden_size'"));
    CHECK_THROWS_WITH(ModelConfig::from_json(json{{"cell", "rnn"}}), Catch::Contains("gru, lstm"));
    CHECK_THROWS_WITH(TrainConfig::from_json(json{{"device", "gpu"}}), Catch::Contains("'device'"));
    CHECK_THROWS_WITH(TrainConfig::from_json(json{{"keep_best", 1}}), Catch::Contains("'keep_best'"));
    CHECK_THROWS_WITH(ModelConfig::from_json(json{{"src_vocab", -3}}), Catch::Contains("'src_vocab'"));
    CHECK_THROWS_AS(TrainConfig::from_json(json::array()), ConfigError);
    TrainConfig t;
    t.lr = -1;
    CHECK_THROWS_WITH(t.validate(), Catch::Contains("learning rate") && Catch::Contains("--lr"));
}

TEST_CASE("registry: the TensorBoard folder is any text, empty for off", "[registry][tensorboard]") {
    const ParamSpec& p = find_parameter("tensorboard");
    CHECK(p.type == ParamType::text);
    CHECK(p.folder);
    CHECK(p.in_form);  // the app's Training box has it
    CHECK(p.default_value == "");
    CHECK(describe_range(p) == "a folder (empty: off)");
    CHECK(parse_value(p, "") == "");
    CHECK(parse_value(p, "runs/toy french") == "runs/toy french");
    CHECK_FALSE(find_parameter("device").folder);
    CHECK_FALSE(find_parameter("tensorboard_every").in_form);
    CHECK_THROWS_WITH(parse_value(find_parameter("tensorboard-every"), "0"), Catch::Contains("1..1000000"));
    for (const auto& entry : registry_json())
        if (entry.at("name") == "tensorboard") CHECK(entry.at("folder") == true);
}

TEST_CASE("registry: parsing command-line text", "[registry]") {
    CHECK_THROWS_WITH(parse_value(find_parameter("hidden"), "abc"),
                      "--hidden: expected an integer in 1..4096, got 'abc'");
    CHECK_THROWS_WITH(parse_value(find_parameter("dropout"), "1.5"),
                      "--dropout: expected a number in [0, 0.99], got '1.5'");
    CHECK_THROWS_WITH(parse_value(find_parameter("lr"), "0"), Catch::Contains("(0, 100]"));
    CHECK_THROWS_AS(parse_value(find_parameter("epochs"), "2.5"), ConfigError);
    CHECK_THROWS_AS(parse_value(find_parameter("epochs"), " 2"), ConfigError);
    CHECK_THROWS_AS(parse_value(find_parameter("epochs"), ""), ConfigError);
    CHECK_THROWS_WITH(parse_value(find_parameter("scoring"), "cosine"), Catch::Contains("cosine"));
    CHECK_THROWS_WITH(parse_value(find_parameter("device"), "gpu"), Catch::Contains("cuda:N"));
    CHECK(parse_value(find_parameter("device"), "cuda:1") == "cuda:1");
    CHECK(parse_value(find_parameter("dropout"), "0.2") == 0.2);
    CHECK(parse_value(find_parameter("bidirectional"), "FALSE") == false);
    CHECK(parse_value(find_parameter("keep-best"), "on") == true);
    CHECK(format_value(find_parameter("lr"), 0.005) == "0.005");

    Hyperparameters h;
    set_parameter(h, "hidden", "128");
    set_parameter(h, "embed_size", "48");
    set_parameter(h, "seed", "7");
    set_parameter(h, "lr-schedule", "plateau");
    CHECK(h.model.hidden_size == 128);
    CHECK(h.model.embed_size == 48);
    CHECK(h.model.seed == 7);
    CHECK(h.train.seed == 7);
    CHECK(h.train.lr_schedule == LrSchedule::plateau);
    CHECK_THROWS_WITH(set_parameter(h, "colour", "red"), Catch::Contains("colour") && Catch::Contains("embed"));
}

TEST_CASE("registry: old checkpoints without the newer keys still load", "[registry]") {
    // ModelConfig and TrainConfig as an earlier version wrote them.
    const json old_model{{"src_vocab", 30}, {"tgt_vocab", 31}, {"embed_size", 16}, {"hidden_size", 24},
                         {"num_layers", 1}, {"cell", "lstm"}, {"bidirectional", true}, {"scoring", "general"},
                         {"dropout", 0.1}, {"seed", 5}};
    const ModelConfig m = ModelConfig::from_json(old_model);
    CHECK(m.src_vocab == 30);
    CHECK(m.hidden_size == 24);
    CHECK(m.cell == CellType::lstm);
    CHECK(m.scoring == Scoring::general);
    CHECK(m.seed == 5);
    CHECK(m.attention_size == ModelConfig{}.attention_size);
    CHECK(m.init == ModelConfig{}.init);
    CHECK_NOTHROW(m.validate_for_build());

    json old_train = TrainConfig{}.to_json();
    for (const char* key : {"patience", "min_delta", "keep_best", "lr_schedule", "lr_factor", "lr_step", "lr_patience"})
        REQUIRE(old_train.erase(key) == 1);
    old_train["epochs"] = 7;
    old_train["optimizer"] = "sgd";
    old_train["unknown_future_key"] = 1;  // ignored
    const TrainConfig t = TrainConfig::from_json(old_train);
    CHECK(t.epochs == 7);
    CHECK(t.optimizer == OptimizerKind::sgd);
    CHECK(t.patience == TrainConfig{}.patience);
    CHECK(t.lr_schedule == TrainConfig{}.lr_schedule);
    CHECK(t.lr_factor == TrainConfig{}.lr_factor);
    CHECK(TrainConfig::from_json(json::object()).to_json() == TrainConfig{}.to_json());
}

TEST_CASE("registry: the rules that tie model parameters together", "[registry]") {
    ModelConfig m;
    CHECK_NOTHROW(m.validate());  // no vocabulary sizes needed
    CHECK_THROWS_AS(m.validate_for_build(), ConfigError);
    m.bidirectional = true;
    m.reverse_source = true;
    CHECK_THROWS_WITH(m.validate(), Catch::Contains("bidirectional") && Catch::Contains("reverse"));
    m.reverse_source = false;
    for (Scoring s : {Scoring::dot, Scoring::scaled_dot}) {
        m.scoring = s;
        CHECK_THROWS_WITH(m.validate(), Catch::Contains("bidirectional"));
    }
    for (Scoring s : {Scoring::additive, Scoring::general, Scoring::none}) {
        m.scoring = s;
        CHECK_NOTHROW(m.validate());
    }
    m.bidirectional = false;
    m.scoring = Scoring::dot;
    m.reverse_source = true;
    CHECK_NOTHROW(m.validate());

    // Each family's own parameters: the other family leaves them at their defaults.
    ModelConfig t;
    t.arch = ModelArch::transformer;
    CHECK_NOTHROW(t.validate());
    for (const auto& p : parameters()) {
        if (p.group != ParamGroup::model || p.family == ParamFamily::all) continue;
        INFO(p.name);
        Hyperparameters h;
        h.model.arch = p.family == ParamFamily::rnn ? ModelArch::transformer : ModelArch::rnn;
        p.put(h, other_value(p));
        CHECK_THROWS_WITH(h.model.validate(), Catch::Contains("--" + p.flag + " applies to"));
        h.model.arch = p.family == ParamFamily::rnn ? ModelArch::rnn : ModelArch::transformer;
        if (p.name != "num_heads") CHECK_NOTHROW(h.model.validate());
    }
    t.num_heads = 5;  // 128 is no multiple of 5
    CHECK_THROWS_WITH(t.validate(), Catch::Contains("multiple of its heads"));
    t.num_heads = 8;
    CHECK_NOTHROW(t.validate());
    CHECK(find_parameter("cell").family == ParamFamily::rnn);
    CHECK(find_parameter("heads").family == ParamFamily::transformer);
    CHECK(find_parameter("hidden").family == ParamFamily::all);
}

TEST_CASE("registry: d2l's Transformer configuration beside its RNN's", "[registry]") {
    const Hyperparameters rnn = d2l_hyperparameters(), tf = d2l_transformer_hyperparameters();
    CHECK(rnn.model.arch == ModelArch::rnn);
    CHECK(rnn.train.lr == 0.005);
    CHECK(rnn.model.embed_size == 256);
    CHECK(tf.model.arch == ModelArch::transformer);
    CHECK(tf.model.hidden_size == 256);
    CHECK(tf.model.num_layers == 2);
    CHECK(tf.model.num_heads == 4);
    CHECK(tf.model.ffn_size == 64);
    CHECK(tf.model.dropout == 0.2);
    CHECK(tf.train.lr == 0.001);
    CHECK(tf.train.batch_size == 128);
    CHECK(tf.train.epochs == 30);
    CHECK(tf.train.fixed_steps == 9);
    CHECK(tf.model.source_steps == 9);
    CHECK(tf.model.embed_size == ModelConfig{}.embed_size);  // the RNN's own stay at their defaults
    CHECK_NOTHROW(tf.model.validate());
    CHECK_NOTHROW(validate(tf));
}

TEST_CASE("registry: lists of heads", "[registry]") {
    CHECK(parse_head_list("mean").empty());
    CHECK(parse_head_list("").empty());
    CHECK(parse_head_list("3") == std::vector<int>{3});
    CHECK(parse_head_list("0,2,5") == std::vector<int>{0, 2, 5});
    for (const char* bad : {"-1", "1,,2", "1,1", "x", "1 ,2", "0,"})
        CHECK_THROWS_WITH(parse_head_list(bad), Catch::Contains("expected \"mean\""));
    TrainConfig t;
    t.alignment_heads = "0,";
    CHECK_THROWS_WITH(t.validate(), Catch::Contains("--alignment-heads"));
}

TEST_CASE("registry: registry_json describes every parameter", "[registry]") {
    const json r = registry_json();
    REQUIRE(r.is_array());
    REQUIRE(r.size() == parameters().size());
    for (const auto& e : r) {
        INFO(e.dump());
        for (const char* key : {"name", "flag", "type", "default", "help", "label", "group", "d2l"})
            CHECK(e.contains(key));
        const ParamSpec& p = find_parameter(e.at("name").get<std::string>());
        CHECK(e.at("flag") == p.flag);
        CHECK(e.at("default") == p.default_value);
        if (numeric(p)) CHECK((e.contains("min") && e.contains("max")));
        if (p.type == ParamType::choice) CHECK(e.at("choices").size() == p.choices.size());
    }
    const auto entry = [&](const std::string& name) {
        for (const auto& e : r)
            if (e.at("name") == name) return e;
        return json();
    };
    CHECK(entry("dropout").at("max") == 0.99);
    CHECK(entry("dropout").at("type") == "float");
    CHECK(entry("hidden_size").at("max") == 4096);
    CHECK(entry("hidden_size").at("max").is_number_integer());
    CHECK(entry("lr").at("min_exclusive") == true);
    CHECK(entry("cell").at("choices") == json{"gru", "lstm"});
    CHECK(entry("patience").at("zero_means") == "off");
    CHECK(entry("cell").at("family") == "rnn");
    CHECK(entry("num_heads").at("family") == "transformer");
    CHECK(entry("lr").at("family") == "all");
    CHECK(entry("lr_schedule").at("choices") == json{"none", "plateau", "step", "warmup"});
}

TEST_CASE("a model is described as it is: family, widths, layers, heads", "[config]") {
    ModelConfig rnn;
    rnn.embed_size = 32;
    rnn.hidden_size = 64;
    CHECK(describe_model(rnn) == "RNN encoder-decoder: GRU, additive attention, embedding 32, hidden 64, 1 layer");
    rnn.cell = CellType::lstm;
    rnn.bidirectional = true;
    rnn.scoring = Scoring::none;
    rnn.num_layers = 2;
    CHECK(describe_model(rnn) ==
          "RNN encoder-decoder: LSTM (bidirectional encoder), no attention, embedding 32, hidden 64, 2 layers");
    ModelConfig tf;
    tf.arch = ModelArch::transformer;
    tf.hidden_size = 256;
    tf.num_layers = 2;
    tf.num_heads = 4;
    tf.ffn_size = 64;
    CHECK(describe_model(tf) == "Transformer: d 256, 2+2 layers, 4 heads, ffn 64");
}
