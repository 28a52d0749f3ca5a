// attnviz-cli and checkpoint formats: a version-1 file is refused with the
// upgrade command, upgrade-checkpoint converts it (only with --trust), and the
// converted model translates exactly as the old attnviz did with the old file.
#include "catch_torch.hpp"

#include "cli_support.hpp"

using namespace attnviz_cli_test;

namespace {
const std::string k_v1 = std::string(ATTNVIZ_TEST_DATA) + "/checkpoint_v1_tiny.ckpt";
const std::vector<std::string> k_sentences = {"a b c", "d e f g", "h i", "c b a d"};
}  // namespace

TEST_CASE("cli: a version-1 checkpoint is refused with the upgrade command, upgrade-checkpoint converts it",
          "[cli][checkpoint]") {
    TempDir dir;
    REQUIRE(exists(k_v1));
    Result old = cli(dir, cat({"translate", "--model", k_v1}, k_sentences));
    CHECK(old.code == 1);
    require_one_error_line(old, "upgrade-checkpoint");
    CHECK(old.err.find("old format") != std::string::npos);
    CHECK(old.err.find("--trust") != std::string::npos);

    const std::string upgraded = dir / "upgraded.ckpt";
    Result untrusted = cli(dir, {"upgrade-checkpoint", k_v1, upgraded});
    CHECK(untrusted.code == 2);
    require_one_error_line(untrusted, "--trust");
    CHECK_FALSE(exists(upgraded));

    Result up = cli(dir, {"upgrade-checkpoint", k_v1, upgraded, "--trust"});
    INFO("stderr: " << up.err);
    REQUIRE(up.code == 0);
    REQUIRE(exists(upgraded));

    // The old attnviz's translations of the fixture, recorded when it was written.
    Result tr = cli(dir, cat({"translate", "--model", upgraded}, k_sentences));
    INFO("stderr: " << tr.err);
    REQUIRE(tr.code == 0);
    CHECK(tr.out == read_file(std::string(ATTNVIZ_TEST_DATA) + "/checkpoint_v1_tiny.translations.txt"));

    // Training continues from the upgraded file (history and optimiser state came along).
    Result re = cli(dir, {"train", "--resume", upgraded, "--task", "reverse", "--pairs", "200", "--epochs", "2",
                          "--device", "cpu", "--save", dir / "more.ckpt", "--json", "-q"});
    INFO("stderr: " << re.err);
    REQUIRE(re.code == 0);
    CHECK(re.out.find("\"epochs_this_run\":1") != std::string::npos);

    Result again = cli(dir, {"upgrade-checkpoint", upgraded, dir / "again.ckpt", "--trust"});
    CHECK(again.code == 1);
    require_one_error_line(again, "already");

    write_file(dir / "weights.pt", std::string("PK\x03\x04", 4) + std::string(60, '\0'));
    Result foreign = cli(dir, {"translate", "--model", dir / "weights.pt", "a b"});
    CHECK(foreign.code == 1);
    require_one_error_line(foreign, "d2l model as .safetensors");
}
