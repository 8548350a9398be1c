#include "cache/entry_format.hpp"

#include <bit>

#include "cache/byte_io.hpp"

namespace moejit::store {

std::string encode_entry(const Entry& e) {
  std::string out;
  ByteWriter w(out);
  w.bytes(std::string_view(kEntryMagic, sizeof kEntryMagic));
  w.u32(kEntryFormatVersion);
  w.u32(0);  // header size, patched below
  w.u64(e.key.high);
  w.u64(e.key.low);
  w.u32(static_cast<std::uint32_t>(e.meta.kind));
  w.u32(e.meta.registers);
  w.u32(e.meta.spill_store_bytes);
  w.u32(e.meta.spill_load_bytes);
  w.u32(e.meta.stack_bytes);
  w.u32(e.meta.static_shared_bytes);
  w.u32(e.meta.dynamic_shared_bytes);
  w.u32(e.meta.block_threads);
  w.u32(e.meta.barriers);
  w.f64(e.meta.compile_ms);
  w.u64(static_cast<std::uint64_t>(e.meta.created_unix_ms));
  w.str(e.key_material);
  w.str(e.meta.kernel_name);
  w.str(e.meta.compiler);
  w.u64(e.payload.size());
  w.u64(xxh3_64(e.payload.data(), e.payload.size()));
  auto header_size = static_cast<std::uint32_t>(out.size() + 8);
  std::memcpy(out.data() + 12, &header_size, 4);
  w.u64(xxh3_64(out.data(), out.size()));
  w.bytes(e.payload);
  return out;
}

namespace {
constexpr std::string_view kBackendLine = "\nspec.backend=";
}  // namespace

Status check_payload_kind(PayloadKind kind, std::string_view material) {
  // The store keeps bytes, not specs; the one spec field it reads is the backend line of the
  // key material (src/spec/key.cpp writes it), so that a CUBIN is never dlopened and a shared
  // object never reaches the GPU's module loader.
  auto at = material.find(kBackendLine);
  if (at == std::string_view::npos) return {};
  std::string_view backend = material.substr(at + kBackendLine.size());
  backend = backend.substr(0, backend.find('\n'));
  PayloadKind expected;
  if (backend == "host") expected = PayloadKind::host_shared_object;
  else if (backend == "device") expected = PayloadKind::cubin;
  else return error(Code::corrupt, "key material names backend '{}'; expected device or host", backend);
  if (kind != expected)
    return error(Code::corrupt, "payload kind {} does not match backend '{}' (expected kind {})",
                 static_cast<std::uint32_t>(kind), backend, static_cast<std::uint32_t>(expected));
  return {};
}

Result<Entry> decode_entry(std::string_view bytes) {
  ByteReader r(bytes);
  if (r.bytes(sizeof kEntryMagic) != std::string_view(kEntryMagic, sizeof kEntryMagic))
    return error(Code::corrupt, "not a moejit kernel entry (bad magic)");
  if (std::uint32_t version = r.u32(); version != kEntryFormatVersion)
    return error(Code::corrupt, "entry format version {} (expected {})", version,
                 kEntryFormatVersion);
  std::uint32_t header_size = r.u32();
  if (!r.ok() || header_size < r.position() + 8 || header_size > bytes.size())
    return error(Code::corrupt, "truncated entry header");
  std::uint64_t header_hash = 0;
  std::memcpy(&header_hash, bytes.data() + header_size - 8, 8);
  if (header_hash != xxh3_64(bytes.data(), header_size - 8))
    return error(Code::corrupt, "entry header checksum mismatch");

  Entry e;
  e.key.high = r.u64();
  e.key.low = r.u64();
  e.meta.kind = static_cast<PayloadKind>(r.u32());
  e.meta.registers = r.u32();
  e.meta.spill_store_bytes = r.u32();
  e.meta.spill_load_bytes = r.u32();
  e.meta.stack_bytes = r.u32();
  e.meta.static_shared_bytes = r.u32();
  e.meta.dynamic_shared_bytes = r.u32();
  e.meta.block_threads = r.u32();
  e.meta.barriers = r.u32();
  e.meta.compile_ms = r.f64();
  e.meta.created_unix_ms = static_cast<std::int64_t>(r.u64());
  e.key_material = r.str();
  e.meta.kernel_name = r.str();
  e.meta.compiler = r.str();
  std::uint64_t payload_size = r.u64();
  std::uint64_t payload_hash = r.u64();
  if (!r.ok() || r.position() + 8 != header_size)
    return error(Code::corrupt, "malformed entry header");
  if (payload_size != bytes.size() - header_size)
    return error(Code::corrupt, "payload is {} bytes, header says {} (truncated or extended)",
                 bytes.size() - header_size, payload_size);
  std::string_view payload = bytes.substr(header_size);
  if (xxh3_64(payload.data(), payload.size()) != payload_hash)
    return error(Code::corrupt, "payload checksum mismatch");
  if (e.meta.kind != PayloadKind::cubin && e.meta.kind != PayloadKind::host_shared_object)
    return error(Code::corrupt, "unknown payload kind {}", static_cast<std::uint32_t>(e.meta.kind));
  if (xxh3_128(e.key_material) != e.key)
    return error(Code::corrupt, "key material does not hash to the entry's key");
  MOEJIT_TRY(check_payload_kind(e.meta.kind, e.key_material));
  e.payload.assign(payload);
  return e;
}

}  // namespace moejit::store
