// The safetensors container and depth-bounded JSON: round trips, and every
// kind of malformed file refused with a message before anything is allocated.
#include "catch_torch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/file_read.hpp"
#include "core/io/json_bounded.hpp"
#include "core/io/safetensors.hpp"
#include "core/persist/safetensors_torch.hpp"
#include "core/text/text.hpp"
#include "core/text/vocab.hpp"
#include "test_support.hpp"

using namespace attnviz;
namespace st = attnviz::safetensors;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string le64(uint64_t v) {
    std::string s;
    for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return s;
}

/// A file with the given header JSON text and data bytes.
std::string file_with(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

/// A header of one tensor.
std::string one(const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return R"({"t": {"dtype": ")" + dtype + R"(", "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}}";
}

std::string refusal(const std::string& bytes) {
    try {
        st::parse(bytes, "crafted.safetensors");
    } catch (const FileError& e) {
        return e.what();
    }
    return "(accepted)";
}

fs::path temp_dir() {
    auto d = fs::temp_directory_path() / ("attnviz-st-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
    fs::create_directories(d);
    return d;
}

}  // namespace

TEST_CASE("safetensors: serialize and parse round trip", "[safetensors]") {
    const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
    const std::vector<int64_t> b = {42, -1, std::numeric_limits<int64_t>::max()};
    const std::vector<st::TensorToWrite> tensors = {
        {"layer.weight", st::DType::F32, {2, 3}, a.data(), a.size() * 4},
        {"counts", st::DType::I64, {3}, b.data(), b.size() * 8},
        {"empty", st::DType::F32, {0, 4}, nullptr, 0},
        {"scalar", st::DType::F32, {}, a.data(), 4}};
    const std::string bytes = st::serialize(tensors, {{"format", "test"}, {"note", "ünïcode ✓"}});
    const uint64_t header = [&] {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
        return v;
    }();
    CHECK((8 + header) % 8 == 0);  // data aligned

    const st::File f = st::parse(bytes, "round.safetensors");
    CHECK(f.metadata.at("format") == "test");
    CHECK(f.metadata.at("note") == "ünïcode ✓");
    REQUIRE(f.tensors.size() == 4);
    const st::TensorInfo* w = f.find("layer.weight");
    REQUIRE(w);
    CHECK(w->dtype == st::DType::F32);
    CHECK(w->shape == std::vector<int64_t>{2, 3});
    CHECK(w->numel() == 6);
    CHECK(std::memcmp(f.data(*w), a.data(), 24) == 0);
    const st::TensorInfo* c = f.find("counts");
    REQUIRE(c);
    CHECK(std::memcmp(f.data(*c), b.data(), 24) == 0);
    CHECK(f.find("empty")->numel() == 0);
    CHECK(f.find("scalar")->numel() == 1);
    CHECK(f.find("missing") == nullptr);

    // Through LibTorch: the same values, and a wrong dtype is refused naming the tensor.
    auto t = st::to_tensor(f, *w, st::DType::F32);
    CHECK(t.sizes().vec() == std::vector<int64_t>{2, 3});
    CHECK(t.flatten()[2].item<float>() == 3.25f);
    CHECK_THROWS_WITH(st::to_tensor(f, *c, st::DType::F32), Catch::Contains("'counts'") && Catch::Contains("I64"));
    st::TensorWriter writer;
    writer.add("x", torch::arange(6, torch::kDouble).view({3, 2}).t());  // not contiguous
    const st::File g = st::parse(writer.serialize({}), "w");
    CHECK(g.find("x")->dtype == st::DType::F64);
    CHECK(st::to_tensor(g, *g.find("x"), st::DType::F64).equal(torch::arange(6, torch::kDouble).view({3, 2}).t()));

    // Bad tensors to write are the caller's error.
    CHECK_THROWS_AS(st::serialize({{"x", st::DType::F32, {2}, a.data(), 4}}), ConfigError);
    CHECK_THROWS_AS(st::serialize({{"x", st::DType::F32, {1}, a.data(), 4}, {"x", st::DType::F32, {1}, a.data(), 4}}),
                    ConfigError);
}

TEST_CASE("safetensors: every malformed header kind is refused with a message", "[safetensors]") {
    const std::string data8(8, '\0');
    // Well-formed baseline.
    CHECK(refusal(file_with(one("F32", "[2]", "[0, 8]"), data8)) == "(accepted)");

    CHECK_THAT(refusal(""), Catch::Contains("truncated"));
    CHECK_THAT(refusal("abc"), Catch::Contains("truncated"));
    CHECK_THAT(refusal(le64(1000) + "{}"), Catch::Contains("truncated") && Catch::Contains("1000"));
    CHECK_THAT(refusal(le64(uint64_t(1) << 62) + "{}"), Catch::Contains("more than"));
    CHECK_THAT(refusal(file_with("{\"t\": [1, 2", "")), Catch::Contains("not valid JSON"));
    CHECK_THAT(refusal(file_with("[1, 2]", "")), Catch::Contains("expected a JSON object"));
    CHECK_THAT(refusal(file_with(std::string(100000, '[') + std::string(100000, ']'), "")),
               Catch::Contains("nested more than"));
    CHECK_THAT(refusal(file_with(one("X99", "[2]", "[0, 8]"), data8)),
               Catch::Contains("unknown dtype 'X99'") && Catch::Contains("'t'"));
    CHECK_THAT(refusal(file_with(one("F32", "[-2]", "[0, 8]"), data8)), Catch::Contains("dimension 0"));
    CHECK_THAT(refusal(file_with(one("F32", "[2.5]", "[0, 8]"), data8)), Catch::Contains("dimension 0"));
    CHECK_THAT(refusal(file_with(one("F32", "[3]", "[0, 8]"), data8)),
               Catch::Contains("needs 12 bytes") && Catch::Contains("span 8"));
    CHECK_THAT(refusal(file_with(one("F32", "[1,1,1,1,1,1,1,1,2]", "[0, 8]"), data8)),
               Catch::Contains("9 dimensions"));
    CHECK_THAT(refusal(file_with(one("F32", "[4294967296, 4294967296, 4294967296]", "[0, 8]"), data8)),
               Catch::Contains("too many elements"));
    CHECK_THAT(refusal(file_with(one("F32", "[2]", "[0, 16]"), data8)),
               Catch::Contains("truncated") && Catch::Contains("ends at byte 16"));
    CHECK_THAT(refusal(file_with(one("F32", "[2]", "[8, 0]"), data8)), Catch::Contains("data_offsets"));
    CHECK_THAT(refusal(file_with(one("F32", "[2]", "[0]"), data8)), Catch::Contains("data_offsets"));
    CHECK_THAT(refusal(file_with(one("F32", "[1]", "[4, 8]"), data8)), Catch::Contains("gap"));
    CHECK_THAT(refusal(file_with(one("F32", "[1]", "[0, 4]"), data8)), Catch::Contains("after its last tensor"));
    const std::string overlap = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
    CHECK_THAT(refusal(file_with(overlap, data8)), Catch::Contains("overlaps"));
    CHECK_THAT(refusal(file_with(R"({"__metadata__": {"k": 1}})", "")), Catch::Contains("expected a string"));
    CHECK_THAT(refusal(file_with(R"({"__metadata__": [1]})", "")), Catch::Contains("__metadata__"));
    CHECK_THAT(refusal(file_with(R"({"t": 5})", "")), Catch::Contains("'t'"));

    // Too many tensors: refused from the count, before each entry is read.
    st::Limits small;
    small.max_tensors = 2;
    std::string many = "{";
    for (int i = 0; i < 3; ++i)
        many += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
                R"(": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]})";
    many += "}";
    CHECK_THROWS_WITH(st::parse(file_with(many, ""), "many", small), Catch::Contains("3 tensors"));
    CHECK_NOTHROW(st::parse(file_with(many, ""), "many"));

    // A long name from the file is clipped in messages.
    const std::string long_name(5000, 'n');
    const std::string msg = refusal(file_with(R"({")" + long_name + R"(": 5})", ""));
    CHECK(msg.size() < 600);
}

TEST_CASE("safetensors: looks_like tells the format apart from others", "[safetensors]") {
    CHECK(st::looks_like_safetensors(file_with(one("F32", "[2]", "[0, 8]"), std::string(8, '\0'))));
    CHECK_FALSE(st::looks_like_safetensors("PK\x03\x04 a zip archive"));
    const char pickle[] = "\x80\x02}q\x00(X\x05";
    CHECK_FALSE(st::looks_like_safetensors(std::string(pickle, sizeof(pickle) - 1)));
    CHECK_FALSE(st::looks_like_safetensors(""));
    CHECK_FALSE(st::looks_like_safetensors(std::string("ATTNVIZ\x01\x01\x00\x00\x00", 12)));
}

TEST_CASE("bounded JSON: deep nesting is refused, messages never dump values", "[safetensors][json]") {
    CHECK_THROWS_WITH(parse_json_bounded(std::string(100000, '[') + std::string(100000, ']'), "deep.json"),
                      Catch::Contains("deep.json") && Catch::Contains("nested more than 32"));
    CHECK_THROWS_WITH(parse_json_bounded(std::string(33, '{'), "x", 32), Catch::Contains("nested more than"));
    // Brackets inside strings (escaped quotes too) do not count.
    const std::string in_strings = R"(["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["])";
    CHECK(parse_json_bounded(in_strings, "s").size() == 2);
    CHECK(parse_json_bounded(std::string(32, '[') + std::string(32, ']'), "ok").is_array());
    CHECK_THROWS_WITH(parse_json_bounded("{\"a\": tru", "bad.json"), Catch::Contains("bad.json: not valid JSON"));

    CHECK(describe_json(json::array({1, 2, 3})) == "an array of 3 values");
    CHECK(describe_json(json::object()) == "an object with 0 keys");
    CHECK(describe_json(json(std::string(1000, 'x'))).size() < 200);
    CHECK(describe_json(json(5)) == "5");

    // Defect 2: a vocabulary whose "format" nests deeply gave a recursive dump() in the message.
    json nested = json::array();
    for (int i = 0; i < 20; ++i) nested = json::array({nested});
    const json vocab = {{"format", nested}, {"tokens", {"<pad>", "<bos>", "<eos>", "<unk>"}}};
    CHECK_THROWS_WITH(Vocab::from_json(vocab), Catch::Contains("an array of 1 values") && !Catch::Contains("[[["));
    const json bad_token = {{"tokens", {"<pad>", "<bos>", "<eos>", "<unk>", nested}}};
    CHECK_THROWS_WITH(Vocab::from_json(bad_token), Catch::Contains("token 4") && !Catch::Contains("[[["));
}

TEST_CASE("files: a FIFO without writer, /dev/zero and directories are refused at once", "[safetensors][files]") {
    const auto dir = temp_dir();
    const std::string fifo = (dir / "pipe").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // Without O_NONBLOCK, opening a FIFO with no writer blocks forever.
    CHECK_THROWS_WITH(st::read_file(fifo), Catch::Contains("FIFO"));
    CHECK_THROWS_WITH(read_regular_file(fifo, 1000, "checkpoint"), Catch::Contains("not a regular file"));
    CHECK_THROWS_WITH(st::read_file("/dev/zero"), Catch::Contains("character device"));
    CHECK_THROWS_WITH(st::read_file(dir.string()), Catch::Contains("directory"));
    CHECK_THROWS_WITH(st::read_file((dir / "missing").string()), Catch::Contains("cannot open"));

    // The size is checked before reading.
    const auto big = dir / "big.safetensors";
    {
        std::ofstream out(big, std::ios::binary);
        out << file_with(one("F32", "[2]", "[0, 8]"), std::string(8, '\0'));
    }
    st::Limits tiny;
    tiny.max_file_bytes = 16;
    CHECK_THROWS_WITH(st::read_file(big.string(), tiny), Catch::Contains("more than the 16"));
    CHECK(st::read_file(big.string()).tensors.size() == 1);
    CHECK(st::read_metadata(big.string()).empty());

    // Vocabulary files go through the same reader and the bounded parser.
    const auto deep = dir / "deep.json";
    {
        std::ofstream out(deep, std::ios::binary);
        out << "{\"format\": " << std::string(80000, '[') << std::string(80000, ']') << "}";
    }
    CHECK_THROWS_WITH(Vocab::load(deep.string()), Catch::Contains("nested more than"));
    CHECK_THROWS_WITH(Vocab::load(fifo), Catch::Contains("not a regular file"));
    testing::remove_tree(dir);
}

TEST_CASE("a header larger than attnviz reads but within the format is refused for what it is", "[safetensors][hostile]") {
    const attnviz::testing::ScratchDir dir("big-header");
    const std::string path = (dir / "model.safetensors");
    // 99,999,999 header bytes (the safetensors library accepts up to 100,000,000): a sparse file,
    // nothing of it is read before the refusal.
    const uint64_t header = 99999999;
    {
        std::ofstream out(path, std::ios::binary);
        char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((header >> (8 * i)) & 0xff);
        out.write(len, 8);
        out << "{\"__metadata__\": {\"format\": \"pt\"}";
    }
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(8 + header + 16)) == 0);
    std::string head(64, '\0');
    {
        std::ifstream in(path, std::ios::binary);
        in.read(head.data(), 64);
    }
    CHECK(st::looks_like_safetensors(head));
    CHECK_THROWS_WITH(st::read_file(path), Catch::Contains("has a header of 99999999 bytes") &&
                                               Catch::Contains("more than the 67108864 attnviz reads") &&
                                               !Catch::Contains("match none"));
    // Past the format's own bound it is not taken for safetensors.
    const uint64_t too_big = 100000001;
    for (int i = 0; i < 8; ++i) head[static_cast<size_t>(i)] = static_cast<char>((too_big >> (8 * i)) & 0xff);
    CHECK_FALSE(st::looks_like_safetensors(head));
}
