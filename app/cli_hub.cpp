// attnviz-cli download ORG/NAME and attnviz-cli cache list|delete: models from the Hugging Face
// Hub into the shared cache (core/hub), and that cache managed as huggingface-cli scan-cache /
// delete-cache do. Nothing else in attnviz-cli downloads: --model ORG/NAME only reads the cache.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "app/cli_common.hpp"
#include "core/hub/hub_cache.hpp"
#include "core/hub/hub_download.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz::cli {

namespace {

std::string bytes_text(int64_t n) {
    char buf[32];
    if (n < 0) return "?";
    if (n >= 1000000000) std::snprintf(buf, sizeof buf, "%.2f GB", double(n) / 1e9);
    else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.1f MB", double(n) / 1e6);
    else if (n >= 1000) std::snprintf(buf, sizeof buf, "%.1f kB", double(n) / 1e3);
    else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(n));
    return buf;
}

std::string seconds_text(double s) {
    if (s < 0 || !std::isfinite(s)) return "?";
    char buf[32];
    if (s < 60) std::snprintf(buf, sizeof buf, "%.0f s", s);
    else if (s < 3600) std::snprintf(buf, sizeof buf, "%d min %02d s", int(s) / 60, int(s) % 60);
    else std::snprintf(buf, sizeof buf, "%d h %02d min", int(s) / 3600, int(s) % 3600 / 60);
    return buf;
}

std::string when_text(double epoch_s) {
    if (epoch_s <= 0) return "-";
    const double ago = double(std::time(nullptr)) - epoch_s;
    if (ago < 60) return "just now";
    if (ago < 3600) return std::to_string(int(ago / 60)) + " min ago";
    if (ago < 86400 * 2) return std::to_string(int(ago / 3600)) + " h ago";
    return std::to_string(int(ago / 86400)) + " days ago";
}

struct DownloadFlags {
    std::string id, revision = "main";
    bool quiet = false;
};

int run_download(const DownloadFlags& f) {
    hub::DownloadOptions o;
    o.repo_id = f.id;
    o.revision = f.revision;
    if (!hub::is_repo_id(f.id))
        throw UsageError("MODEL: " + quote(f.id) + " is not a hub id (ORGANISATION/NAME, e.g. Helsinki-NLP/opus-mt-en-de)");
    SignalScope graceful(SignalMode::graceful);  // Ctrl+C: stop, keep what came for a resume
    const bool tty = ::isatty(2) != 0;
    bool line_open = false;
    std::string last_file;
    const auto progress = [&](const hub::DownloadProgress& p) {
        if (interrupted()) return false;
        if (f.quiet) return true;
        std::string line = "[" + std::to_string(p.file_index + 1) + "/" + std::to_string(p.file_count) + "] " + p.file;
        line += "  " + bytes_text(p.done) + " / " + bytes_text(p.total);
        if (p.bytes_per_second > 0) line += "  " + bytes_text(int64_t(p.bytes_per_second)) + "/s  ETA " + seconds_text(p.eta_s);
        if (!p.note.empty() && p.note != "done") line += "  (" + p.note + ")";
        if (tty) {
            std::cerr << "\r\033[K" << escape_controls(line) << std::flush;
            line_open = true;
        } else if (p.file != last_file || !p.note.empty()) {
            std::cerr << escape_controls(line) << "\n";  // one line per file (and per retry) in a log
        }
        last_file = p.file;
        return true;
    };
    try {
        const hub::DownloadPlan plan = hub::plan_download(o, progress);
        if (!f.quiet) {
            if (line_open) std::cerr << "\r\033[K";
            line_open = false;
            std::cerr << (plan.from_cache ? "offline: " : "") << quote(plan.repo_id) << " at " << plan.commit << ": "
                      << count_of(int64_t(plan.files.size()), "file", "files") << ", " << bytes_text(plan.total_bytes)
                      << " (" << bytes_text(plan.missing_bytes) << " to fetch) into " << quote(plan.cache_dir, quote_path_max)
                      << "\n";
            for (const auto& file : plan.files)
                std::cerr << "  " << escape_controls(file.name) << "  " << bytes_text(file.size)
                          << (file.cached ? "  (cached)" : "") << "\n";
        }
        const auto t0 = std::chrono::steady_clock::now();
        const std::string snapshot = hub::download(o, plan, progress);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (line_open) std::cerr << "\n";
        if (!f.quiet && plan.missing_bytes > 0 && took > 0)  // the transfer's own rate, checks and links included
            std::cerr << "fetched " << bytes_text(plan.missing_bytes) << " in " << fixed(took, 2) << " s ("
                      << bytes_text(int64_t(double(plan.missing_bytes) / took)) << "/s)\n";
        std::cout << escape_controls(snapshot) << "\n";
        return exit_ok;
    } catch (const Cancelled&) {
        if (line_open) std::cerr << "\n";
        std::cerr << "attnviz-cli: download of " << quote(f.id)
                  << " stopped; run the same command again to resume where it stopped\n";
        return interrupt_exit_code() ? interrupt_exit_code() : exit_interrupted;
    } catch (...) {
        if (line_open) std::cerr << "\n";
        throw;
    }
}

int run_cache_list(bool json_out) {
    nlohmann::json all = nlohmann::json::array();
    bool any = false;
    for (const auto& cache : hub::cache_dirs()) {
        const auto models = hub::scan_cache(cache);
        if (models.empty()) continue;
        if (!json_out) std::cout << (any ? "\n" : "") << "cache " << escape_controls(cache) << "\n";
        any = true;
        if (!json_out) std::printf("%-40s %-12s %-14s %10s  %s\n", "MODEL", "REVISION", "REFS", "SIZE", "LAST USED");
        std::cout << std::flush;
        for (const auto& m : models) {
            nlohmann::json jm = {{"id", m.id}, {"cache", cache}, {"path", m.path}, {"size_on_disk", m.size_on_disk},
                                 {"incomplete_bytes", m.incomplete_bytes}, {"last_used", m.last_used},
                                 {"last_modified", m.last_modified}, {"revisions", nlohmann::json::array()}};
            for (const auto& r : m.revisions) {
                jm["revisions"].push_back({{"commit", r.commit}, {"refs", r.refs}, {"size", r.size}, {"files", r.files},
                                           {"last_modified", r.last_modified}});
                if (json_out) continue;
                std::string refs;
                for (const auto& ref : r.refs) refs += (refs.empty() ? "" : ",") + ref;
                std::printf("%-40s %-12s %-14s %10s  %s\n", escape_controls(m.id).c_str(),
                            escape_controls(r.commit.substr(0, 12)).c_str(), escape_controls(refs.empty() ? "-" : refs).c_str(),
                            bytes_text(r.size).c_str(), when_text(m.last_used).c_str());
            }
            if (!json_out && m.revisions.empty())
                std::printf("%-40s %-12s %-14s %10s  %s\n", escape_controls(m.id).c_str(), "(none)", "-",
                            bytes_text(m.size_on_disk).c_str(), when_text(m.last_used).c_str());
            if (!json_out && m.incomplete_bytes > 0)
                std::printf("%-40s %s of interrupted downloads (attnviz-cli download %s resumes them)\n", "",
                            bytes_text(m.incomplete_bytes).c_str(), escape_controls(m.id).c_str());
            all.push_back(jm);
        }
    }
    if (json_out) std::cout << all.dump(2) << "\n";
    else if (!any) std::cout << "no models in the Hugging Face cache (" << escape_controls(hub::default_cache_dir()) << ")\n";
    return exit_ok;
}

int run_cache_delete(const std::string& id, const std::string& revision) {
    if (!hub::is_repo_id(id)) throw UsageError("MODEL: " + quote(id) + " is not a hub id (ORGANISATION/NAME)");
    for (const auto& cache : hub::cache_dirs()) {
        if (hub::scan_cache(cache).empty()) continue;
        bool here = false;
        for (const auto& m : hub::scan_cache(cache)) here |= m.id == id;
        if (!here) continue;
        const hub::DeleteResult d = hub::delete_revision(cache, id, revision);
        std::cerr << "deleted " << quote(id) << (revision.empty() ? "" : " " + quote(revision)) << " ("
                  << count_of(int64_t(d.commits.size()), "revision", "revisions") << ", " << bytes_text(d.freed)
                  << " freed" << (d.removed_model ? ", no revision left: the model is gone" : "") << ") from "
                  << quote(cache, quote_path_max) << "\n";
        return exit_ok;
    }
    throw FileError("model " + quote(id) + " is not in the Hugging Face cache (attnviz-cli cache list shows what is)");
}

}  // namespace

Command add_download_command(CLI::App& parent) {
    auto f = std::make_shared<DownloadFlags>();
    CLI::App* app = parent.add_subcommand(
        "download", "download a model from the Hugging Face Hub into the shared cache (then --model ORG/NAME opens it)");
    app->add_option("MODEL", f->id, "the hub id, ORGANISATION/NAME (e.g. Helsinki-NLP/opus-mt-en-de)")->required();
    app->add_option("--revision", f->revision, "a branch, a tag or a commit hash (default: main)")->type_name("REV");
    app->add_flag("-q,--quiet", f->quiet, "no progress on stderr");
    app->footer(
        "Fetches only what a model needs (config, weights -- safetensors when there are, tokenizer files) into the\n"
        "cache huggingface_hub and transformers use: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.\n"
        "Prints the snapshot folder on stdout. An interrupted download resumes where it stopped. HF_ENDPOINT\n"
        "names another hub, HF_TOKEN (or huggingface-cli login's token file) opens gated and private models,\n"
        "HF_HUB_OFFLINE=1 forbids the network.");
    return {app, [f] { return run_download(*f); }};
}

Command add_cache_command(CLI::App& parent) {
    CLI::App* app = parent.add_subcommand("cache", "list or delete the models of the Hugging Face cache");
    app->require_subcommand(1);
    auto json_out = std::make_shared<bool>(false);
    CLI::App* list = app->add_subcommand("list", "every cached model: revisions, size on disk, last use");
    list->add_flag("--json", *json_out, "as JSON");
    auto id = std::make_shared<std::string>();
    auto revision = std::make_shared<std::string>();
    CLI::App* del = app->add_subcommand(
        "delete", "delete a model's revision (the files no other revision uses go too), or the whole model");
    del->add_option("MODEL", *id, "the hub id, ORGANISATION/NAME")->required();
    del->add_option("--revision", *revision, "a commit or a ref (main, a tag); default: every revision")->type_name("REV");
    return {app, [=] { return list->parsed() ? run_cache_list(*json_out) : run_cache_delete(*id, *revision); }};
}

}  // namespace attnviz::cli
