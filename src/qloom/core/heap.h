// The process heap of a long-running server (qloom serve): its resident
// memory returns to idle after a request. glibc keeps what a thread freed in
// that thread's own malloc arena (up to 8 per core) and raises its mmap
// threshold to the largest block freed, so one large request (a rejected
// template's values, a long generation's KV cache) would stay resident in
// every arena it touched. Without glibc both are no-ops.
#pragma once

namespace qloom {

// Blocks of 256 KiB and more are always mmapped, so they go back to the
// system when freed (a fixed threshold also stops glibc from raising it).
void keep_large_blocks_out_of_arenas();

// Hands the free pages of every malloc arena back to the system.
void return_freed_heap_memory();

}  // namespace qloom
