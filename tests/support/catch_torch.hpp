#pragma once
// Include this instead of <catch2/catch.hpp> in tests that use LibTorch.
// LibTorch's c10 logging defines glog-style CHECK/CHECK_EQ macros; whichever
// header comes last wins, and a torch CHECK aborts the process instead of
// recording a failure. Including torch first and dropping its macros makes the
// order safe with or without precompiled headers.
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
