// Writes the entry_decoder seed: a store entry as the library encodes it, for a real moe_align
// spec's key, so the fuzzer starts from an input that decodes. Usage: make_entry_seed FILE.
// Rerun (and commit the file) when the entry format changes.

#include <cstdio>
#include <fstream>
#include <string>

#include "cache/entry_format.hpp"
#include "spec/key.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  moejit::KernelSpec spec{};
  spec.op = moejit::Op::moe_align;
  spec.experts = 64;
  spec.bm = 16;
  spec.warps = 4;
  spec.arch = moejit::Arch::sm_90a;
  spec.backend = moejit::Backend::device;
  const auto key = moejit::make_kernel_key(
      spec, {"5f0c3a9e2b7d41c68a1e9f3b2c4d5e6f", "nvrtc 12.8 V12.8.93", "-std=c++17 -arch=sm_90a -I<templates>"});
  moejit::store::Entry e;
  e.key = key.hash;
  e.key_material = key.material;
  e.meta.kind = moejit::store::PayloadKind::cubin;
  e.meta.kernel_name = "_ZN6moejit9moe_alignILi64ELi16ELi4EEEvPKiPiS3_S3_i";
  e.meta.compiler = "nvrtc 12.8 V12.8.93";
  e.meta.registers = 32;
  e.meta.static_shared_bytes = 1284;
  e.meta.block_threads = 128;
  e.meta.barriers = 1;
  e.meta.compile_ms = 41.5;
  e.meta.created_unix_ms = 1764590000123;
  // A stand-in payload (an ELF header's first bytes, then varied bytes): the decoder checks only
  // its length and checksum.
  e.payload = std::string("\x7f" "ELF\x02\x01\x01\x33", 8);
  for (int i = 0; i < 56; ++i) e.payload += static_cast<char>((i * 37 + 11) & 0xff);
  std::ofstream(argv[1], std::ios::binary) << moejit::store::encode_entry(e);
  return 0;
}
