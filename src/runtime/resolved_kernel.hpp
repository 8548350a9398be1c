#pragma once
// A compiled kernel ready to load, and the dimensions of one launch of it. Both backends (the
// device launcher in src/runtime/, the host executor in src/host/) take these; they sit in a
// header of their own so neither backend includes the resolver's machinery.

#include <cstdint>
#include <string>

#include "cache/entry_format.hpp"
#include "kernels/launch_grid.hpp"
#include "spec/kernel_spec.hpp"
#include "support/hash.hpp"

namespace moejit {

struct ResolvedKernel {
  KernelSpec spec;
  Hash128 key;
  store::EntryMeta meta;  // symbol, resources, block threads, dynamic shared memory
  std::string binary;     // CUBIN or shared object
};

struct LaunchDims {
  std::uint32_t grid[3] = {1, 1, 1};
  std::uint32_t block[3] = {1, 1, 1};
  std::uint32_t dynamic_shared_bytes = 0;
  // Programmatic dependent launch: the kernel may start before the previous kernel in the stream
  // has finished (templates/common/grid_dependency.cuh). Set it only for kernels that call
  // prim::grid_dependency_wait() before reading anything an earlier kernel wrote and before
  // writing anything an earlier kernel may still read, on every path (otherwise the kernel reads
  // stale data or breaks the ordering of the kernels after it). Honoured on devices of compute
  // capability 9.0 and newer (the launch attribute PROGRAMMATIC_STREAM_SERIALIZATION); ignored
  // on older devices and by the host backend, where launches are serialized as usual, which is
  // always correct for such a kernel.
  bool programmatic_dependent_launch = false;
};

// The launch of `kernel` over `grid`: the block size and dynamic shared memory are the ones its
// kernel definition gave when it was compiled (stored with it), never recomputed by the caller.
inline LaunchDims launch_dims(const ResolvedKernel& kernel, const LaunchGrid& grid) {
  LaunchDims d;
  d.grid[0] = grid.x;
  d.grid[1] = grid.y;
  d.grid[2] = grid.z;
  d.block[0] = kernel.meta.block_threads;
  d.dynamic_shared_bytes = kernel.meta.dynamic_shared_bytes;
  return d;
}

}  // namespace moejit
