#pragma once
// Runs of bytes gathered from rows of one buffer into another on LibTorch's threads: the decoder's
// self-attention cache reordered by beam search (GrowingSteps::select, attention_blocks.hpp).
#include <cstddef>
#include <cstdint>

namespace attnviz {

/// For every destination row i < rows and run h < runs_per_row: copies run_bytes from
/// src + (from[i] * runs_per_row + h) * stride_bytes to dst + (i * runs_per_row + h) * stride_bytes.
/// The runs split across LibTorch's intra-op threads in chunks of at least 256 KB (fewer bytes: on
/// this thread). An opus-mt-sized decoder at batch 32 and beam 4 moves ~38 MB a step this way; on
/// one thread it was 4-5% of the step, the other thread waiting meanwhile. dst and src must not
/// overlap; from[i] must be a valid row of src (the caller checks).
void gather_runs(char* dst, const char* src, const int64_t* from, int64_t rows, int64_t runs_per_row,
                 size_t stride_bytes, size_t run_bytes);

/// gather_runs within one buffer: for every row i < rows with from[i] != i, the runs of row from[i]
/// as they were before the call become row i's (row i = old row from[i]); rows with from[i] == i
/// are not touched. Only the rows that change are copied, and no second buffer is made: the source
/// rows a change overwrites are set aside first (a small buffer of those rows' runs). Beam search
/// keeps most of a beam's rows where they are or copies one row into others: a fresh cache of every
/// row each step (a 1,024-wide decoder at batch 32 and beam 4: ~190 MB of new pages a step at 24
/// steps) cost more in page faults than the copy. from[i] must be a valid row (the caller checks).
void reorder_runs_in_place(char* base, const int64_t* from, int64_t rows, int64_t runs_per_row, size_t stride_bytes,
                           size_t run_bytes);

}  // namespace attnviz
