// Fuzzes the web page writer (core/analysis/web_page.cpp, no LibTorch) with hostile sentences:
// tokens of any bytes (script end tags, quotes, addresses, control and invalid UTF-8 bytes,
// which the page shows as U+FFFD),
// attention maps of any small shape and any float (NaN, infinities), several kinds, layers and
// heads; sometimes an erasure table (its step tokens of any bytes, its removals any value, steps
// and orders of any count). The page must stay well formed and self-contained
// (tests/support/web_page_check.hpp), its data must read back as JSON with the tokens as given,
// and a page beyond the bound is refused (ConfigError), never written.
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/analysis/web_page.hpp"
#include "core/io/error.hpp"
#include "fuzz_support.hpp"
#include "tests/support/web_page_check.hpp"

namespace {

struct Reader {
    const uint8_t* data;
    size_t size;
    size_t at = 0;
    uint8_t byte() { return at < size ? data[at++] : 0; }
    int64_t integer() {
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = bits << 8 | byte();
        return static_cast<int64_t>(bits);
    }
    float number() {
        uint32_t bits = 0;
        for (int i = 0; i < 4; ++i) bits = bits << 8 | byte();
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }
    std::string token() {
        const size_t n = byte() % 12;
        std::string t;
        for (size_t i = 0; i < n; ++i) t += static_cast<char>(byte());
        return t;
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace attnviz;
    Reader r{data, size};
    SentenceAttribution s;
    const size_t S = 1 + r.byte() % 6, T = 1 + r.byte() % 6;
    s.input = r.token();
    s.text = r.token();
    s.attention_map = r.token();
    for (size_t i = 0; i < S; ++i) s.source.push_back(r.token());
    for (size_t t = 0; t < T; ++t) s.output.push_back(r.token());
    const bool with_method = r.byte() & 1;
    if (with_method) s.methods = {AttributionMethod::occlusion};
    for (size_t t = 0; t < T; ++t) {
        StepAttribution st;
        st.token = s.output[t];
        st.log_prob = r.number();
        for (size_t i = 0; i < S; ++i) st.attention.push_back(r.number());
        if (with_method) {
            AttributionScores sc;
            for (size_t i = 0; i < S; ++i) sc.source.push_back(r.number());
            st.scores[AttributionMethod::occlusion] = sc;
        }
        s.steps.push_back(st);
    }
    AttentionRecord record;
    const int maps = r.byte() % 9;
    for (int m = 0; m < maps; ++m) {
        AttentionMap map;
        map.id.kind = static_cast<AttentionKind>(r.byte() % 3);
        map.id.layer = r.byte() % 3;
        map.id.head = static_cast<int>(r.byte() % 4) - 1;  // -1: a layer's mean
        const size_t rows = r.byte() % 7;
        for (size_t q = 0; q < rows; ++q) {
            std::vector<float> row(r.byte() % 7);
            for (float& v : row) v = r.number();
            map.weights.push_back(row);
        }
        record.maps.push_back(map);
    }
    WebPageOptions o;
    o.title = r.token();
    o.model = r.token();
    o.memory_bound = int64_t{1} << 20;
    // Read last, so that the inputs kept before erasure reached the page still mean what they meant.
    std::vector<SentenceErasure> erasures;
    if (r.byte() & 1) {
        SentenceErasure e;
        e.source = s.source;
        e.output = s.output;
        for (auto order : all_erasure_orders())
            if (r.byte() & 1) e.orders.push_back(order);
        const size_t steps = r.byte() % 9;  // as many steps as the sentence, or not
        for (size_t t = 0; t < steps; ++t) {
            StepErasure st;
            st.step = (r.byte() & 1) ? r.integer() : static_cast<int64_t>(t);
            st.token = r.token();
            for (auto order : e.orders) {
                if (r.byte() & 1) st.removals[order] = r.integer();
                else st.removals[order] = std::nullopt;
            }
            e.steps.push_back(st);
        }
        erasures.push_back(std::move(e));
    }
    try {
        const std::string page = web_page({s}, o, {record}, erasures);
        const std::string problem = attnviz::testing::web_page_problem(page);
        if (!problem.empty()) std::fprintf(stderr, "the page %s\n", problem.c_str());
        FUZZ_CHECK(problem.empty());
        const auto open = page.find("id=\"attnviz-data\">");
        FUZZ_CHECK(open != std::string::npos);
        const auto begin = open + std::strlen("id=\"attnviz-data\">");
        const auto close = page.find("</script>", begin);
        FUZZ_CHECK(close != std::string::npos);
        const auto j = nlohmann::json::parse(page.substr(begin, close - begin), nullptr, false);
        FUZZ_CHECK(!j.is_discarded());
        FUZZ_CHECK(j["sentences"].size() == 1);
        const bool shown = !erasures.empty() && !erasures[0].steps.empty();
        FUZZ_CHECK(j["sentences"][0].contains("erasure") == shown);
        if (shown) {
            const auto& e = j["sentences"][0]["erasure"];
            FUZZ_CHECK(e["steps"].size() == erasures[0].steps.size());
            for (size_t t = 0; t < erasures[0].steps.size(); ++t) {
                const StepErasure& st = erasures[0].steps[t];
                FUZZ_CHECK(e["steps"][t]["step"] == st.step);
                for (const auto& [order, n] : st.removals) {
                    const auto& got = e["steps"][t]["removals"][to_string(order)];
                    FUZZ_CHECK(n ? got == *n : got.is_null());
                }
            }
        }
    } catch (const attnviz::ConfigError&) {
        // a record the page cannot show (a layer without the heads it names) or beyond the bound
    }
    return 0;
}
