// libFuzzer target: the `.stitch` text parser and the graph verifier.
//
// Any byte string is parsed. The properties checked, beyond "no crash, no sanitizer report":
// - parseModule either returns graphs or throws stitch::Error with ErrorCode::Parse (an error in
//   the text), never another code or another exception type;
// - every graph it returns passes verify();
// - the printer is the parser's inverse on what the parser makes (printer.h):
//   parseModule(printModule(gs)) == gs, and printing that again gives the same text.
// A violated property aborts via __builtin_trap so libFuzzer records the input as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/support/error.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_parser: property violated: %s\n%s\n", what, detail.c_str());
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<stitch::ir::Graph> graphs;
  try {
    graphs = stitch::ir::parseModule(text, "fuzz.stitch");
  } catch (const stitch::Error& e) {
    if (e.code() != stitch::ErrorCode::Parse)
      fail("parse error with a code other than Parse", e.message());
    return 0;
  }
  // Other exception types (std::bad_alloc, std::out_of_range, ...) escape: libFuzzer reports an
  // uncaught exception as a crash, which is what it is.
  for (const auto& g : graphs) {
    try {
      stitch::ir::verify(g);
    } catch (const stitch::Error& e) {
      fail("a parsed graph fails verify()", e.message());
    }
  }
  const std::string printed = stitch::ir::printModule(graphs);
  std::vector<stitch::ir::Graph> again;
  try {
    again = stitch::ir::parseModule(printed, "printed.stitch");
  } catch (const stitch::Error& e) {
    fail("printed text does not parse", e.message() + "\n--- printed:\n" + printed);
  }
  if (again.size() != graphs.size()) fail("round trip changed the graph count", printed);
  for (size_t i = 0; i < graphs.size(); ++i) {
    if (!(again[i] == graphs[i])) fail("parse(print(g)) != g", printed);
  }
  if (stitch::ir::printModule(again) != printed) fail("print is not a fixpoint", printed);
  return 0;
}
