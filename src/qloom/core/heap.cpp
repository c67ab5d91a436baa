#include "qloom/core/heap.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace qloom {

void keep_large_blocks_out_of_arenas() {
#ifdef __GLIBC__
  ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#endif
}

void return_freed_heap_memory() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

}  // namespace qloom
