#pragma once
// How an output is judged against the fp64 reference: one relative error per output, in which a
// NaN or an infinity where the reference has none (or the reverse) is a failure, not a number
// that happens to compare false.

#include <span>

#include "common/types.cuh"

namespace moejit::quant {

// ||out - ref||_F / ||ref||_F over the rows `row_mask` marks (all rows when it is empty), `cols`
// elements per row (0: the whole spans are one row). Returns +inf when the sizes disagree, or
// when at some position out and ref are not both finite and not the same non-finite value (NaN
// and NaN, or the same infinity, agree and add nothing). When ||ref||_F is 0 it returns the
// absolute ||out - ref||_F, so an all-zero reference still demands an all-zero output.
double relative_frobenius_error(std::span<const double> out, std::span<const double> ref, u64 cols = 0,
                                std::span<const u8> row_mask = {});

}  // namespace moejit::quant
