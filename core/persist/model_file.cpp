// Model files of any format attnviz reads, and saving a model alone.
#include "core/persist/model_file.hpp"

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/model/memory_bound.hpp"
#include "core/persist/d2l_interop.hpp"
#include "core/persist/hf_folder.hpp"

namespace attnviz {

namespace {

Checkpoint open_unchecked(const std::string& path, InferencePrecision folder_precision) {
    // What the name is is decided once, here: a folder (a Hugging Face model), a hub id found
    // in the local cache, or a file judged by its first bytes.
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        if (!is_model_folder(path))
            throw FileError(quote(path, 300) + " is a folder without config.json; attnviz reads a Hugging Face model "
                            "folder (config.json, weights, tokenizer files) or " + readable_model_formats());
        return Checkpoint{load_model_folder(path, folder_precision), {}};
    }
    if (!exists && looks_like_hub_id(path))
        return Checkpoint{load_model_folder(find_in_hub_cache(path), folder_precision), {}};
    // A safetensors file that is not an attnviz checkpoint can only be a d2l model;
    // everything else is load_checkpoint's to read or refuse.
    if (detect_model_file(path) == ModelFileKind::safetensors) return Checkpoint{import_d2l(path), {}};
    return load_checkpoint(path);
}

Checkpoint open_checked(const std::string& path, InferencePrecision folder_precision) {
    Checkpoint c = open_unchecked(path, folder_precision);
    // A model whose sizes (from its file: blocks, heads, widths, padded steps, a position table)
    // cannot translate one word within the memory bound is refused before any sentence.
    if (c.model) check_network_fits(*c.model->network(), quote(path, 300), c.model->decode_defaults().max_length);
    return c;
}

}  // namespace

Checkpoint open_model_file(const std::string& path) { return open_checked(path, InferencePrecision::fp32); }

TranslationModelPtr load_model(const std::string& path) { return open_model_file(path).model; }

TranslationModelPtr load_model(const std::string& path, InferencePrecision folder_precision) {
    return open_checked(path, folder_precision).model;
}

std::string resolve_existing_prefix(const std::string& path) {
    std::string head = path, tail;
    while (!head.empty()) {
        char buf[PATH_MAX];
        if (::realpath(head.c_str(), buf) != nullptr) {
            std::string out = buf;
            if (!tail.empty()) out += (out == "/" ? "" : "/") + tail;
            return out;
        }
        const size_t slash = head.find_last_of('/');
        const std::string last = slash == std::string::npos ? head : head.substr(slash + 1);
        tail = tail.empty() ? last : last + "/" + tail;
        if (slash == std::string::npos) head = ".";
        else head = slash == 0 ? "/" : head.substr(0, slash);
        if (head == "." && tail == path) {  // nothing of it exists: relative to the working directory
            char cwd[PATH_MAX];
            return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + tail : path;
        }
    }
    return path;
}

bool ModelSources::holds(const std::string& resolved) const {
    for (const auto& folder : folders)
        if (resolved == folder || resolved.rfind(folder + "/", 0) == 0) return true;
    struct stat st {};
    if (::stat(resolved.c_str(), &st) != 0) return false;
    for (const auto& [dev, ino] : files)
        if (st.st_dev == dev && st.st_ino == ino) return true;
    return false;
}

ModelSources model_sources(const std::string& path) {
    ModelSources s;
    auto add_file = [&](const std::string& file) {
        struct stat st {};
        if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) s.files.emplace_back(st.st_dev, st.st_ino);
    };
    auto add_folder = [&](const std::string& dir) {
        char buf[PATH_MAX];
        if (::realpath(dir.c_str(), buf) == nullptr) return;
        s.folders.push_back(buf);
        DIR* d = ::opendir(buf);
        if (!d) return;
        size_t seen = 0;
        while (const dirent* e = ::readdir(d)) {
            if (++seen > 100000) break;  // a folder of a model holds a few dozen files
            add_file(std::string(buf) + "/" + e->d_name);
        }
        ::closedir(d);
    };
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        add_folder(path);
    } else if (!exists && looks_like_hub_id(path)) {
        try {
            const std::string snapshot = find_in_hub_cache(path);
            add_folder(snapshot);
            // models--ORG--NAME: the snapshot's grandparent (its refs/ choose what is read).
            const std::string entry = snapshot.substr(0, snapshot.find_last_of('/', snapshot.find_last_of('/') - 1));
            char buf[PATH_MAX];
            if (::realpath(entry.c_str(), buf) != nullptr) s.folders.push_back(buf);
        } catch (const Error&) {
        }
    } else if (exists) {
        add_file(path);
    }
    return s;
}

void save_model(const TranslationModel& model, const std::string& path) {
    Checkpoint c;
    c.model = TranslationModelPtr(TranslationModelPtr{}, &model);  // borrowed for the call
    save_checkpoint(c, path);
}

}  // namespace attnviz
