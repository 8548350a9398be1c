#pragma once
// The SM's cycle counter and the number of the SM a thread runs on, for calibration probes
// (bench/gpu/mma_rate measures the tensor cores' rate in cycles). PTX ISA, "Special registers":
// %clock64 is a per-SM 64-bit counter of SM clock cycles, so two readings compare only on one
// SM; %smid names that SM (it may change across a preemption, which a probe must tolerate).
// Each read is a volatile asm: the compiler neither merges two reads nor moves one across the
// other volatile asm around it (the mma primitives are volatile too), so a reading taken after a
// run of mma's comes after their issue.
//
// Host twin: nanoseconds of the host's steady clock (monotonic, but not SM cycles) and SM 0:
// the host executor has no multiprocessors to tell apart.

#include "common/platform.cuh"

#if MOEJIT_TARGET_HOST
#include <chrono>
#endif

namespace moejit::prim {

#if MOEJIT_TARGET_DEVICE

MOEJIT_DEVICE u64 sm_cycles() {
  u64 cycles;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(cycles));
  return cycles;
}

MOEJIT_DEVICE u32 sm_id() {
  u32 sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
}

#else

MOEJIT_DEVICE u64 sm_cycles() {
  return static_cast<u64>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count());
}

MOEJIT_DEVICE u32 sm_id() { return 0; }

#endif

}  // namespace moejit::prim
