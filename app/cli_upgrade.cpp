// attnviz-cli upgrade-checkpoint OLD NEW --trust: converts a checkpoint of
// format version 1 (weights in a LibTorch archive, whose loader trusts the
// file) to the current safetensors-based format, for a file the user trusts.
#include <iostream>

#include "app/cli_common.hpp"
#include "core/persist/checkpoint.hpp"
#include "core/persist/checkpoint_legacy.hpp"
#include "core/io/error.hpp"
#include "core/io/message.hpp"

namespace attnviz::cli {

namespace {
struct UpgradeOptions {
    std::string from, to;
    bool trust = false;
};
}  // namespace

Command add_upgrade_command(CLI::App& parent) {
    auto o = std::make_shared<UpgradeOptions>();
    CLI::App* app = parent.add_subcommand(
        "upgrade-checkpoint", "convert a checkpoint of attnviz's old format (version 1) to the current one");
    app->add_option("OLD", o->from, "the version-1 checkpoint")->required()->type_name("FILE");
    app->add_option("NEW", o->to, "where to write the converted checkpoint (may be OLD itself)")
        ->required()
        ->type_name("FILE");
    app->add_flag("--trust", o->trust,
                  "required: the old format is read with LibTorch's archive loader, which trusts sizes stored in the "
                  "file; pass it only for a file whose origin you trust");
    app->footer("The converted file holds the same weights, vocabularies, history and optimiser state; it is\n"
                "read by attnviz's own checked reader. The old file is left as it is (unless NEW is OLD).");
    return {app, [o] {
                if (!o->trust)
                    throw UsageError("upgrade-checkpoint reads the old format with LibTorch's archive loader, which "
                                     "trusts sizes stored in the file: add --trust if you trust where " +
                                     quote(o->from, quote_path_max) + " came from");
                switch (detect_model_file(o->from)) {
                case ModelFileKind::legacy_checkpoint: break;
                case ModelFileKind::checkpoint:
                    throw FileError(quote(o->from, quote_path_max) + " is already in the current checkpoint format; nothing to do");
                default:
                    throw FileError(quote(o->from, quote_path_max) + " is not a version-1 attnviz checkpoint. attnviz reads " +
                                    readable_model_formats());
                }
                check_writable("NEW", o->to);
                upgrade_checkpoint(o->from, o->to);
                std::cerr << "upgraded " << quote(o->from, quote_path_max) << " to " << quote(o->to, quote_path_max)
                          << " (checkpoint format version "
                          << checkpoint_version << ")\n";
                return exit_ok;
            }};
}

}  // namespace attnviz::cli
