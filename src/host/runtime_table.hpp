#pragma once
// The executor's implementation of common/host_runtime.cuh, handed to every loaded kernel.

#include "common/host_runtime.cuh"

namespace moejit::host {

const Runtime& runtime_table();

}  // namespace moejit::host
