// Files seen through mmap (core/io/mapped_file): the same checks as bounded reads,
// private writable pages that never reach the file, empty files; safetensors read
// through a mapping; the peak-memory helpers; weights files told apart and shard
// indexes whose shard names stay inside their folder (core/io/weights_index).
#include "catch_torch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/io/error.hpp"
#include "core/io/mapped_file.hpp"
#include "core/io/process_memory.hpp"
#include "core/io/safetensors.hpp"
#include "core/io/weights_index.hpp"
#include "test_support.hpp"
#include "torch_zip_builder.hpp"

using namespace attnviz;
using namespace attnviz::testing;
using Catch::Contains;

namespace {

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const FileError& e) {
        return e.what();
    }
    return "(no error)";
}

/// A 32 MB file of bytes i * mul + add, mapped.
MappedFilePtr mapped_pattern(const ScratchDir& dir, int mul, int add) {
    const std::string path = dir / "w.bin";
    std::string bytes(32 << 20, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * mul + add);
    write_all(path, bytes);
    MappedFilePtr m = MappedFile::open(path, uint64_t{1} << 30);
    REQUIRE(m->mapped());
    return m;
}

/// The sum of one byte in every KB of the mapping (every page touched).
uint64_t touch_every_page(const MappedFile& m) {
    uint64_t sum = 0;
    for (size_t i = 0; i < m.size(); i += 1024) sum += static_cast<unsigned char>(m.data()[i]);
    return sum;
}

}  // namespace

TEST_CASE("a mapped file shows the file's bytes, keeps them while shared, and writes never reach the file",
          "[mapped_file]") {
    ScratchDir dir("map");
    const std::string path = dir / "f.bin";
    write_all(path, "hello, mapped world");
    MappedFilePtr m = MappedFile::open(path, 1000);
    CHECK(m->view() == "hello, mapped world");
    CHECK(m->size() == 19);
    CHECK(m->path() == path);
    m->data()[0] = 'J';  // a private copy of the page
    CHECK(m->view() == "Jello, mapped world");
    CHECK(read_all(path) == "hello, mapped world");
    // Shared ownership: a copy of the pointer keeps the mapping after the first is gone,
    // and after the file is removed.
    MappedFilePtr keep = m;
    m.reset();
    ::unlink(path.c_str());
    CHECK(keep->view().substr(7) == "mapped world");

    write_all(dir / "empty", "");
    MappedFilePtr e = MappedFile::open(dir / "empty", 1000);
    CHECK(e->size() == 0);
    CHECK(e->data() != nullptr);
    CHECK(e->view().empty());
}

TEST_CASE("a mapped file's pages are released and read again from the file, other bytes left alone",
          "[mapped_file][memory]") {
    ScratchDir dir("release");
    MappedFilePtr m = mapped_pattern(dir, 7, 3);
    const double before = resident_mb();
    const uint64_t sum = touch_every_page(*m);
    const double touched = resident_mb();
    MappedFile::release_pages(m->data() + 100, m->size() - 200);  // the pages wholly inside
    const double released = resident_mb();
    if (before > 0) {
        CHECK(touched - before > 24);
        CHECK(touched - released > 24);
    }
    CHECK(touch_every_page(*m) == sum);  // read again from the file, the same bytes
    CHECK(static_cast<unsigned char>(m->data()[12345]) == static_cast<unsigned char>(12345 * 7 + 3));
    // Bytes outside every mapping (a heap block) are left alone.
    std::vector<char> heap(1 << 20, 'x');
    MappedFile::release_pages(heap.data(), heap.size());
    CHECK(heap[heap.size() / 2] == 'x');
    MappedFile::release_pages(nullptr, 100);
}

TEST_CASE("a mapped file's pages a few bytes touch are released within their tensor, a shared page kept",
          "[mapped_file][memory]") {
    ScratchDir dir("release_within");
    MappedFilePtr m = mapped_pattern(dir, 5, 1);
    // The "tensor" starts and ends mid-page; the bytes before it are another's, written (a private copy).
    char* owner = m->data() + 100;
    const size_t owner_n = m->size() - 200;
    m->data()[50] = 'w';
    const double before = resident_mb();
    const uint64_t sum = touch_every_page(*m);
    const double touched = resident_mb();
    for (size_t at = 0; at + 16 < owner_n; at += 4096) MappedFile::release_pages_within(owner + at, 16, owner, owner_n);
    // A range wholly inside one page releases nothing by release_pages (rounded inwards).
    const double released = resident_mb();
    if (before > 0) {
        CHECK(touched - before > 24);
        CHECK(touched - released > 24);
    }
    CHECK(m->data()[50] == 'w');  // its page is not wholly the owner's: kept, with the write
    CHECK(touch_every_page(*m) == sum);
    MappedFile::release_pages_within(nullptr, 16, owner, owner_n);
    MappedFile::release_pages_within(owner, 16, nullptr, 0);
}

TEST_CASE("a mapped file is refused as a bounded read is: not regular, too large, missing", "[mapped_file]") {
    ScratchDir dir("map");
    write_all(dir / "big", std::string(100, 'x'));
    CHECK_THAT(error_of([&] { MappedFile::open(dir / "big", 99, "model"); }),
               Contains("model '" + dir / "big" + "' is 100 bytes, more than the 99 this reads; refused"));
    CHECK_THAT(error_of([&] { MappedFile::open(dir.path, 1000); }), Contains("is a directory, not a regular file"));
    CHECK_THAT(error_of([&] { MappedFile::open(dir / "missing", 1000); }), Contains("cannot open file"));
    const std::string fifo = dir / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(refusal_without_blocking<FileError>(fifo, [&] { MappedFile::open(fifo, 1000); }),
               Contains("a FIFO (named pipe), not a regular file"));
    CHECK_THAT(error_of([&] { MappedFile::open("/dev/zero", 1000); }), Contains("a character device"));
}

TEST_CASE("safetensors read_file maps the file: the bytes stay valid in copies of the File", "[mapped_file][safetensors]") {
    ScratchDir dir("map");
    const float values[3] = {1.5f, -2.0f, 3.25f};
    const std::string bytes = safetensors::serialize({{"t", safetensors::DType::F32, {3}, values, sizeof values}});
    write_all(dir / "m.safetensors", bytes);
    safetensors::File copy;
    {
        const safetensors::File f = safetensors::read_file(dir / "m.safetensors");
        CHECK(f.mapped);
        CHECK(f.bytes == bytes);
        copy = f;
    }
    float v[3];
    std::memcpy(v, copy.data(*copy.find("t")), sizeof v);
    CHECK(v[2] == 3.25f);
    const safetensors::File parsed = safetensors::parse(bytes, "in memory");
    CHECK_FALSE(parsed.mapped);
    CHECK(parsed.owner != nullptr);
}

TEST_CASE("the peak resident memory can be read and started over", "[mapped_file][memory]") {
    const double rss = resident_mb();
    const double peak = peak_resident_mb();
    REQUIRE(rss > 0);
    CHECK(peak >= rss - 1);
    if (!reset_peak_resident()) {
        WARN("/proc/self/clear_refs cannot be written here; the peak is not reset");
        return;
    }
    // Touch 64 MB, free it: the peak stays up, the resident memory does not.
    std::vector<char> big(64 << 20, 1);
    const double during = resident_mb();
    big = {};
    big.shrink_to_fit();
    CHECK(peak_resident_mb() >= during - 1);
    CHECK(reset_peak_resident());
    CHECK(peak_resident_mb() < during - 32);
}

TEST_CASE("weights files are told apart by their first bytes, and a folder's file by transformers' names",
          "[weights_index]") {
    ScratchDir dir("weights");
    const float one = 1;
    write_all(dir / "a", safetensors::serialize({{"t", safetensors::DType::F32, {1}, &one, 4}}));
    write_all(dir / "b", make_zip({{"x/data.pkl", "."}}));
    write_all(dir / "c", "  {\"weight_map\": {}}");
    write_all(dir / "d", std::string("\x80\x02}q\x00.", 6));
    write_all(dir / "e", "");
    CHECK(weights_format(dir / "a") == WeightsFormat::safetensors);
    CHECK(weights_format(dir / "b") == WeightsFormat::torch_zip);
    CHECK(weights_format(dir / "c") == WeightsFormat::shard_index);
    CHECK_THAT(error_of([&] { weights_format(dir / "d"); }), Contains("'" + dir / "d" + "'") && Contains("bare Python pickle"));
    CHECK_THAT(error_of([&] { weights_format(dir / "e"); }), Contains("it is empty"));

    CHECK_THAT(error_of([&] { find_weights_file(dir.path); }),
               Contains("has no weights file (looked for model.safetensors, model.safetensors.index.json, "
                        "pytorch_model.bin, pytorch_model.bin.index.json)"));
    write_all(dir / "pytorch_model.bin", "x");
    CHECK(find_weights_file(dir.path) == dir / "pytorch_model.bin");
    write_all(dir / "model.safetensors.index.json", "{}");
    CHECK(find_weights_file(dir.path) == dir / "model.safetensors.index.json");
    write_all(dir / "model.safetensors", "x");
    CHECK(find_weights_file(dir.path + "/") == dir / "model.safetensors");
}

TEST_CASE("a shard index is read, and shard names that leave its folder are refused", "[weights_index][hostile]") {
    ScratchDir dir("weights");
    const std::string path = dir / "model.safetensors.index.json";
    write_all(path, R"({"metadata": {"total_size": 12},
        "weight_map": {"b": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors",
                       "c": "model-00001-of-00002.safetensors"}})");
    const ShardIndex index = read_shard_index(path);
    CHECK(index.folder == dir.path);
    CHECK(index.shards == std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"});
    CHECK(index.weight_map.at("b") == "model-00002-of-00002.safetensors");
    CHECK(index.weight_map.size() == 3);

    auto refusal = [&](const std::string& json) {
        write_all(path, json);
        return error_of([&] { read_shard_index(path); });
    };
    for (const auto& [shard, says] : std::vector<std::pair<std::string, std::string>>{
             {"../model.safetensors", "goes up a folder"},
             {"sub/../../x", "goes up a folder"},
             {"/etc/passwd", "is an absolute path"},
             {"", "is empty"},
             {"a//b", "path component"},
             {"./a", "path component"},
             {"a\\\\..\\\\b", "holds a backslash"}}) {
        const std::string msg = refusal(R"({"weight_map": {"w": ")" + shard + R"("}})");
        INFO(msg);
        CHECK_THAT(msg, Contains(path) && Contains("tensor 'w'"));
        CHECK_THAT(msg, Contains(says));
    }
    CHECK_THAT(refusal(R"({"weight_map": {"w": 3}})"), Contains("tensor 'w' has the shard 3, expected a file name"));
    CHECK_THAT(refusal(R"({"weights": {}})"), Contains("has no \"weight_map\" object"));
    CHECK_THAT(refusal(R"([1, 2])"), Contains("expected a JSON object"));
    CHECK_THAT(refusal(std::string(100, '[') + std::string(100, ']')), Contains("nested more than 32 levels"));
    write_all(path, R"({"weight_map": {"a": "x", "b": "y"}})");
    CHECK_THAT(error_of([&] { read_shard_index(path, 1000, 1); }), Contains("names 2 tensors, more than the 1"));
    CHECK_THAT(error_of([&] { read_shard_index(path, 10, 100); }), Contains("more than the 10 this reads"));
}
