// Fuzzes attnviz-cli's command line: the full option tree of every subcommand
// (app/cli_app.cpp, the same one main() builds) parses argv without running a
// command, then every "--flag value" that names a registry parameter goes
// through the registry's parser (core/config/registry.cpp), where train, bench and
// compare turn flag text into numbers. Input: one argument per line.
#include <string>
#include <vector>

#include "app/cli_app.hpp"
#include "core/io/error.hpp"
#include "core/config/registry.hpp"
#include "fuzz_support.hpp"

namespace {

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        out.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

const attnviz::ParamSpec* registry_flag(const std::string& arg) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) return nullptr;
    for (const auto& p : attnviz::parameters())
        if (arg.compare(2, std::string::npos, p.flag) == 0) return &p;
    return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::vector<std::string> args = split_lines(attnviz_fuzz::as_text(data, size));
    if (args.size() > 256) return 0;  // argv is short in practice; keep each run fast
    std::vector<const char*> argv{"attnviz-cli"};
    for (const auto& a : args) argv.push_back(a.c_str());
    // Built once: constructing the whole tree takes milliseconds, parsing microseconds, and
    // CLI11 clears what the last parse left before the next (values bound to options keep
    // theirs until given again, which parsing never reads).
    static const auto cli = attnviz::cli::make_cli_app();
    cli->threads = 0;
    try {
        cli->app.parse(static_cast<int>(argv.size()), argv.data());
        FUZZ_CHECK(cli->threads >= 0 && cli->threads <= attnviz::cli::max_threads);
    } catch (const CLI::Error&) {
    }
    attnviz::Hyperparameters h;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
        const attnviz::ParamSpec* p = registry_flag(args[i]);
        if (!p) continue;
        bool accepted = false;
        try {
            attnviz::set_parameter(h, p->flag, args[i + 1]);
            accepted = true;
        } catch (const attnviz::ConfigError&) {
        }
        if (!accepted) continue;
        try {  // what was accepted reads back in range (no narrowing on the way in)
            attnviz::check_value(*p, p->get(h));
        } catch (const attnviz::ConfigError&) {
            FUZZ_CHECK(!"an accepted value reads back out of range");
        }
    }
    return 0;
}
