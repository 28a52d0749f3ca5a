// Model files of any format attnviz reads, and saving a model alone.
#include "core/persist/model_file.hpp"

#include "core/persist/d2l_interop.hpp"

namespace attnviz {

Checkpoint open_model_file(const std::string& path) {
    // A safetensors file that is not an attnviz checkpoint can only be a d2l model;
    // everything else is load_checkpoint's to read or refuse.
    if (detect_model_file(path) == ModelFileKind::safetensors) return Checkpoint{import_d2l(path), {}};
    return load_checkpoint(path);
}

TranslationModelPtr load_model(const std::string& path) { return open_model_file(path).model; }

void save_model(const TranslationModel& model, const std::string& path) {
    Checkpoint c;
    c.model = TranslationModelPtr(TranslationModelPtr{}, &model);  // borrowed for the call
    save_checkpoint(c, path);
}

}  // namespace attnviz
