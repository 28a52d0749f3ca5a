// Catch2's main() for the hub tests: they need a Python to run the local hub server
// (tests/hub/hub_server.py, its standard library only); without one every test is skipped
// (exit 77, CTest's SKIP_RETURN_CODE). No LibTorch here: the hub code has none.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>

int main(int argc, char* argv[]) {
    if (::access(ATTNVIZ_HUB_PYTHON, X_OK) != 0) {
        std::fprintf(stderr, "attnviz_tests_hub: no Python at %s to run the local hub server: skipped\n", ATTNVIZ_HUB_PYTHON);
        return 77;
    }
    return Catch::Session().run(argc, argv);
}
