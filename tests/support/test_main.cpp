// Catch2's main(), compiled once for all test executables. Each test process
// uses one intra-op thread: ctest runs tests side by side, and OpenMP threads
// that outnumber the cores spin against each other and slow everything down
// many times over. ATTNVIZ_TEST_THREADS overrides the count.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

#include <ATen/Parallel.h>

#include "core/model/cuda_runtime.hpp"

int main(int argc, char* argv[]) {
    attnviz::load_cuda_runtime();  // as the programs' main() do
    const char* env = std::getenv("ATTNVIZ_TEST_THREADS");
    const int threads = env ? std::max(1, std::atoi(env)) : 1;
    at::set_num_threads(threads);
    at::set_num_interop_threads(1);
    return Catch::Session().run(argc, argv);
}
