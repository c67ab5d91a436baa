// <immintrin.h> for the x86 kernels. GCC 12's AVX-512 intrinsics read an
// intentionally undefined register (_mm512_undefined_*) and trip
// -Wmaybe-uninitialized (GCC bug 105593, fixed in 12.3 / 13). The warning is
// attributed to header lines, so silencing it around the include is enough
// and does not hide warnings in our own code. Include only under
// `#if defined(__x86_64__)`.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
