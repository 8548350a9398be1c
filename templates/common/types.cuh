#pragma once
// Fixed-width integer names shared by every template. Templates include no system or toolkit
// headers (DESIGN §5), so these come from the builtin types NVRTC and the host compiler agree on.

namespace moejit {

using i8 = signed char;
using u8 = unsigned char;
using i16 = short;
using u16 = unsigned short;
using i32 = int;
using u32 = unsigned int;
using i64 = long long;
using u64 = unsigned long long;

template <class T>
constexpr T min_of(T a, T b) { return b < a ? b : a; }
template <class T>
constexpr T max_of(T a, T b) { return a < b ? b : a; }

static_assert(sizeof(i32) == 4 && sizeof(i64) == 8 && sizeof(u16) == 2, "unexpected integer sizes");

}  // namespace moejit
