#include "testing/transformer_graph.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "runtime/support/error.h"

namespace stitch::testing {

namespace {

using ir::Attrs;
using ir::OpCode;

ir::Shape dims(std::initializer_list<int64_t> sizes) {
  ir::Shape s;
  for (int64_t n : sizes) s.push_back(ir::Dim::of(n));
  return s;
}

struct LayerParams {
  int attnBias, ln1Gamma, ln1Beta, ffnBias, outBias, ln2Gamma, ln2Beta;
};

// Adds one layer's ops, named "l<i>_<what>", to a builder.
class LayerBuilder {
 public:
  LayerBuilder(ir::GraphBuilder& b, const TransformerGraphOptions& o, int layer)
      : b_(b), o_(o), prefix_("l" + std::to_string(layer) + "_") {}

  int build(int h, int maskBias, const LayerParams& w) {
    const int64_t tokens = o_.batch * o_.seq, head = o_.hidden / o_.heads;
    // Attention scores [batch, heads, seq, seq] (the QK^T stand-in), scaled, masked, softmax.
    int q = op(OpCode::Reshape, {h}, {{"shape", dims({o_.batch, o_.seq, o_.heads, head})}}, "q");
    int scores = op(OpCode::Transpose, {q}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "scores");
    int scaled =
        op(OpCode::Mul, {scores, scalar(1.0 / std::sqrt(static_cast<double>(head)))}, {}, "scaled");
    int masked = op(OpCode::Add, {scaled, maskBias}, {}, "masked");
    int mx = op(OpCode::ReduceMax, {masked}, lastAxis(3), "max");
    int shifted = op(OpCode::Sub, {masked, mx}, {}, "shifted");
    int e = op(OpCode::Exp, {shifted}, {}, "exp");
    int sum = op(OpCode::ReduceSum, {e}, lastAxis(3), "sum");
    int probs = op(OpCode::Div, {e, sum}, {}, "probs");
    // The PV stand-in: back to [tokens, hidden].
    int pt =
        op(OpCode::Transpose, {probs}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, "probs_t");
    int attn = op(OpCode::Reshape, {pt}, {{"shape", dims({tokens, o_.hidden})}}, "attn");
    int attnB = op(OpCode::Add, {attn, w.attnBias}, {}, "attn_b");
    int res1 = op(OpCode::Add, {attnB, h}, {}, "res1");
    int h1 = layerNorm(res1, w.ln1Gamma, w.ln1Beta, "ln1_");

    // Feed-forward: the up projection stand-in, bias, GELU (tanh form).
    const int64_t widen = o_.ffn / o_.hidden;
    int u0 = op(OpCode::Reshape, {h1}, {{"shape", dims({tokens, 1, o_.hidden})}}, "up0");
    int u1 = op(OpCode::BroadcastTo, {u0}, {{"shape", dims({tokens, widen, o_.hidden})}}, "up1");
    int up = op(OpCode::Reshape, {u1}, {{"shape", dims({tokens, o_.ffn})}}, "up");
    int a = op(OpCode::Add, {up, w.ffnBias}, {}, "ffn_b");
    int a2 = op(OpCode::Mul, {a, a}, {}, "gelu_a2");
    int a3 = op(OpCode::Mul, {a2, a}, {}, "gelu_a3");
    int c = op(OpCode::Mul, {a3, scalar(0.044715)}, {}, "gelu_c");
    int inner = op(OpCode::Add, {a, c}, {}, "gelu_inner");
    int arg = op(OpCode::Mul, {inner, scalar(0.7978845608028654)}, {}, "gelu_arg");
    int t = op(OpCode::Tanh, {arg}, {}, "gelu_tanh");
    int t1 = op(OpCode::Add, {t, scalar(1.0)}, {}, "gelu_t1");
    int at = op(OpCode::Mul, {a, t1}, {}, "gelu_at");
    int gelu = op(OpCode::Mul, {at, scalar(0.5)}, {}, "gelu");
    // The down projection stand-in: a sum over the widened axis. Bias, residual, layer norm.
    int d0 = op(OpCode::Reshape, {gelu}, {{"shape", dims({tokens, widen, o_.hidden})}}, "down0");
    int down = op(OpCode::ReduceSum, {d0}, {{"axes", std::vector<int64_t>{1}}}, "down");
    int downB = op(OpCode::Add, {down, w.outBias}, {}, "down_b");
    int res2 = op(OpCode::Add, {downB, h1}, {}, "res2");
    return layerNorm(res2, w.ln2Gamma, w.ln2Beta, "ln2_");
  }

 private:
  int op(OpCode code, std::vector<int> operands, Attrs attrs, const std::string& name) {
    return b_.addOp(code, std::move(operands), std::move(attrs), prefix_ + name);
  }
  int scalar(double v) { return b_.addConstant(v, ir::DType::F32); }
  static Attrs lastAxis(int64_t axis) {
    return {{"axes", std::vector<int64_t>{axis}}, {"keepdims", true}};
  }

  // Over the last axis of a [tokens, hidden] value, as DESIGN.md writes it.
  int layerNorm(int x, int gamma, int beta, const std::string& tag) {
    int mean = op(OpCode::ReduceMean, {x}, lastAxis(1), tag + "mean");
    int xc = op(OpCode::Sub, {x, mean}, {}, tag + "xc");
    int sq = op(OpCode::Mul, {xc, xc}, {}, tag + "sq");
    int var = op(OpCode::ReduceMean, {sq}, lastAxis(1), tag + "var");
    int ve = op(OpCode::Add, {var, scalar(1e-5)}, {}, tag + "ve");
    int rstd = op(OpCode::Rsqrt, {ve}, {}, tag + "rstd");
    int xn = op(OpCode::Mul, {xc, rstd}, {}, tag + "xn");
    int y0 = op(OpCode::Mul, {xn, gamma}, {}, tag + "y0");
    return op(OpCode::Add, {y0, beta}, {}, tag + "y");
  }

  ir::GraphBuilder& b_;
  const TransformerGraphOptions& o_;
  std::string prefix_;
};

void checkOptions(const TransformerGraphOptions& o) {
  STITCH_CHECK(o.batch > 0 && o.seq > 0 && o.hidden > 0 && o.heads > 0 && o.ffn > 0,
               ErrorCode::InvalidArgument, "transformer graph sizes must be positive");
  STITCH_CHECK(o.hidden % o.heads == 0 && o.hidden / o.heads == o.seq, ErrorCode::InvalidArgument,
               "transformer graph: head size hidden / heads ({} / {}) must equal seq ({})",
               o.hidden, o.heads, o.seq);
  STITCH_CHECK(o.ffn % o.hidden == 0, ErrorCode::InvalidArgument,
               "transformer graph: ffn ({}) must be a multiple of hidden ({})", o.ffn, o.hidden);
}

}  // namespace

ir::Graph transformerGraph(int layers, const TransformerGraphOptions& o) {
  STITCH_CHECK(layers >= 1, ErrorCode::InvalidArgument, "transformer graph: {} layers", layers);
  checkOptions(o);
  ir::GraphBuilder b("transformer");
  const ir::DType f32 = ir::DType::F32;
  auto vec = [&](const std::string& name, int64_t n) { return b.addInput(name, {f32, dims({n})}); };
  int h = b.addInput("x", {f32, dims({o.batch * o.seq, o.hidden})});
  int maskBias = b.addInput("mask_bias", {f32, dims({o.batch, 1, 1, o.seq})});
  std::vector<LayerParams> params;
  params.reserve(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    std::string p = "l" + std::to_string(l) + "_";
    params.push_back({vec(p + "attn_bias", o.hidden), vec(p + "ln1_gamma", o.hidden),
                      vec(p + "ln1_beta", o.hidden), vec(p + "ffn_bias", o.ffn),
                      vec(p + "out_bias", o.hidden), vec(p + "ln2_gamma", o.hidden),
                      vec(p + "ln2_beta", o.hidden)});
  }
  for (int l = 0; l < layers; ++l)
    h = LayerBuilder(b, o, l).build(h, maskBias, params[static_cast<size_t>(l)]);
  b.setOutputs({h});
  return std::move(b).finish();
}

int64_t transformerOpsPerLayer(const TransformerGraphOptions& options) {
  return static_cast<int64_t>(transformerGraph(1, options).numOps());
}

ir::Graph transformerGraphWithOps(int64_t ops, const TransformerGraphOptions& options) {
  int64_t perLayer = transformerOpsPerLayer(options);
  int64_t layers = std::max<int64_t>(1, (ops + perLayer / 2) / perLayer);
  STITCH_CHECK(layers <= 1'000'000, ErrorCode::InvalidArgument,
               "transformer graph: {} ops is too many", ops);
  return transformerGraph(static_cast<int>(layers), options);
}

}  // namespace stitch::testing
