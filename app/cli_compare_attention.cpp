// attnviz-cli compare-attention: two models on the same sentences -- each one's
// translation, and how differently they attend while reading model A's output
// (core/analysis/attention_compare.hpp). One line per sentence:
//   A_TEXT ||| B_TEXT ||| MEAN_ABS_DIFF ||| MAX_ABS_DIFF   ("-" when not comparable)
// and with --out, the matrices and their difference as JSON.
#include <iostream>

#include "app/cli_common.hpp"
#include "core/persist/model_file.hpp"
#include "core/analysis/attention_compare.hpp"
#include "core/model/device.hpp"
#include "core/io/error.hpp"
#include "core/analysis/export.hpp"
#include "core/text/text.hpp"

namespace attnviz::cli {

namespace {

struct CompareAttentionOptions {
    std::string model, with, out, device = "cpu";
    std::vector<std::string> sentences;
};

int run_compare_attention(const CompareAttentionOptions& o) {
    if (!o.out.empty()) check_writable("--out", o.out);
    const auto a = load_model(o.model)->on_device(resolve_device(o.device));
    const auto b = load_model(o.with)->on_device(resolve_device(o.device));
    std::vector<std::string> sentences = o.sentences;
    if (sentences.empty())
        for (std::string line; std::getline(std::cin, line);) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            sentences.push_back(line);
        }
    nlohmann::json all = nlohmann::json::array();
    std::string out;
    for (size_t i = 0; i < sentences.size(); ++i) {
        if (!is_valid_utf8(sentences[i])) throw FileError("sentence " + std::to_string(i + 1) + ": invalid UTF-8");
        const AttentionComparison c = compare_attention(*a, *b, sentences[i]);
        auto text = [](const Translation& t) { return t.empty() ? std::string() : t.best().text; };
        out += text(c.a) + " ||| " + text(c.b) + " ||| " +
               (c.comparable ? fixed(c.mean_abs_difference, 6) + " ||| " + fixed(c.max_abs_difference, 6) : "- ||| -") +
               "\n";
        if (!c.comparable && !c.note.empty()) warn("sentence " + std::to_string(i + 1) + ": " + c.note);
        nlohmann::json j = comparison_json(c);
        j["sentence"] = i;
        all.push_back(std::move(j));
    }
    if (!o.out.empty()) write_file_atomic(o.out, all.dump(1) + "\n");
    std::cout << out;
    return exit_ok;
}

}  // namespace

Command add_compare_attention_command(CLI::App& parent) {
    auto o = std::make_shared<CompareAttentionOptions>();
    CLI::App* app = parent.add_subcommand(
        "compare-attention", "Two models on the same sentences: their translations and how their attention differs");
    app->footer("One line per sentence: A_TEXT ||| B_TEXT ||| MEAN_ABS_DIFF ||| MAX_ABS_DIFF. The difference is\n"
                "A's attention minus B's while B reads A's output (forced), so the rows line up; '-' when\n"
                "the models cannot be lined up (no attention, word vs character level).");
    app->add_option("--model", o->model, "model A (a checkpoint)")->required();
    app->add_option("--with", o->with, "model B (a checkpoint)")->required();
    app->add_option("sentences", o->sentences, "sentences (stdin when none)");
    app->add_option("--out", o->out, "write both attention matrices and their difference here (JSON)");
    app->add_option("--device", o->device, "cpu, cuda or auto")->capture_default_str();
    return {app, [o] { return run_compare_attention(*o); }};
}

}  // namespace attnviz::cli
