#include "spec/spec_fields.hpp"

#include <array>
#include <limits>

#include "spec/arch.hpp"

namespace moejit {
namespace {

using namespace std::string_view_literals;

constexpr std::array kOpNames = {"none"sv, "moe_align"sv, "grouped_gemm"sv, "moe_reduce"sv, "act_quantize"sv};
constexpr std::array kWeightNames = {"none"sv, "mxfp4"sv, "int4_sym"sv, "int4_asym"sv};
constexpr std::array kDTypeNames = {"none"sv, "bf16"sv, "f16"sv, "f32"sv, "e4m3"sv, "e8m0"sv, "e2m1"sv};
constexpr std::array kLayoutNames = {"none"sv, "indexed"sv, "contiguous"sv, "masked"sv};
constexpr std::array kEpilogueNames = {"none"sv, "silu_and_mul"sv, "swiglu_oai"sv,
                                       "topk_weight"sv};
constexpr std::array kBackendNames = {"none"sv, "device"sv, "host"sv};
constexpr std::array kActScaleNames = {"none"sv, "token"sv, "block128"sv, "block32"sv};

static_assert(kOpNames.size() == static_cast<std::size_t>(Op::act_quantize) + 1);
static_assert(kWeightNames.size() == static_cast<std::size_t>(WeightFormat::int4_asym) + 1);
static_assert(kDTypeNames.size() == static_cast<std::size_t>(DType::e2m1) + 1);
static_assert(kLayoutNames.size() == static_cast<std::size_t>(Layout::masked) + 1);
static_assert(kEpilogueNames.size() == static_cast<std::size_t>(Epilogue::topk_weight) + 1);
static_assert(kBackendNames.size() == static_cast<std::size_t>(Backend::host) + 1);
static_assert(kActScaleNames.size() == static_cast<std::size_t>(ActScale::block32) + 1);

constexpr std::span<const std::string_view> kNumber{};

template <typename T>
constexpr std::uint32_t max_of() {
  if constexpr (std::is_enum_v<T>) return 0xFF;
  else return static_cast<std::uint32_t>(std::numeric_limits<T>::max());
}

#define MOEJIT_SPEC_FIELD(member, names)                                                        \
  SpecField {                                                                                   \
    #member, names, max_of<decltype(KernelSpec::member)>(),                                     \
        [](const KernelSpec& s) { return static_cast<std::uint32_t>(s.member); },               \
        [](KernelSpec& s, std::uint32_t v) { s.member = static_cast<decltype(s.member)>(v); } \
  }

const std::array kFields = {
    MOEJIT_SPEC_FIELD(op, kOpNames),
    MOEJIT_SPEC_FIELD(weight, kWeightNames),
    MOEJIT_SPEC_FIELD(scale, kDTypeNames),
    MOEJIT_SPEC_FIELD(act, kDTypeNames),
    MOEJIT_SPEC_FIELD(out, kDTypeNames),
    MOEJIT_SPEC_FIELD(layout, kLayoutNames),
    MOEJIT_SPEC_FIELD(epilogue, kEpilogueNames),
    MOEJIT_SPEC_FIELD(arch, arch_value_names()),
    MOEJIT_SPEC_FIELD(backend, kBackendNames),
    MOEJIT_SPEC_FIELD(stages, kNumber),
    MOEJIT_SPEC_FIELD(act_scale, kActScaleNames),
    MOEJIT_SPEC_FIELD(warps, kNumber),
    MOEJIT_SPEC_FIELD(bm, kNumber),
    MOEJIT_SPEC_FIELD(bn, kNumber),
    MOEJIT_SPEC_FIELD(bk, kNumber),
    MOEJIT_SPEC_FIELD(split_k, kNumber),
    MOEJIT_SPEC_FIELD(group_size, kNumber),
    MOEJIT_SPEC_FIELD(n, kNumber),
    MOEJIT_SPEC_FIELD(k, kNumber),
    MOEJIT_SPEC_FIELD(experts, kNumber),
    MOEJIT_SPEC_FIELD(m, kNumber),
};
#undef MOEJIT_SPEC_FIELD

template <typename E, std::size_t N>
std::string_view name_of(const std::array<std::string_view, N>& names, E v) {
  auto i = static_cast<std::size_t>(v);
  return i < N ? names[i] : "invalid"sv;
}

}  // namespace

std::span<const SpecField> spec_fields() { return kFields; }

const SpecField* find_spec_field(std::string_view name) {
  for (const auto& f : kFields)
    if (f.name == name) return &f;
  return nullptr;
}

std::string field_value_text(const SpecField& field, std::uint32_t value) {
  if (field.is_enum())
    return value < field.value_names.size() ? std::string(field.value_names[value])
                                            : "invalid(" + std::to_string(value) + ")";
  return std::to_string(value);
}

std::string_view to_string(Op v) { return name_of(kOpNames, v); }
std::string_view to_string(WeightFormat v) { return name_of(kWeightNames, v); }
std::string_view to_string(DType v) { return name_of(kDTypeNames, v); }
std::string_view to_string(Layout v) { return name_of(kLayoutNames, v); }
std::string_view to_string(Epilogue v) { return name_of(kEpilogueNames, v); }
std::string_view to_string(Backend v) { return name_of(kBackendNames, v); }
std::string_view to_string(ActScale v) { return name_of(kActScaleNames, v); }
std::string_view to_string(Arch v) {
  auto names = arch_value_names();
  auto i = static_cast<std::size_t>(v);
  return i < names.size() ? names[i] : "invalid"sv;
}

}  // namespace moejit
