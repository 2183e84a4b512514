// encore's own CPU kernels on the one thread pool (core/threads.h): most of them are memory
// bound and run on the calling thread; a loop with enough independent work between two
// library calls (a recurrent step's cells, between its GEMMs) splits over the pool instead of
// leaving its other threads idle.
#pragma once

#include "core/cxx20.h"

#include <cstdint>
#include <type_traits>

namespace encore {

namespace detail {
void parallel_for(int64_t n, int64_t min_parallel, void (*body)(const void*, int64_t, int64_t),
                  const void* ctx);
}

/// Calls f(begin, end) over [0, n) in contiguous chunks, one per pool thread, when
/// n >= min_parallel and the pool has more than one thread; once over [0, n) on the calling
/// thread otherwise. Chunks are disjoint, so results do not depend on the thread count when f
/// writes only to its own indices. f must not throw (nothing can carry an exception out of a
/// pool thread).
template <class F> void parallel_for(int64_t n, int64_t min_parallel, const F& f) {
  static_assert(std::is_nothrow_invocable_v<const F&, int64_t, int64_t>,
                "parallel_for: the body must be noexcept");
  detail::parallel_for(
      n, min_parallel,
      [](const void* c, int64_t b, int64_t e) { (*static_cast<const F*>(c))(b, e); }, &f);
}

}  // namespace encore
