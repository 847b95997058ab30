// fmt's formatting engine (format-inl.h), compiled once for the whole project.
//
// With FMT_HEADER_ONLY every translation unit that formats anything compiles this engine itself
// (dragonbox, vformat_to, the locale helpers): about 3-4 s of -O3 per file, in 124 files. Here
// format-inl.h is included without FMT_HEADER_ONLY, so its FMT_FUNC functions get one non-inline
// definition each; the templates that fmt/format.h and fmt/core.h declare but leave to the
// library's own build are instantiated below for char, the only character type hetplan formats.
// The result is a static library, so binaries carried to a GPU machine still need no libfmt.
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view,
                                 basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);

}  // namespace detail
FMT_END_NAMESPACE
