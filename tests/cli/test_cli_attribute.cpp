// "Is attention an explanation?" from the command line: attribute, agreement, eval and
// translate with --intervene, and the self-contained web page of translate --html-out.
#include "catch_torch.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_support.hpp"
#include "web_page_check.hpp"

using nlohmann::json;
using namespace attnviz_cli_test;

TEST_CASE("cli: attribute writes every method per step beside the attention", "[cli][attribution]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string out = dir / "attr.json";
    Result r = cli(dir, {"attribute", "--model", ckpt, "--method", "all", "--ig-steps", "8", "--out", out,
                         "--contrast", "0:a", "a b c", "d e"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    CHECK(lines_of(r.out).size() == 2);  // the translations
    const json all = json::parse(read_file(out));
    REQUIRE(all.size() == 2);
    const json& s = all[0];
    CHECK(s["source"] == json({"a", "b", "c", "<eos>"}));
    REQUIRE(s["output"].size() == s["steps"].size());
    CHECK(s["ig_steps"] == 8);
    for (const auto& step : s["steps"]) {
        CHECK(step["token"].is_string());
        CHECK(step["log_prob"].is_number());
        CHECK(step["attention"].size() == 4);
        for (const char* m : {"saliency", "grad_input", "integrated_gradients", "occlusion"}) {
            CHECK(step["attributions"][m].size() == 4);
            CHECK(step["target_attributions"].contains(m));
            CHECK(step["agreement"][m].contains("kendall_tau"));
            CHECK(step["agreement"][m]["top1"].is_boolean());
        }
        CHECK(step["baseline_log_prob"].is_number());
    }
    CHECK(s["steps"][0]["contrast"] == "a");
    // One method, to stdout.
    Result one = cli(dir, {"attribute", "--model", ckpt, "--method", "grad-input", "a b"});
    REQUIRE(one.code == 0);
    const json j = json::parse(one.out);
    CHECK(j[0]["methods"] == json({"grad_input"}));
    CHECK(j[0]["steps"][0]["baseline_log_prob"].is_null());
    // Integrated gradients' points: auto by default, reported with the error they reached.
    Result ig = cli(dir, {"attribute", "--model", ckpt, "--method", "integrated-gradients", "a b c"});
    INFO("stderr: " << ig.err);
    REQUIRE(ig.code == 0);
    const json g = json::parse(ig.out);
    CHECK(g[0]["ig"]["auto"] == true);
    CHECK(g[0]["ig"]["tolerance"].get<double>() == Approx(0.01));
    CHECK(g[0]["ig_steps"].get<int64_t>() >= 16);
    CHECK(g[0]["ig"]["relative_error"].is_number());
    CHECK(g[0]["steps"][0]["ig_steps"].get<int64_t>() >= 16);
    CHECK(g[0]["ig"]["converged"] == (g[0]["ig"]["relative_error"].get<double>() <= 0.01));
    Result explicit_auto = cli(dir, {"attribute", "--model", ckpt, "--method", "integrated-gradients", "--ig-steps",
                                     "auto", "a b c"});
    REQUIRE(explicit_auto.code == 0);
    CHECK(json::parse(explicit_auto.out)[0]["ig_steps"] == g[0]["ig_steps"]);
    for (const char* bad : {"0", "1025", "many", "8x"})
        require_one_error_line(cli(dir, {"attribute", "--model", ckpt, "--ig-steps", bad, "a"}), "--ig-steps");
    require_one_error_line(cli(dir, {"attribute", "--model", ckpt, "--method", "lime", "a"}), "--method");
    require_one_error_line(cli(dir, {"attribute", "--model", ckpt, "--contrast", "x", "a"}), "--contrast");
    require_one_error_line(cli(dir, {"attribute", "--model", ckpt, "--contrast", "0:nope", "a"}), "nope");
}

TEST_CASE("cli: agreement prints Jain & Wallace's table, with --json and --out", "[cli][attribution]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string out = dir / "agree.json";
    Result r = cli(dir, {"agreement", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--max-sentences", "12",
                         "--json", "--out", out});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j["sentences_count"] == 12);
    REQUIRE(j["table"].size() == 6);
    CHECK(j["table"][0]["pair"] == "attention vs saliency");
    CHECK(j["table"][0]["kendall_tau"].contains("median"));
    CHECK(json::parse(read_file(out))["sentences"].size() == 12);
    Result text = cli(dir, {"agreement", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--max-sentences", "3"});
    REQUIRE(text.code == 0);
    CHECK(text.out.find("saliency vs occlusion") != std::string::npos);
}

TEST_CASE("cli: agreement --erasure adds flip curves per order, per sentence and over the corpus", "[cli][attribution]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string out = dir / "erasure.json";
    Result r = cli(dir, {"agreement", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--max-sentences", "3",
                         "--erasure", "--json", "--out", out});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    REQUIRE(j.contains("erasure"));
    const json& e = j["erasure"];
    CHECK(e["orders"] == json({"attention", "grad_input", "integrated_gradients", "random"}));
    for (const char* key : {"flipped", "mean_removals", "median_removals"}) {
        INFO(key);
        for (const char* order : {"attention", "grad_input", "integrated_gradients", "random"})
            CHECK(e[key].contains(order));
    }
    for (const char* order : {"grad_input", "integrated_gradients", "random"})
        CHECK(e["attention_vs"][order].contains("sooner_share"));
    CHECK(e["steps"].get<int64_t>() >= 3);
    const json sentences = json::parse(read_file(out))["sentences"];
    REQUIRE(sentences.size() == 3);
    const json& first = sentences[0]["erasure"];
    CHECK(first["steps"].size() == sentences[0]["steps"]);
    CHECK(first["steps"][0]["removals"].contains("attention"));
    CHECK(first.contains("mean_removals"));
    CHECK(first.contains("never"));
    // Off by default; the readable table gains its section.
    Result plain = cli(dir, {"agreement", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--max-sentences", "2",
                             "--json"});
    REQUIRE(plain.code == 0);
    CHECK_FALSE(json::parse(plain.out).contains("erasure"));
    Result text = cli(dir, {"agreement", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--max-sentences", "2",
                            "--erasure"});
    REQUIRE(text.code == 0);
    CHECK(text.out.find("attention vs grad_input") != std::string::npos);
}

TEST_CASE("cli: eval and translate --intervene", "[cli][intervention]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    Result e = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--intervene", "uniform", "--json"});
    INFO("stderr: " << e.err);
    REQUIRE(e.code == 0);
    const json j = json::parse(e.out);
    CHECK(j["intervention"]["kind"] == "uniform");
    CHECK(j["without_intervention"].contains("accuracy"));
    // The teacher-forced figures are computed on the references without the intervention: the JSON says so.
    const json untouched = j["teacher_forced_without_intervention"];
    CHECK(std::find(untouched.begin(), untouched.end(), "val_loss") != untouched.end());
    CHECK(std::find(untouched.begin(), untouched.end(), "teacher_forced_token_accuracy") != untouched.end());
    const json applies = j["intervention_applies_to"];
    CHECK(std::find(applies.begin(), applies.end(), "accuracy") != applies.end());
    CHECK(std::find(applies.begin(), applies.end(), "val_loss") == applies.end());
    // Without an intervention neither field is there.
    Result plainEval = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--json"});
    REQUIRE(plainEval.code == 0);
    CHECK_FALSE(json::parse(plainEval.out).contains("teacher_forced_without_intervention"));
    CHECK(j.contains("bleu"));
    Result p = cli(dir, {"eval", "--model", ckpt, "--task", "reverse", "--pairs", "300", "--intervene", "permute"});
    REQUIRE(p.code == 0);
    CHECK(p.out.find("permuted attention at every step") != std::string::npos);
    // One step changed: "NEW ||| ORIGINAL ||| DELTA".
    Result plain = cli(dir, {"translate", "--model", ckpt, "a b c d"});
    Result w = cli(dir, {"translate", "--model", ckpt, "--intervene", "uniform", "--intervene-at", "1", "a b c d"});
    REQUIRE(w.code == 0);
    const auto line = lines_of(w.out).at(0);
    const auto bar = line.find(" ||| "), last = line.rfind(" ||| ");
    REQUIRE(bar != last);
    CHECK(line.substr(bar + 5, last - bar - 5) == lines_of(plain.out).at(0));
    CHECK(std::isfinite(std::stod(line.substr(last + 5))));
    Result all = cli(dir, {"translate", "--model", ckpt, "--intervene", "weights=1,0,0,0,0", "a b c d"});
    REQUIRE(all.code == 0);
    require_one_error_line(cli(dir, {"translate", "--model", ckpt, "--intervene", "sideways", "a"}), "--intervene");
    require_one_error_line(cli(dir, {"translate", "--model", ckpt, "--intervene", "uniform", "--beam", "3", "a"}),
                           "greedily");
    require_one_error_line(cli(dir, {"translate", "--model", ckpt, "--intervene-at", "0", "a"}), "--intervene");
    // Two weights for four source tokens: a usage error (exit 2) that names them.
    require_one_error_line(cli(dir, {"translate", "--model", ckpt, "--intervene", "weights=1,0", "a b c"}), "2 weights");
}

TEST_CASE("cli: translate --html-out writes one self-contained page", "[cli][web_page]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string page = dir / "page.html";
    Result r = cli(dir, {"translate", "--model", ckpt, "--html-out", page, "--ig-steps", "4", "a b c", "d e f g"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const std::string html = read_file(page);
    INFO(html.substr(0, 300));
    CHECK(attnviz::testing::web_page_problem(html).empty());
    CHECK(html.find("integrated_gradients") != std::string::npos);
    // Python's html.parser reads it the same way (tests/support/check_web_page.py).
    Result py = run_command(dir, quote(ATTNVIZ_PYTHON3) + " " + quote(ATTNVIZ_CHECK_WEB_PAGE), {page});
    INFO("checker: " << py.out << py.err);
    CHECK(py.code == 0);
    // And it catches a page that reaches out.
    write_file(dir / "bad.html", "<!DOCTYPE html><html><head><script src=\"x.js\"></script></head><body></body></html>");
    CHECK(run_command(dir, quote(ATTNVIZ_PYTHON3) + " " + quote(ATTNVIZ_CHECK_WEB_PAGE), {dir / "bad.html"}).code == 1);
    // Sinks left out of the attention file.
    const std::string att = dir / "att.json";
    REQUIRE(cli(dir, {"translate", "--model", ckpt, "--exclude-sinks", "--attention-out", att, "a b c"}).code == 0);
    const json a = json::parse(read_file(att));
    for (const auto& row : a[0]["weights"]) CHECK(row.back().get<double>() == 0.0);  // the <eos> column
    CHECK(a[0]["merged"].get<std::string>().find("sinks excluded") != std::string::npos);
}

TEST_CASE("cli: attribute --erasure writes flip curves in the file and on the page", "[cli][web_page][erasure]") {
    TempDir dir;
    const std::string ckpt = train_tiny(dir);
    const std::string out = dir / "attr.json", page = dir / "page.html";
    Result r = cli(dir, {"attribute", "--model", ckpt, "--ig-steps", "8", "--erasure", "--erasure-seed", "3", "--out", out,
                         "--html-out", page, "a b c d", "e f"});
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const json all = json::parse(read_file(out));
    REQUIRE(all.size() == 2);
    const std::vector<std::string> orders{"attention", "grad_input", "integrated_gradients", "random"};
    for (const auto& s : all) {
        REQUIRE(s.contains("erasure"));
        const json& e = s["erasure"];
        CHECK(e["source"] == s["source"]);
        REQUIRE(e["steps"].size() == s["steps"].size());
        for (size_t t = 0; t < e["steps"].size(); ++t) {
            const json& st = e["steps"][t];
            CHECK(st["step"] == t);
            for (const auto& o : orders) {
                INFO(o);
                REQUIRE(st["removals"].contains(o));
                const json& n = st["removals"][o];
                CHECK((n.is_null() || (n.get<int64_t>() >= 1 && n.get<int64_t>() <= int64_t(s["source"].size()))));
            }
        }
        for (const auto& o : orders) CHECK(e["never"].contains(o));
    }
    // The page carries the same removals, within the page's rules.
    const std::string html = read_file(page);
    CHECK(attnviz::testing::web_page_problem(html).empty());
    const auto open = html.find("id=\"attnviz-data\">") + std::string("id=\"attnviz-data\">").size();
    const json data = json::parse(html.substr(open, html.find("</script>", open) - open));
    REQUIRE(data["sentences"].size() == 2);
    for (size_t i = 0; i < 2; ++i) {
        const json& e = data["sentences"][i]["erasure"];
        CHECK(e["orders"] == json(orders));
        REQUIRE(e["steps"].size() == all[i]["erasure"]["steps"].size());
        CHECK(e["steps"][0]["removals"] == all[i]["erasure"]["steps"][0]["removals"]);
        CHECK(e["mean_removals"] == all[i]["erasure"]["mean_removals"]);
    }
    Result py = run_command(dir, quote(ATTNVIZ_PYTHON3) + " " + quote(ATTNVIZ_CHECK_WEB_PAGE), {page});
    INFO("checker: " << py.out << py.err);
    CHECK(py.code == 0);
    // The random order follows its seed: the same seed, the same removals.
    Result again = cli(dir, {"attribute", "--model", ckpt, "--method", "grad-input", "--erasure", "--erasure-seed", "3",
                             "a b c d"});
    REQUIRE(again.code == 0);
    const json a = json::parse(again.out);
    for (size_t t = 0; t < a[0]["erasure"]["steps"].size(); ++t)
        CHECK(a[0]["erasure"]["steps"][t]["removals"]["random"] == all[0]["erasure"]["steps"][t]["removals"]["random"]);
    // Off by default.
    Result plain = cli(dir, {"attribute", "--model", ckpt, "--method", "grad-input", "a b"});
    REQUIRE(plain.code == 0);
    CHECK_FALSE(json::parse(plain.out)[0].contains("erasure"));
    require_one_error_line(cli(dir, {"attribute", "--model", ckpt, "--erasure-seed", "x", "a"}), "--erasure-seed");
}
