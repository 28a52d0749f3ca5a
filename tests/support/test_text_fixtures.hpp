#pragma once
// tests/data: the text fixtures written by tools/make_text_fixtures.py and the small corpora.
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace attnviz::testing {

/// Path of a file in tests/data (ATTNVIZ_TEST_DATA is set by tests/CMakeLists.txt).
inline std::string test_data_path(const std::string& name) { return std::string(ATTNVIZ_TEST_DATA) + "/" + name; }

/// tests/data/text_fixtures.json, parsed once.
inline const nlohmann::json& text_fixtures() {
    static const nlohmann::json fixtures = [] {
        std::ifstream in(test_data_path("text_fixtures.json"), std::ios::binary);
        if (!in) throw std::runtime_error("cannot open tests/data/text_fixtures.json");
        std::ostringstream text;
        text << in.rdbuf();
        return nlohmann::json::parse(text.str());
    }();
    return fixtures;
}

}  // namespace attnviz::testing
