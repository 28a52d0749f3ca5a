// Weights files as tensors (core/persist/weights_file, safetensors_torch, torch_bin_tensor):
// files written by PyTorch and safetensors at test time (tests/support/make_weights_fixtures.py,
// skipped when the project's Python with torch is absent) give the values torch.load and
// load_file give, copied or viewed (views share memory as torch.load's tensors do, and
// writes never reach the file), converted to float32 on request; sharded models; hostile
// files refused in one line; and a ~300 MB model opened with its peak memory bounded.
#include "catch_torch.hpp"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/process_memory.hpp"
#include "core/io/safetensors.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "core/persist/torch_bin_tensor.hpp"
#include "core/persist/weights_file.hpp"
#include "test_support.hpp"
#include "torch_zip_builder.hpp"

using namespace attnviz;
using namespace attnviz::testing;
using Catch::Contains;
using ojson = nlohmann::ordered_json;
namespace st = attnviz::safetensors;

namespace {

/// The folder make_weights_fixtures.py wrote (once per run), or "" when Python with torch is absent.
const std::string& fixtures() {
    static std::unique_ptr<ScratchDir> dir;
    static std::string path;
    static bool tried = false;
    if (tried) return path;
    tried = true;
    const std::string python = ATTNVIZ_VENV_PYTHON;
    struct stat s {};
    if (python.empty() || ::stat(python.c_str(), &s) != 0) return path;
    dir = std::make_unique<ScratchDir>("weights-fx");
    const std::string cmd = "'" + python + "' '" + ATTNVIZ_WEIGHTS_FIXTURES + "' '" + dir->path + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    if (rc == 0) path = dir->path;
    else if (WIFEXITED(rc) && WEXITSTATUS(rc) != 77) FAIL("make_weights_fixtures.py failed: " << rc);
    return path;
}

#define REQUIRE_FIXTURES()                                                                         \
    if (fixtures().empty()) {                                                                      \
        WARN("no Python with torch and safetensors at " ATTNVIZ_VENV_PYTHON "; skipping");         \
        return;                                                                                    \
    }

ojson expected() {
    std::ifstream in(fixtures() + "/expected.json");
    return ojson::parse(in);
}

torch::ScalarType scalar_of(const std::string& dtype) {
    st::DType d = st::DType::F32;
    for (const auto c : {st::DType::F64, st::DType::F32, st::DType::F16, st::DType::BF16, st::DType::I64, st::DType::I32,
                         st::DType::I16, st::DType::I8, st::DType::U8, st::DType::BOOL})
        if (st::to_string(c) == dtype) d = c;
    return st::scalar_type(d);
}

/// Python's values of an expected tensor, as doubles (bools 0/1).
torch::Tensor values_of(const ojson& e) {
    std::vector<double> v;
    for (const auto& x : e.at("values")) v.push_back(x.is_boolean() ? (x.get<bool>() ? 1.0 : 0.0) : x.get<double>());
    return torch::tensor(v, torch::kDouble).reshape(e.at("shape").get<std::vector<int64_t>>());
}

/// Every tensor equals what Python gave: same names in the same order, dtype, shape, values.
void check_equal(const NamedTensors& got, const ojson& want, bool to_float = false, bool check_order = true) {
    REQUIRE(got.size() == want.size());
    size_t i = 0;
    for (const auto& [name, e] : want.items()) {
        INFO(name);
        const torch::Tensor* t = nullptr;
        for (const auto& [n, tensor] : got)
            if (n == name) t = &tensor;
        REQUIRE(t != nullptr);
        if (check_order) CHECK(got[i].first == name);
        ++i;
        const auto stored = scalar_of(e.at("dtype").get<std::string>());
        const bool converts = to_float && torch::isFloatingType(stored);
        CHECK(t->scalar_type() == (converts ? torch::kFloat : stored));
        CHECK(t->sizes().vec() == e.at("shape").get<std::vector<int64_t>>());
        CHECK_FALSE(t->requires_grad());
        torch::Tensor want_values = values_of(e);
        if (converts) want_values = want_values.to(stored).to(torch::kFloat);  // torch's own conversion
        CHECK(torch::equal(t->to(torch::kDouble), want_values.to(torch::kDouble)));
    }
}

const torch::Tensor& named(const NamedTensors& ts, const std::string& name) {
    for (const auto& [n, t] : ts)
        if (n == name) return t;
    FAIL("no tensor " << name);
    return ts.front().second;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const FileError& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("pytorch_model.bin files written by torch.save give the tensors torch.load gives", "[weights][torch_bin]") {
    REQUIRE_FIXTURES();
    const ojson want = expected();
    for (const std::string name : {"state.bin", "module.bin", "param.bin", "proto4.bin"}) {
        INFO(name);
        const std::string path = fixtures() + "/" + name;
        check_equal(read_weights(path), want.at(name));
        WeightsReadOptions view;
        view.view = true;
        check_equal(read_weights(path, view), want.at(name));
        WeightsReadOptions convert;
        convert.to_float = true;
        check_equal(read_weights(path, convert), want.at(name), true);
        convert.view = true;
        check_equal(read_weights(path, convert), want.at(name), true);
    }
    // Copies are contiguous; a strided record keeps its strides when viewed.
    const auto copies = read_weights(fixtures() + "/state.bin");
    CHECK(named(copies, "enc.weight_t").is_contiguous());
    CHECK(named(copies, "slice").is_contiguous());
}

TEST_CASE("viewed .bin tensors share memory as torch.load's do, and writing them never changes the file",
          "[weights][torch_bin]") {
    REQUIRE_FIXTURES();
    const std::string path = fixtures() + "/state.bin";
    const std::string before = read_all(path);
    WeightsReadOptions o;
    o.view = true;
    NamedTensors v = read_weights(path, o);
    const torch::Tensor w = named(v, "enc.weight"), wt = named(v, "enc.weight_t");
    CHECK(wt.strides().vec() == std::vector<int64_t>{1, 5});
    CHECK(w.data_ptr() == wt.data_ptr());  // one storage, as tied weights share one
    const torch::Tensor slice = named(v, "slice"), row = named(v, "row");
    CHECK(static_cast<const float*>(row.data_ptr()) - static_cast<const float*>(slice.data_ptr()) == 12);
    w[0][1].fill_(42.0f);
    CHECK(wt[1][0].item<float>() == 42.0f);
    v.clear();
    CHECK(read_all(path) == before);
    // A new read sees the file, not the earlier process-private write.
    CHECK(named(read_weights(path, o), "enc.weight")[0][1].item<float>() != 42.0f);
}

TEST_CASE("safetensors files written by safetensors give the tensors load_file gives, copied, viewed or converted",
          "[weights][safetensors]") {
    REQUIRE_FIXTURES();
    const ojson want = expected();
    const std::string path = fixtures() + "/model.safetensors";
    WeightsReadOptions o;
    check_equal(read_weights(path, o), want.at("model.safetensors"), false, false);
    o.view = true;
    check_equal(read_weights(path, o), want.at("model.safetensors"), false, false);
    o.to_float = true;
    check_equal(read_weights(path, o), want.at("model.safetensors"), true, false);

    // view_tensor: the tensor is the mapped file's bytes, outlives the File, and writes stay in this process.
    const std::string before = read_all(path);
    torch::Tensor a;
    {
        const st::File f = st::read_file(path);
        const st::TensorInfo* e = f.find("a.f32");
        REQUIRE(e);
        a = st::view_tensor(f, *e, st::DType::F32);
        CHECK(a.data_ptr() == static_cast<const void*>(f.data(*e)));
        CHECK(st::to_tensor(f, *e, st::DType::F32).data_ptr() != a.data_ptr());
        CHECK_THROWS_WITH(st::view_tensor(f, *e, st::DType::F16), Contains("has dtype F32, expected F16"));
        CHECK_THROWS_WITH(st::to_float_tensor(f, *f.find("d.i64")),
                          Contains("'d.i64' has dtype I64, expected a floating type"));
    }
    CHECK(torch::equal(a.to(torch::kDouble), values_of(want.at("model.safetensors").at("a.f32"))));
    a.fill_(7.0f);
    CHECK(read_all(path) == before);
}

TEST_CASE("a safetensors entry that is not aligned for its type is copied instead of viewed", "[weights][safetensors]") {
    const uint16_t half = 0x3c00;  // 1.0
    const float floats[2] = {2.5f, -1.0f};
    // An F16 entry of one element first: the F32 entry after it starts 2 bytes off alignment.
    const std::string bytes = st::serialize({{"h", st::DType::F16, {1}, &half, 2}, {"f", st::DType::F32, {2}, floats, 8}});
    const st::File f = st::parse(bytes, "unaligned.safetensors");
    const st::TensorInfo* e = f.find("f");
    REQUIRE(e);
    REQUIRE(reinterpret_cast<uintptr_t>(f.data(*e)) % 4 != 0);
    const torch::Tensor t = st::view_tensor(f, *e, st::DType::F32);
    CHECK(t.data_ptr() != static_cast<const void*>(f.data(*e)));
    CHECK(t[0].item<float>() == 2.5f);
    CHECK(t[1].item<float>() == -1.0f);
    CHECK(st::to_float_tensor(f, *f.find("h")).item<float>() == 1.0f);
    // An aligned one is viewed (the in-memory string is its owner).
    const std::string aligned = st::serialize({{"f", st::DType::F32, {2}, floats, 8}});
    const st::File g = st::parse(aligned, "aligned.safetensors");
    CHECK(st::view_tensor(g, g.tensors[0], st::DType::F32).data_ptr() == static_cast<const void*>(g.data(g.tensors[0])));
}

TEST_CASE("sharded models: every shard read, names checked against the index, folders and paths resolved",
          "[weights][shards]") {
    REQUIRE_FIXTURES();
    const ojson want = expected();
    for (const std::string folder : {"sharded", "binsharded"}) {
        INFO(folder);
        const std::string dir = fixtures() + "/" + folder;
        check_equal(read_weights(dir), want.at(folder), false, false);  // the folder: its index is found
        WeightsReadOptions o;
        o.view = true;
        o.to_float = true;
        check_equal(read_weights(dir, o), want.at(folder), true, false);
    }
    const std::string dir = fixtures() + "/sharded";
    const std::string index = dir + "/model.safetensors.index.json";
    const std::string good = read_all(index);
    auto refusal = [&](const std::string& json) {
        write_all(index, json);
        return error_of([&] { read_weights(index); });
    };
    const std::string shard1 = "model-00001-of-00002.safetensors", shard2 = "model-00002-of-00002.safetensors";
    // A shard outside the folder, even one that exists.
    CHECK_THAT(refusal(R"({"weight_map": {"s.one": "../model.safetensors"}})"),
               Contains(index) && Contains("goes up a folder"));
    CHECK_THAT(refusal(R"({"weight_map": {"s.one": ")" + fixtures() + R"(/model.safetensors"}})"),
               Contains("is an absolute path"));
    // Tensors the index places elsewhere, does not name, or names but no shard holds.
    CHECK_THAT(refusal(R"({"weight_map": {"s.one": ")" + shard2 + R"(", "s.two": ")" + shard1 + R"(", "s.three": ")" + shard2 + R"("}})"),
               Contains("holds tensor 's.one', which its index") && Contains("places in '" + shard2 + "'"));
    CHECK_THAT(refusal(R"({"weight_map": {"s.one": ")" + shard1 + R"(", "s.three": ")" + shard2 + R"("}})"),
               Contains("holds tensor 's.two', which its index") && Contains("does not name"));
    CHECK_THAT(refusal(R"({"weight_map": {"s.one": ")" + shard1 + R"(", "s.two": ")" + shard1 + R"(", "s.three": ")" +
                       shard2 + R"(", "s.four": ")" + shard2 + R"("}})"),
               Contains("places tensor 's.four' in '" + shard2 + "', which does not hold it"));
    CHECK_THAT(refusal(R"({"weight_map": {"s.one": "missing.safetensors"}})"), Contains("cannot open"));
    CHECK_THAT(refusal(R"({"weight_map": {"s.one": "model.safetensors.index.json"}})"), Contains("another shard index"));
    write_all(index, good);
}

TEST_CASE("a hostile or damaged pytorch_model.bin is refused in one line naming the file", "[weights][torch_bin][hostile]") {
    ScratchDir dir("weights-bad");
    Pickle evil;
    evil.proto().global("os", "system").str("touch " + dir / "pwned").op('\x85').op('R').stop();
    write_all(dir / "pytorch_model.bin", torch_file(evil.b, {}));
    std::string msg = error_of([&] { read_weights(dir.path); });
    CHECK_THAT(msg, Contains(dir / "pytorch_model.bin") && Contains("'os.system'"));
    CHECK(msg.find('\n') == std::string::npos);
    struct stat s {};
    CHECK(::stat((dir / "pwned").c_str(), &s) != 0);
    // Truncated.
    PickledTensor t;
    t.name = "w";
    t.numel = 6;
    t.shape = {6};
    t.strides = {1};
    const std::string good = torch_file(state_dict_pickle({t}), {{"0", float_bytes(6)}});
    write_all(dir / "pytorch_model.bin", good);
    CHECK(named(read_weights(dir.path), "w")[5].item<float>() == 5.0f);
    write_all(dir / "pytorch_model.bin", good.substr(0, good.size() / 2));
    CHECK_THAT(error_of([&] { read_weights(dir.path); }), Contains(dir / "pytorch_model.bin") && Contains("truncated"));
    // A record whose dtype has no float32 form, asked as float32.
    const torch_bin::File f = torch_bin::parse(torch_file(state_dict_pickle({[] {
        PickledTensor l;
        l.name = "ids";
        l.storage_type = "LongStorage";
        l.numel = 2;
        l.shape = {2};
        l.strides = {1};
        return l;
    }()}), {{"0", std::string(16, '\0')}}), "ids.bin");
    CHECK_THROWS_WITH(torch_bin::to_float_tensor(f, f.tensors[0]), Contains("'ids.bin'") && Contains("'ids' has dtype I64"));
}

TEST_CASE("a 300 MB safetensors model opens as viewed tensors with peak memory below 1.5 times its size",
          "[weights][memory]") {
    ScratchDir dir("weights-big");
    const std::string path = dir / "model.safetensors";
    // 75 tensors of 1 Mi floats (300 MiB), written chunk by chunk so the writing costs no memory.
    const int tensors = 75;
    const int64_t n = int64_t(1) << 20;
    nlohmann::json header;
    for (int i = 0; i < tensors; ++i)
        header["layer." + std::to_string(i) + ".weight"] = {
            {"dtype", "F32"}, {"shape", {n}}, {"data_offsets", {i * n * 4, (i + 1) * n * 4}}};
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    {
        std::ofstream out(path, std::ios::binary);
        std::string len;
        put_le(len, text.size(), 8);
        out << len << text;
        std::vector<float> chunk(static_cast<size_t>(n));
        for (int i = 0; i < tensors; ++i) {
            std::fill(chunk.begin(), chunk.end(), static_cast<float>(i));
            out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(n * 4));
        }
        REQUIRE(out.good());
    }
    struct stat info {};
    REQUIRE(::stat(path.c_str(), &info) == 0);
    const double file_mb = static_cast<double>(info.st_size) / (1024.0 * 1024.0);
    REQUIRE(file_mb > 299);
    release_free_heap();
    const bool reset = reset_peak_resident();
    const double baseline = resident_mb();
    double sum = 0;
    {
        WeightsReadOptions o;
        o.view = true;
        o.to_float = true;
        const NamedTensors w = read_weights(path, o);
        REQUIRE(w.size() == static_cast<size_t>(tensors));
        for (const auto& [name, t] : w) sum += t.sum(torch::kDouble).item<double>();  // every page used
    }
    const double peak = peak_resident_mb();
    CHECK(sum == static_cast<double>(n) * (tensors - 1) * tensors / 2);
    std::printf("{\"test\": \"300 MB safetensors viewed\", \"file_mb\": %.1f, \"baseline_rss_mb\": %.1f, "
                "\"peak_rss_mb\": %.1f, \"increase_mb\": %.1f, \"peak_reset\": %s}\n",
                file_mb, baseline, peak, peak - baseline, reset ? "true" : "false");
    // The process's own baseline (LibTorch, the test program) is not the model's: the
    // bound is on what opening and using it added. Copies would add twice the file.
    if (!reset) {
        WARN("/proc/self/clear_refs cannot be written here: the peak of this test cannot be told apart");
        return;
    }
    CHECK(peak - baseline < 1.5 * file_mb);
    CHECK(peak - baseline > 0.8 * file_mb);  // the pages were used, and counted
}
