// fmt's out-of-line functions, compiled once for the whole build.
//
// fmt is used from Debian's headers (libfmt-dev ships no static library, and the binaries must
// not need its shared one on a GPU machine). In fmt's header-only mode every translation unit
// compiles and optimizes all of format-inl.h again, which made each of the library's files take
// three to four times longer to build; here the headers are used in fmt's compiled mode and its
// definitions live in this one object, folded into libmoejit and into the moejit_fmt archive for
// the programs that use fmt without the library.
#include <fmt/format-inl.h>

// The templates the compiled mode declares but leaves to the library, for char (moejit formats
// no wide strings).
FMT_BEGIN_NAMESPACE
namespace detail {
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
