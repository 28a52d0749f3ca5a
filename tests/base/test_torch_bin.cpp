// torch.save files (pytorch_model.bin) read by the restricted reader (core/io/torch_bin):
// a file PyTorch wrote, read record by record; files built here the way torch writes
// them; and hostile ones -- globals naming callables, unknown opcodes, lengths,
// storages and tensors past their ends, compressed, encrypted, nested, overlapping
// and truncated archives, limits -- each refused with one line naming the file and
// what was found, never a crash.
#include "catch_torch.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "core/io/error.hpp"
#include "core/io/torch_bin.hpp"
#include "core/io/zip_archive.hpp"
#include "test_support.hpp"
#include "torch_zip_builder.hpp"

using namespace attnviz;
using namespace attnviz::testing;
using Catch::Contains;
namespace tb = attnviz::torch_bin;

namespace {

const std::string k_name = "crafted.bin";

std::string refusal(const std::string& bytes, const tb::Limits& limits = {}) {
    try {
        tb::parse(bytes, k_name, limits);
    } catch (const FileError& e) {
        return e.what();
    }
    return "(accepted)";
}

/// A tensor of 6 floats viewed as 2 x 3, the storage written with it.
PickledTensor two_by_three(const std::string& name = "w", const std::string& key = "0") {
    PickledTensor t;
    t.name = name;
    t.key = key;
    t.numel = 6;
    t.shape = {2, 3};
    t.strides = {3, 1};
    return t;
}

std::string good_file() { return torch_file(state_dict_pickle({two_by_three()}), {{"0", float_bytes(6)}}); }

/// A file whose data.pkl is `pickle` and whose one storage "0" holds 6 floats.
std::string with_pickle(const std::string& pickle) { return torch_file(pickle, {{"0", float_bytes(6)}}); }

/// A refusal names the file and says what it found.
void check_refused(const std::string& bytes, const std::string& says, const tb::Limits& limits = {}) {
    const std::string msg = refusal(bytes, limits);
    INFO(msg);
    CHECK_THAT(msg, Contains("'" + k_name + "'") && Contains(says));
    CHECK(msg.find('\n') == std::string::npos);
}

std::string real_file() { return read_all(std::string(ATTNVIZ_TEST_DATA) + "/../fuzz/corpus/torch_bin/torch_state.bin"); }

}  // namespace

TEST_CASE("a state_dict saved by torch.save is read: names, dtypes, shapes, strides, offsets and shared storages",
          "[torch_bin]") {
    // tests/fuzz/corpus/torch_bin/torch_state.bin: tests/support/make_weights_fixtures.py's
    // state.bin, written by PyTorch 2.11 (its values are checked in tests/core/test_weights_file.cpp).
    const std::string bytes = real_file();
    REQUIRE(bytes.size() > 1000);
    const tb::File f = tb::parse(bytes, "state.bin");
    CHECK(f.prefix == "state");
    std::vector<std::string> names;
    for (const auto& t : f.tensors) names.push_back(t.name);
    CHECK(names == std::vector<std::string>{"enc.weight", "enc.weight_t", "dec.half", "dec.bf16", "dec.double", "ids",
                                            "slice", "row", "scalar", "empty", "mask", "u8", "i8", "i16", "i32"});
    const auto* w = f.find("enc.weight");
    const auto* wt = f.find("enc.weight_t");
    REQUIRE((w && wt));
    CHECK(w->shape == std::vector<int64_t>{3, 5});
    CHECK(wt->shape == std::vector<int64_t>{5, 3});
    CHECK(wt->strides == std::vector<int64_t>{1, 5});
    CHECK(wt->storage == w->storage);  // the transposed view shares its storage
    CHECK(w->contiguous());
    CHECK_FALSE(wt->contiguous());
    const auto* slice = f.find("slice");
    const auto* row = f.find("row");
    REQUIRE((slice && row));
    CHECK(slice->storage_offset == 6);
    CHECK(slice->strides == std::vector<int64_t>{6, 2});
    CHECK(row->storage_offset == 18);
    CHECK(row->storage == slice->storage);
    CHECK(f.storages[slice->storage].numel == 24);
    CHECK(f.find("dec.half")->dtype == tb::DType::F16);
    CHECK(f.find("dec.bf16")->dtype == tb::DType::BF16);
    CHECK(f.find("dec.double")->dtype == tb::DType::F64);
    CHECK(f.find("ids")->dtype == tb::DType::I64);
    CHECK(f.find("mask")->dtype == tb::DType::BOOL);
    CHECK(f.find("scalar")->shape.empty());
    CHECK(f.find("empty")->shape == std::vector<int64_t>{0, 4});
    CHECK(f.storages.size() == 13);
    for (const auto& s : f.storages) {
        CHECK(s.offset % 64 == 0);  // torch aligns storages
        CHECK(s.offset + s.bytes() <= f.bytes.size());
    }
}

TEST_CASE("a torch.save file built here is read, and every shorter prefix of a real one is refused", "[torch_bin]") {
    const tb::File f = tb::parse(good_file(), k_name);
    REQUIRE(f.tensors.size() == 1);
    CHECK(f.tensors[0].name == "w");
    CHECK(f.tensors[0].shape == std::vector<int64_t>{2, 3});
    CHECK(f.prefix == "archive");
    float v = 0;
    std::memcpy(&v, f.data(f.storages[0]) + 5 * 4, 4);
    CHECK(v == 5.0f);

    const std::string real = real_file();
    int refused = 0;
    for (size_t n = 0; n < real.size(); ++n) {
        const std::string msg = refusal(real.substr(0, n));
        refused += msg != "(accepted)" && msg.find(k_name) != std::string::npos;
    }
    CHECK(refused == static_cast<int>(real.size()));
    // Damage anywhere in the archive's structure: a byte flipped at each position is
    // either refused or read (a flip in a storage's bytes changes a value), never a crash.
    for (size_t at = 0; at < real.size(); at += 7) {
        std::string damaged = real;
        damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
        (void)refusal(damaged);
    }
}

TEST_CASE("a torch.save file naming a callable is refused, naming it, and nothing is called", "[torch_bin][hostile]") {
    for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
             {"os", "system"}, {"posix", "system"}, {"builtins", "eval"}, {"builtins", "exec"}, {"subprocess", "Popen"},
             {"torch._utils", "_rebuild_tensor"}, {"torch", "load"}, {"__builtin__", "getattr"}}) {
        Pickle p;
        p.proto().global(module, name).str("touch /tmp/attnviz-pwned").op('\x85').op('R').stop();
        check_refused(with_pickle(p.b), "names the Python global '" + module + "." + name + "'");
    }
    // Protocol 4's STACK_GLOBAL takes the names from the stack.
    Pickle p4;
    p4.proto(4).op('\x8c').b += std::string("\x08", 1) + "builtins";
    p4.op('\x8c').b += std::string("\x04", 1) + "eval";
    p4.op('\x93').str("1+1").op('\x85').op('R').stop();
    check_refused(with_pickle(p4.b), "names the Python global 'builtins.eval'");
    // The global hidden inside a state_dict, after a good tensor.
    std::string pickle = state_dict_pickle({two_by_three()});
    pickle.insert(pickle.size() - 2, Pickle().str("x").global("os", "system").str("id").op('\x85').op('R').b);
    check_refused(with_pickle(pickle), "'os.system'");
    // A name with a line break or control characters is quoted on one line.
    check_refused(with_pickle(Pickle().proto().global("os\x1b[31m", "sys").stop().b), "\\x1B[31m");
}

TEST_CASE("a torch.save file with opcodes torch.save does not write is refused, naming the opcode", "[torch_bin][hostile]") {
    const std::string good = state_dict_pickle({two_by_three()});
    for (const auto& [op, shown] : std::vector<std::pair<char, std::string>>{
             {'i', "0x69 ('i')"}, {'o', "0x6f ('o')"}, {'\x81', "0x81"}, {'G', "0x47 ('G')"}, {'S', "0x53 ('S')"},
             {'\xff', "0xff"}, {'\x92', "0x92"}}) {
        std::string pickle = good;
        pickle.insert(2, 1, op);
        check_refused(with_pickle(pickle), "holds the pickle opcode " + shown);
    }
    check_refused(with_pickle(Pickle().proto(0).stop().b), "protocol 0");
    check_refused(with_pickle(good + "junk"), "4 bytes after the end of its pickle");
    check_refused(with_pickle(good.substr(0, good.size() - 1)), "ends in the middle");
}

TEST_CASE("lengths, storages and tensors that reach past their ends are refused", "[torch_bin][hostile]") {
    // A string claiming 2 GB.
    check_refused(with_pickle(Pickle().proto().op('X').b + std::string("\xff\xff\xff\x7f", 4) + "abc"),
                  "reaches past its pickle");
    // A storage claiming more elements than its record holds, and one of 2^60 elements.
    auto t = two_by_three();
    t.numel = 100;
    check_refused(with_pickle(state_dict_pickle({t})), "names storage '0' of 100 F32 elements, but its zip entry holds 24 bytes");
    t.numel = int64_t(1) << 60;
    check_refused(with_pickle(state_dict_pickle({t})), "storage '0'");
    // Sizes, strides and offsets past the storage, or overflowing 64 bits.
    t = two_by_three();
    t.shape = {3, 3};
    check_refused(with_pickle(state_dict_pickle({t})), "reaches past its storage '0' of 6 elements");
    t = two_by_three();
    t.offset = 1;
    check_refused(with_pickle(state_dict_pickle({t})), "reaches past its storage");
    t = two_by_three();
    t.shape = {2, int64_t(1) << 40};
    t.strides = {int64_t(1) << 40, int64_t(1) << 40};
    check_refused(with_pickle(state_dict_pickle({t})), "reaches past its storage");
    t = two_by_three();
    t.shape = {int64_t(1) << 62, int64_t(1) << 62};
    t.strides = {0, 0};
    check_refused(with_pickle(state_dict_pickle({t})), "reaches past its storage");
    // Negative numbers.
    t = two_by_three();
    t.offset = -1;
    check_refused(with_pickle(state_dict_pickle({t})), "negative storage offset (-1)");
    t = two_by_three();
    t.shape = {-2, 3};
    check_refused(with_pickle(state_dict_pickle({t})), "negative tensor size");
    t = two_by_three();
    t.strides = {3, -1};
    check_refused(with_pickle(state_dict_pickle({t})), "negative tensor stride");
    t = two_by_three();
    t.numel = -6;
    check_refused(with_pickle(state_dict_pickle({t})), "negative storage size");
    // A storage the zip does not hold, and one it holds that no tensor uses.
    check_refused(with_pickle(state_dict_pickle({two_by_three("w", "7")})), "holds no zip entry 'archive/data/7'");
    check_refused(torch_file(state_dict_pickle({two_by_three()}), {{"0", float_bytes(6)}, {"1", float_bytes(1)}}),
                  "'archive/data/1', a storage no tensor of its state_dict uses");
    // More sizes than strides, and too many dimensions.
    t = two_by_three();
    t.strides = {1};
    check_refused(with_pickle(state_dict_pickle({t})), "2 sizes but 1 strides");
    t = two_by_three();
    t.shape = std::vector<int64_t>(9, 1);
    t.strides = std::vector<int64_t>(9, 1);
    check_refused(with_pickle(state_dict_pickle({t})), "9 dimensions, more than the 8");
}

TEST_CASE("persistent ids, calls and states that are not a state_dict's are refused", "[torch_bin][hostile]") {
    // A persistent id that is not ('storage', type, key, location, size).
    Pickle p;
    p.proto().mark().str("module").str("x").tuple().op('Q').stop();
    check_refused(with_pickle(p.b), "persistent id that is not a torch storage");
    // A storage type used as a function, OrderedDict called with arguments, BUILD on a tensor.
    check_refused(with_pickle(Pickle().proto().global("torch", "FloatStorage").op(')').op('R').stop().b),
                  "calls a storage type");
    check_refused(with_pickle(Pickle().proto().global("collections", "OrderedDict").str("x").op('\x85').op('R').stop().b),
                  "calls OrderedDict with arguments");
    Pickle tensor;
    pickle_tensor(tensor, two_by_three());
    check_refused(with_pickle(Pickle().proto().b + tensor.b + Pickle().op('}').op('b').stop().b), "sets the state of a tensor");
    // Not a dict of tensors at the top.
    check_refused(with_pickle(Pickle().proto().op(']').stop().b), "holds a list, not a state_dict");
    check_refused(with_pickle(Pickle().proto().op('}').str("epoch").int1(3).op('s').stop().b),
                  "holds 'epoch', which is an integer, not a tensor");
    Pickle twice;
    twice.proto().ordered_dict().mark().str("w");
    pickle_tensor(twice, two_by_three());
    twice.str("w");
    pickle_tensor(twice, two_by_three());
    check_refused(with_pickle(twice.op('u').stop().b), "names tensor 'w' twice");
    // Backward hooks (a dict that is not empty) would be callables.
    std::string hooks = state_dict_pickle({two_by_three()});
    const std::string empty_hooks = "ccollections\nOrderedDict\n)R";
    const size_t at = hooks.find(empty_hooks, hooks.find("_rebuild_tensor_v2"));
    REQUIRE(at != std::string::npos);
    hooks.insert(at + empty_hooks.size(), Pickle().str("k").int1(1).op('s').b);
    check_refused(with_pickle(hooks), "backward hooks or metadata");
    // The same storage named with two types.
    auto half = two_by_three("h");
    half.storage_type = "HalfStorage";
    check_refused(with_pickle(state_dict_pickle({two_by_three(), half})), "names storage '0' twice with different types");
}

TEST_CASE("zip archives torch.save does not write are refused: compressed, encrypted, nested, overlapping, past the end",
          "[torch_bin][hostile]") {
    const std::string pickle = state_dict_pickle({two_by_three()});
    auto entries = [&] {
        return std::vector<ZipEntrySpec>{{"archive/data.pkl", pickle}, {"archive/data/0", float_bytes(6)}};
    };
    auto e = entries();
    e[1].method = 8;
    check_refused(make_zip(e), "holds a compressed zip entry 'archive/data/0' (zip method 8)");
    e = entries();
    e[0].flags = 0x0801;
    check_refused(make_zip(e), "holds an encrypted zip entry 'archive/data.pkl'");
    // A zip inside: as data.pkl, as an extra entry, as an unused storage.
    check_refused(make_zip({{"archive/data.pkl", good_file()}, {"archive/data/0", float_bytes(6)}}), "nested zip");
    e = entries();
    e.push_back({"archive/inner.zip", good_file()});
    check_refused(make_zip(e), "holds the zip entry 'archive/inner.zip', which a torch.save state_dict does not have");
    e = entries();
    e.push_back({"archive/data/9", good_file()});
    check_refused(make_zip(e), "'archive/data/9', a storage no tensor");
    e = entries();
    e.push_back({"elsewhere/x", "1"});
    check_refused(make_zip(e), "outside its folder 'archive'");
    e = entries();
    e.push_back({"other/data.pkl", pickle});
    check_refused(make_zip(e), "holds two pickles");
    // Two entries of one name.
    e = entries();
    e.push_back({"archive/data/0", float_bytes(6)});
    check_refused(make_zip(e), "two entries named 'archive/data/0'");
    // An entry whose size runs over the next one (its local header has a data descriptor,
    // so only the central directory gives its size), and one past the end.
    e = entries();
    e[0].flags = 0x0808;
    e[0].central_size = static_cast<int64_t>(pickle.size()) + 80;
    check_refused(make_zip(e), "overlap");
    e = entries();
    e[1].flags = 0x0808;
    e[1].central_size = 1000000000;
    check_refused(make_zip(e), "reaches past the end of the entries");
    e = entries();
    e[1].flags = 0x0808;
    e[1].zip64_size = true;
    e[1].central_size = int64_t(1) << 62;
    check_refused(make_zip(e), "reaches past the end of the entries");
    // A central record pointing at another entry's local header.
    e = entries();
    e[1].central_offset = 0;
    check_refused(make_zip(e), "does not match the central directory");
    // Big-endian storages.
    e = entries();
    e.push_back({"archive/byteorder", "big"});
    check_refused(make_zip(e), "byte order is 'big'");
    // Not a zip, an empty file, a zip cut before its end record.
    check_refused("{\"a\": 1}", "is not a torch.save file");
    check_refused("", "is truncated");
    const std::string good = good_file();
    check_refused(good.substr(0, good.size() - 30), "no zip end-of-central-directory record");
    // Without ZIP64 records (what other zip writers make) the file is read.
    CHECK(tb::parse(make_zip(entries(), false), k_name).tensors.size() == 1);
}

TEST_CASE("the limits of a torch.save file: file size, entries, tensors, rank, pickle, memo, objects, nesting",
          "[torch_bin][hostile]") {
    const std::string good = good_file();
    tb::Limits l;
    l.max_file_bytes = 100;
    check_refused(good, "bytes, more than the 100 this reads", l);
    l = {};
    l.max_zip_entries = 2;
    check_refused(good, "zip archive of 4 entries, more than the 2", l);
    l = {};
    l.max_tensors = 1;
    check_refused(with_pickle(state_dict_pickle({two_by_three("a"), two_by_three("b")})), "2 tensors, more than the 1", l);
    l = {};
    l.max_rank = 1;
    check_refused(good, "2 dimensions, more than the 1", l);
    l = {};
    l.max_pickle_bytes = 50;
    check_refused(good, "data.pkl of", l);
    l = {};
    l.max_memo = 2;
    Pickle memo;
    memo.proto().op('N').op('q').b += std::string("\x00", 1);
    memo.op('q').b += "\x01";
    memo.op('q').b += "\x02";
    check_refused(with_pickle(memo.b), "more than the 2 objects this reads", l);
    l = {};
    l.max_values = 1000;
    Pickle many;
    many.proto().mark();
    for (int i = 0; i < 2000; ++i) many.int1(1);
    check_refused(with_pickle(many.tuple().stop().b), "more than the 1000 objects", l);
    // MARKs opened without end, containers in containers.
    check_refused(with_pickle(Pickle().proto().b + std::string(100, '(')), "opens more than 32 MARKs");
    Pickle deep;
    deep.proto().op(')');
    for (int i = 0; i < 40; ++i) deep.op('\x85');
    check_refused(with_pickle(deep.stop().b), "nests containers more than 32 deep");
    // A dict that holds itself grows deeper each time, and stops at the bound.
    Pickle self;
    self.proto().op('}').op('q').b += std::string("\x00", 1);
    for (int i = 0; i < 40; ++i) self.str("k").op('h').b += std::string("\x00", 1) + "s";
    check_refused(with_pickle(self.stop().b), "nests containers more than 32 deep");
    // A memo entry that was never put, a MARK that is missing, an empty stack.
    check_refused(with_pickle(Pickle().proto().op('h').b + std::string("\x05", 1) + "."), "memo entry 5, which was never put");
    check_refused(with_pickle(Pickle().proto().op('t').stop().b), "no MARK");
    check_refused(with_pickle(Pickle().proto().op('R').stop().b), "empty stack");
    check_refused(with_pickle(Pickle().proto().stop().b), "0 objects on its stack");
}

TEST_CASE("zip's CRC-32 is the standard one, and a damaged data.pkl is caught by it", "[torch_bin]") {
    CHECK(zip::crc32("123456789") == 0xcbf43926u);
    CHECK(zip::crc32("") == 0u);
    std::string bytes = good_file();
    const size_t at = bytes.find("_rebuild_tensor_v2");
    REQUIRE(at != std::string::npos);
    bytes[at + 1] = 'R';  // still a valid name to the zip; the pickle's CRC no longer matches
    check_refused(bytes, "CRC-32 of its data.pkl does not match");
}
