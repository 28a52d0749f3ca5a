// attnviz-cli export: a model as a safetensors file in d2l's layout, for PyTorch, or a
// pretrained model as a Hugging Face folder for transformers.
#include <iostream>

#include "app/cli_common.hpp"
#include "core/config/pretrained_config.hpp"
#include "core/io/message.hpp"
#include "core/persist/hf_folder.hpp"
#include "core/persist/model_file.hpp"
#include "core/persist/d2l_interop.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz::cli {

namespace {

struct ExportOptions {
    std::string model, out, format = "auto";
};

int run_export_hf(const TranslationModel& model, const std::string& out) {
    save_model_folder(model, out);
    std::cout << "wrote the model folder " << quote(out, quote_path_max) << ": "
              << model.config().pretrained->model.describe() << "; transformers loads it with from_pretrained("
              << quote(out, quote_path_max) << ")\n";
    return exit_ok;
}

int run_export(const ExportOptions& o) {
    if (o.format != "auto" && o.format != "d2l" && o.format != "hf")
        throw UsageError("--format: expected auto, d2l or hf, got " + quote(o.format));
    const auto model = load_model(o.model);
    const bool hf = o.format == "hf" || (o.format == "auto" && model->config().is_pretrained());
    if (hf) return run_export_hf(*model, o.out);
    if (model->config().is_pretrained())
        throw UsageError("--format d2l: a pretrained model has no d2l layout; write it as a Hugging Face folder (--format hf)");
    check_writable("--out", o.out);
    const std::string variant = export_d2l(*model, o.out);
    const auto& c = model->config();
    std::cout << "wrote " << quote(o.out, quote_path_max) << ": " << model->src_vocab().size() << " + " << model->tgt_vocab().size()
              << " tokens, "
              << (c.is_transformer() ? "Transformer, width " + std::to_string(c.hidden_size) + ", " +
                                           std::to_string(c.num_layers) + " blocks, " + std::to_string(c.num_heads) +
                                           " heads, feed-forward " + std::to_string(c.ffn_size)
                                     : "embed " + std::to_string(c.embed_size) + ", hidden " +
                                           std::to_string(c.hidden_size) + ", " + std::to_string(c.num_layers) +
                                           " layers")
              << (c.source_steps > 0 ? ", num_steps " + std::to_string(c.source_steps) : "") << "\n";
    if (variant.empty() && c.is_transformer()) {
        std::cout << "d2l's TransformerEncoder/TransformerDecoder load it with load_state_dict "
                     "(tools/d2l_safetensors.py load/translate); its config says d2l_decode_positions "
                  << (c.d2l_decode_positions ? "true: it decodes as d2l's predict_step (position 0 for every token)"
                                             : "false: it decodes with true positions, as attnviz trained it")
                  << "\n";
    } else if (variant.empty()) {
        std::cout << "d2l's Seq2SeqEncoder/Seq2SeqAttentionDecoder load it with load_state_dict "
                     "(tools/d2l_safetensors.py load/translate)\n";
        if (c.source_steps == 0)
            std::cout << "no num_steps: the model reads each source at its own length (no padding); "
                         "tools/d2l_safetensors.py translates one sentence at a time to match\n";
    } else {
        std::cout << "note: this model is an attnviz variant (" << variant
                  << "): its tensors keep attnviz's own names and shapes where d2l has none, "
                     "and d2l's classes cannot load it; attnviz reads it back\n";
    }
    return exit_ok;
}

}  // namespace

Command add_export_command(CLI::App& parent) {
    auto o = std::make_shared<ExportOptions>();
    CLI::App* app = parent.add_subcommand("export", "Write a model for PyTorch: d2l's safetensors layout, or a Hugging Face folder");
    app->alias("export-model");
    app->footer(
        "The file holds the weights under the names of d2l's state_dict() (encoder.embedding.weight,\n"
        "decoder.attention.W_q.weight, ...) and in its metadata src_vocab, tgt_vocab (idx_to_token)\n"
        "and config. GRU + additive attention + unidirectional models load into d2l's classes, and\n"
        "Transformers into d2l's TransformerEncoder/-Decoder (encoder.blks.block0.attention.W_q.weight,\n"
        "..., config \"arch\": \"transformer\"); other variants are written for attnviz and Python\n"
        "inspection only.\n"
        "A pretrained model (opened from a Hugging Face folder, or fine-tuned from one) is written as a\n"
        "folder transformers' from_pretrained() loads: config.json, generation_config.json,\n"
        "model.safetensors and the tokenizer's files (--format hf, the default for such a model).\n"
        "Examples: attnviz-cli export --model fra.ckpt --out fra.safetensors\n"
        "          attnviz-cli export-model --model tuned.ckpt --format hf --out tuned-opus-mt");
    app->add_option("--model", o->model, "checkpoint (or any model file translate reads)")
        ->type_name("FILE")->required();
    app->add_option("--out", o->out, "the .safetensors file (d2l) or the folder (hf) to write, each file atomically")
        ->type_name("PATH")->required();
    app->add_option("--format", o->format, "auto (hf for a pretrained model, else d2l), d2l or hf")
        ->type_name("FORMAT")->default_str("auto");
    return {app, [o] { return run_export(*o); }};
}

}  // namespace attnviz::cli
