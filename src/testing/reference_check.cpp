#include "testing/reference_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace stitch::testing {

double dtypeTolerance(ir::DType t) { return reference::dtypeTolerance(t); }

double graphTolerance(const ir::Graph& g) {
  double tol = 0.0;
  for (const ir::Node& n : g.nodes())
    if (ir::isFloat(n.type.dtype)) tol = std::max(tol, dtypeTolerance(n.type.dtype));
  return tol;
}

namespace {

// A native buffer for a host tensor, so the interpreter's TensorView API can read it.
struct Native {
  std::vector<std::byte> bytes;
  reference::TensorView view(const reference::HostTensor& t) const {
    return {t.dtype, t.shape, bytes.data()};
  }
};

}  // namespace

std::vector<reference::HostTensor> evaluateReference(
    const ir::Graph& g, std::span<const reference::HostTensor> inputs) {
  std::vector<Native> buffers(inputs.size());
  std::vector<reference::TensorView> views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const reference::HostTensor& t = inputs[i];
    buffers[i].bytes.resize(static_cast<size_t>(t.numel() * ir::dtypeBytes(t.dtype)) + 1);
    reference::encode(t, {t.dtype, t.shape, buffers[i].bytes.data()});
    views.push_back(buffers[i].view(t));
  }
  std::vector<reference::HostTensor> values = reference::evaluateNodes(g, views);
  std::vector<reference::HostTensor> out;
  for (int o : g.outputs()) out.push_back(values[static_cast<size_t>(o)]);
  return out;
}

std::string compareOutputs(std::span<const reference::HostTensor> want,
                           std::span<const reference::HostTensor> got, double floatTol) {
  if (want.size() != got.size())
    return fmt::format("{} outputs, expected {}", got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const reference::HostTensor& w = want[i];
    const reference::HostTensor& g = got[i];
    if (w.dtype != g.dtype || w.shape != g.shape)
      return fmt::format("output {}: {} [{}], expected {} [{}]", i, ir::dtypeName(g.dtype),
                         fmt::join(g.shape, ", "), ir::dtypeName(w.dtype),
                         fmt::join(w.shape, ", "));
    double tol = floatTol == 0.0 ? 0.0 : std::max(floatTol, dtypeTolerance(w.dtype));
    for (int64_t e = 0; e < w.numel(); ++e) {
      auto k = static_cast<size_t>(e);
      bool ok;
      if (ir::isFloat(w.dtype)) {
        double a = g.floats[k], b = w.floats[k];
        if (std::isnan(b)) ok = std::isnan(a);
        else if (tol == 0.0) ok = std::memcmp(&a, &b, sizeof a) == 0;  // -0.0 != 0.0 here
        else if (std::isinf(b)) ok = a == b;
        else ok = std::fabs(a - b) <= tol * (1 + std::fabs(b));
      } else {
        ok = g.ints[k] == w.ints[k];
      }
      if (!ok)
        return fmt::format("output {} element {}: got {}, expected {} (tolerance {})", i, e,
                           g.at(e), w.at(e), tol);
    }
  }
  return {};
}

}  // namespace stitch::testing
