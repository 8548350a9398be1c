#include "host/runtime_table.hpp"

#include "host/block_runner.hpp"

namespace moejit::host {

const Runtime& runtime_table() {
  static constexpr Runtime kTable = {
      .abi_version = kRuntimeAbiVersion,
      .self = &BlockRunner::rt_self,
      .barrier = &BlockRunner::rt_barrier,
      .warp_exchange = &BlockRunner::rt_warp_exchange,
      .yield = &BlockRunner::rt_yield,
      .cp_async = &BlockRunner::rt_cp_async,
      .cp_async_commit = &BlockRunner::rt_cp_async_commit,
      .cp_async_wait = &BlockRunner::rt_cp_async_wait,
      .mma_async = &BlockRunner::rt_mma_async,
      .thread_scratch = &BlockRunner::rt_thread_scratch,
      .mma_async_commit = &BlockRunner::rt_mma_async_commit,
      .mma_async_wait = &BlockRunner::rt_mma_async_wait,
      .trap = &BlockRunner::rt_trap,
  };
  return kTable;
}

}  // namespace moejit::host
