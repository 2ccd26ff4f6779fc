// XLA's own reading of a module, for tests/test_native.py: each file named (an HloModuleProto or
// an HloProto) through HloModule::CreateFromProto and the layout-sensitive HloVerifier of the
// XLA inside the TensorFlow wheel (its headers and libtensorflow_cc.so.2; no Python or C entry
// point parses a module). Prints "<file>: ok <n> instructions" or "<file>: <XLA's status>", one line
// per file.
//   xla_parse_module <module.pb> ...
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "xla/debug_options_flags.h"
#include "xla/hlo/ir/hlo_module.h"
#include "xla/service/hlo.pb.h"
#include "xla/service/hlo_verifier.h"

namespace {

std::string ReadModule(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  xla::HloModuleProto module;
  if (!module.ParseFromString(bytes) || module.computations_size() == 0) {  // an HloProto's field 1 is its module
    xla::HloProto dump;
    if (!dump.ParseFromString(bytes)) return "not a serialized HloModuleProto or HloProto";
    module = dump.hlo_module();
  }
  auto config = xla::HloModule::CreateModuleConfigFromProto(module, xla::GetDebugOptionsFromFlags());
  if (!config.ok()) return config.status().ToString();
  auto hlo = xla::HloModule::CreateFromProto(module, *config);
  if (!hlo.ok()) return hlo.status().ToString();
  xla::HloVerifier verifier(/*layout_sensitive=*/true, /*allow_mixed_precision=*/true);
  const auto verified = verifier.Run(hlo->get());
  if (!verified.ok()) return verified.status().ToString();
  return "ok " + std::to_string((*hlo)->instruction_count()) + " instructions";
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string said = ReadModule(argv[i]);
    for (char& c : said) c = c == '\n' ? ' ' : c;  // one line per file
    std::cout << argv[i] << ": " << said << "\n";
  }
  return 0;
}
