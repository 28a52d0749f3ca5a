// attnviz-cli export: a model as a safetensors file in d2l's layout, for PyTorch.
#include <iostream>

#include "app/cli_common.hpp"
#include "core/persist/model_file.hpp"
#include "core/persist/d2l_interop.hpp"
#include "core/decode/translation_model.hpp"

namespace attnviz::cli {

namespace {

struct ExportOptions {
    std::string model, out;
};

int run_export(const ExportOptions& o) {
    check_writable("--out", o.out);
    const auto model = load_model(o.model);
    const std::string variant = export_d2l(*model, o.out);
    const auto& c = model->config();
    std::cout << "wrote " << o.out << ": " << model->src_vocab().size() << " + " << model->tgt_vocab().size()
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
    CLI::App* app = parent.add_subcommand("export", "Write a model as safetensors in d2l's PyTorch layout");
    app->footer(
        "The file holds the weights under the names of d2l's state_dict() (encoder.embedding.weight,\n"
        "decoder.attention.W_q.weight, ...) and in its metadata src_vocab, tgt_vocab (idx_to_token)\n"
        "and config. GRU + additive attention + unidirectional models load into d2l's classes, and\n"
        "Transformers into d2l's TransformerEncoder/-Decoder (encoder.blks.block0.attention.W_q.weight,\n"
        "..., config \"arch\": \"transformer\"); other variants are written for attnviz and Python\n"
        "inspection only.\n"
        "Example: attnviz-cli export --model fra.ckpt --out fra.safetensors");
    app->add_option("--model", o->model, "checkpoint (or any model file translate reads)")
        ->type_name("FILE")->required();
    app->add_option("--out", o->out, "the .safetensors file to write (atomically)")->type_name("FILE")->required();
    return {app, [o] { return run_export(*o); }};
}

}  // namespace attnviz::cli
