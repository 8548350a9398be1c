// An engine's view of moejit: <moejit/moejit.hpp> and nothing else. Creates a host-backend
// context, packs a small INT4 weight set from plain codes and checks what came back; a bad
// description must throw moejit::Error. Usage: consumer_cpp CACHE_DIR. Prints "ok" and exits 0.
#include <moejit/moejit.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer_cpp: FAILED: %s\n", what);
    ++failures;
  }
}

// How many times each nibble value occurs in `bytes` (both halves of every byte).
std::array<std::uint64_t, 16> nibble_counts(const std::uint8_t* bytes, std::size_t n) {
  std::array<std::uint64_t, 16> counts{};
  for (std::size_t i = 0; i < n; ++i) {
    ++counts[bytes[i] & 0xF];
    ++counts[bytes[i] >> 4];
  }
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer_cpp CACHE_DIR\n");
    return 2;
  }
  const std::string version = std::to_string(MOEJIT_VERSION_MAJOR) + "." + std::to_string(MOEJIT_VERSION_MINOR) +
                              "." + std::to_string(MOEJIT_VERSION_PATCH);
  expect(version == moejit_version(), "moejit_version() matches the header's MOEJIT_VERSION_*");

  try {
    moejit_context_options_t options = moejit::context_options();
    options.backend = MOEJIT_BACKEND_HOST;
    options.cache_dir = argv[1];
    moejit::Context ctx(options);
    expect(ctx.backend() == MOEJIT_BACKEND_HOST, "the context runs on the host backend");

    // Two experts of 64 x 64 symmetric INT4 weights, groups of 32: plain codes [E][N][K] and bf16
    // scales [E][N][K/32].
    const std::uint32_t experts = 2, n = 64, k = 64;
    std::vector<std::uint8_t> codes(std::size_t{experts} * n * k);
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>((i * 7 + i / 64) % 16);
    std::vector<std::uint16_t> scales(std::size_t{experts} * n * (k / 32));
    for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<std::uint16_t>(0x3C00 + i);  // bf16 ~2^-7

    moejit_weights_desc_t desc;
    moejit_weights_desc_init(&desc);
    desc.format = MOEJIT_WEIGHT_INT4_SYM;
    desc.group_size = 32;
    desc.scale_dtype = MOEJIT_DTYPE_BF16;
    desc.experts = experts;
    desc.n = n;
    desc.k = k;
    desc.source = MOEJIT_SOURCE_PLAIN_CODES;
    desc.qweight = codes.data();
    desc.scales = scales.data();

    const moejit_packed_sizes_t sizes = ctx.packed_size(desc);
    expect(sizes.qweight_bytes == codes.size() / 2, "INT4 packs two codes per byte");
    expect(sizes.scales_bytes == scales.size() * sizeof(scales[0]), "one bf16 per group");
    expect(sizes.zeros_bytes == 0 && sizes.bias_bytes == 0, "no zero points, no bias");

    std::vector<std::uint8_t> qweight(sizes.qweight_bytes + 16), packed_scales(sizes.scales_bytes + 16);
    auto aligned = [](std::vector<std::uint8_t>& v) {  // 16-byte aligned, as the ABI asks
      auto p = reinterpret_cast<std::uintptr_t>(v.data());
      return v.data() + ((16 - p % 16) % 16);
    };
    moejit_packed_weights_t packed;
    moejit_packed_weights_init(&packed);
    packed.qweight = aligned(qweight);
    packed.qweight_bytes = sizes.qweight_bytes;
    packed.scales = aligned(packed_scales);
    packed.scales_bytes = sizes.scales_bytes;
    ctx.pack(desc, packed);
    expect(packed.format == MOEJIT_WEIGHT_INT4_SYM && packed.experts == experts && packed.n == n && packed.k == k,
           "the packed weights describe what was packed");

    // Packing reorders the codes and the scales; it keeps every one of them.
    const auto in = nibble_counts(codes.data(), codes.size());
    std::array<std::uint64_t, 16> in_codes{};
    for (std::size_t v = 0; v < 16; ++v) in_codes[v] = in[v] - (v == 0 ? codes.size() : 0);  // high nibbles are 0
    const auto out = nibble_counts(static_cast<const std::uint8_t*>(packed.qweight), sizes.qweight_bytes);
    expect(out == in_codes, "the packed weights hold exactly the codes given");
    if (sizes.scales_bytes == scales.size() * sizeof(scales[0])) {
      std::vector<std::uint16_t> got(scales.size()), want = scales;
      std::memcpy(got.data(), packed.scales, sizes.scales_bytes);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      expect(got == want, "the packed scales are the scales given");
    }

    // A shape moejit cannot pack (n not a multiple of 32): an error with a message.
    moejit_weights_desc_t bad = desc;
    bad.n = 33;
    bool threw = false;
    try {
      ctx.packed_size(bad);
    } catch (const moejit::Error& e) {
      threw = e.status() == MOEJIT_ERROR_INVALID_ARGUMENT && std::strlen(e.what()) > 0;
    }
    expect(threw, "n = 33 is refused as an invalid argument");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_cpp: %s\n", e.what());
    return 1;
  }
  if (failures != 0) return 1;
  std::printf("ok: moejit %s from C++, host backend, INT4 weights packed\n", moejit_version());
  return 0;
}
