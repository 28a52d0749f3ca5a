#pragma once
// Hugging Face model folders: a pretrained translation model (Marian / opus-mt,
// M2M100, NLLB) read into a TranslationModel, and a TranslationModel of the
// pretrained family written back as a folder transformers' from_pretrained() loads.
//
// A folder holds config.json, generation_config.json (older folders keep those fields
// in config.json), the weights (model.safetensors, a sharded model.safetensors.index.json,
// or pytorch_model.bin: core/persist/weights_file.hpp) and the tokenizer's files
// (core/text/pretrained_tokenizer.hpp). A hub id ("Helsinki-NLP/opus-mt-en-fr") is found
// in the local Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub:
// models--ORG--NAME/snapshots/REV/; core/hub/hub_cache.hpp); opening one never downloads it
// (attnviz-cli download and the app's File → Open from the Hugging Face Hub… do).
//
// Rows are put in attnviz's vocabulary order (core/config/pretrained_config.hpp's
// PretrainedSpec) on reading and back on writing: nothing else changes, so a folder written
// back holds the same tensors (a fine-tuned model: its new values).
#include <string>
#include <vector>

#include "core/decode/translation_model.hpp"
#include "core/model/inference_precision.hpp"

namespace attnviz {

/// Whether `dir` is a directory with a config.json (a model folder to read).
bool is_model_folder(const std::string& dir);

/// Whether `name` has the form of a hub id: ORG/NAME (one slash, letters, digits, '-', '_', '.').
bool looks_like_hub_id(const std::string& name);

/// The snapshot folder of hub id `id` in the local Hugging Face cache (the revision refs/main
/// names, never a path out of snapshots/, else the newest snapshot); FileError saying where it
/// looked and how to download the model (attnviz-cli download ID, or the app's menu) when it is not there.
std::string find_in_hub_cache(const std::string& id);

/// The caches find_in_hub_cache() searches, in order.
std::vector<std::string> hub_cache_dirs();

/// Reads a model folder. FileError naming the file and what is wrong: a missing or unknown
/// config field, an unsupported model_type (naming the supported ones), weights missing or of
/// the wrong shape, a tokenizer that disagrees with the model, a hostile weight file.
///
/// `precision` int8 or bf16: the weights set_inference_precision converts are converted as they are
/// read, each from the mapped file a block of rows at a time, and the file's pages of each are then
/// released, so the float32 model is never resident as a whole (an opus-mt-sized int8 model opens
/// in about its int8 size, not its float32 size plus its int8 one). The network is then as
/// set_inference_precision(precision) would have made it after a float32 load (the CPU only).
TranslationModelPtr load_model_folder(const std::string& dir, InferencePrecision precision = InferencePrecision::fp32);

/// Whether a file of this name in a model folder belongs to the model: its configs, weights of any
/// format (shards and indexes included) or tokenizer files. Writing a folder replaces all of them.
bool is_model_file_name(const std::string& name);

/// Writes a pretrained-family model as a folder: config.json, generation_config.json,
/// model.safetensors and the tokenizer's files, all or nothing (core/io/atomic_file.hpp's
/// write_folder_atomic): on any failure `dir` is as it was. `dir` is created when absent; an
/// existing model folder is replaced whole (its other files, a README, kept); ConfigError for a
/// model of another family; FileError when `dir` is a file, a folder of other files, or cannot be written.
void save_model_folder(const TranslationModel& model, const std::string& dir);

}  // namespace attnviz
