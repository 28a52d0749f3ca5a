#pragma once
// Include this instead of <catch2/catch.hpp> in tests that use LibTorch.
// LibTorch's c10 logging defines glog-style CHECK/CHECK_EQ macros; whichever
// header comes last wins, and a torch CHECK aborts the process instead of
// recording a failure. Including torch first and dropping its macros makes the
// order safe with or without precompiled headers.
// In a unity batch (tools/build_speed.cmake) the test files of one executable
// follow each other in one translation unit: a file there that included
// <catch2/catch.hpp> itself would let the next file's #undef remove Catch's CHECK
// for good (catch.hpp's include guard keeps it from coming back), so every test
// file of tests/base, core and cli includes this header instead. (tests/ui's
// files all include catch.hpp after their ui headers, which include LibTorch.)
#include <torch/torch.h>

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LE
#undef CHECK_LT
#undef CHECK_GE
#undef CHECK_GT
#undef CHECK_NOTNULL

#include <catch2/catch.hpp>
