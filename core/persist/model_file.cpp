// Model files of any format attnviz reads, and saving a model alone.
#include "core/persist/model_file.hpp"

#include <sys/stat.h>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/model/memory_bound.hpp"
#include "core/persist/d2l_interop.hpp"
#include "core/persist/hf_folder.hpp"

namespace attnviz {

namespace {

Checkpoint open_unchecked(const std::string& path) {
    // What the name is is decided once, here: a folder (a Hugging Face model), a hub id found
    // in the local cache, or a file judged by its first bytes.
    struct stat st {};
    const bool exists = ::stat(path.c_str(), &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        if (!is_model_folder(path))
            throw FileError(quote(path, 300) + " is a folder without config.json; attnviz reads a Hugging Face model "
                            "folder (config.json, weights, tokenizer files) or " + readable_model_formats());
        return Checkpoint{load_model_folder(path), {}};
    }
    if (!exists && looks_like_hub_id(path)) return Checkpoint{load_model_folder(find_in_hub_cache(path)), {}};
    // A safetensors file that is not an attnviz checkpoint can only be a d2l model;
    // everything else is load_checkpoint's to read or refuse.
    if (detect_model_file(path) == ModelFileKind::safetensors) return Checkpoint{import_d2l(path), {}};
    return load_checkpoint(path);
}

}  // namespace

Checkpoint open_model_file(const std::string& path) {
    Checkpoint c = open_unchecked(path);
    // A model whose sizes (from its file: blocks, heads, widths, padded steps, a position table)
    // cannot translate one word within the memory bound is refused before any sentence.
    if (c.model) check_network_fits(*c.model->network(), quote(path, 300), c.model->decode_defaults().max_length);
    return c;
}

TranslationModelPtr load_model(const std::string& path) { return open_model_file(path).model; }

void save_model(const TranslationModel& model, const std::string& path) {
    Checkpoint c;
    c.model = TranslationModelPtr(TranslationModelPtr{}, &model);  // borrowed for the call
    save_checkpoint(c, path);
}

}  // namespace attnviz
