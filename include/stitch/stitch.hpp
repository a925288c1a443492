// stitch.hpp — a header-only C++17 RAII wrapper over the C API in stitch.h.
//
// Every class owns (or, where noted, borrows) one C handle; failures throw stitch::Error carrying
// the C status and message. Nothing here adds behaviour: it is the C API with destructors.
#ifndef STITCH_STITCH_HPP
#define STITCH_STITCH_HPP

#include <stitch/stitch.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace stitch {

class Error : public std::runtime_error {
 public:
  Error(stitch_status_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  stitch_status_t status() const { return status_; }

 private:
  stitch_status_t status_;
};

inline void check(stitch_status_t status) {
  if (status != STITCH_OK) throw Error(status, stitch_last_error());
}

// Checks every STITCH_* variable that is set (stitch_environment_check).
inline void checkEnvironment() { check(stitch_environment_check()); }

// Owns a handle H released by Destroy (a no-op on NULL); move-only.
template <class H, void (*Destroy)(H)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(H h, bool owned = true) : h_(h), owned_(owned) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)), owned_(o.owned_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
      owned_ = o.owned_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  H get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 protected:
  void reset() {
    if (owned_) Destroy(h_);
    h_ = nullptr;
  }
  H h_ = nullptr;
  bool owned_ = true;
};

struct Dim {
  int64_t size = 0;
  std::string symbol;  // empty: static
};

struct ValueInfo {
  std::string name;
  stitch_dtype_t dtype;
  std::vector<Dim> dims;
};

// A graph: owned when created or parsed, borrowed when taken from a Module.
class Graph : public Handle<stitch_graph_t, stitch_graph_destroy> {
 public:
  using Handle::Handle;
  static Graph create(const std::string& name) {
    stitch_graph_t g = nullptr;
    check(stitch_graph_create(name.c_str(), &g));
    return Graph(g);
  }
  static Graph parse(const std::string& text, const std::string& filename = "<input>") {
    stitch_graph_t g = nullptr;
    check(stitch_graph_parse(text.c_str(), filename.c_str(), &g));
    return Graph(g);
  }
  stitch_value_t addInput(const std::string& name, stitch_dtype_t dtype,
                          const std::vector<Dim>& dims) {
    std::vector<stitch_dim_t> cd;
    for (const Dim& d : dims) cd.push_back({d.size, d.symbol.empty() ? nullptr : d.symbol.c_str()});
    stitch_value_t v = -1;
    check(stitch_graph_add_input(h_, name.c_str(), dtype, cd.data(), cd.size(), &v));
    return v;
  }
  stitch_value_t addConstant(double value, stitch_dtype_t dtype) {
    stitch_value_t v = -1;
    check(stitch_graph_add_constant(h_, value, dtype, &v));
    return v;
  }
  stitch_value_t addOp(const std::string& op, const std::vector<stitch_value_t>& operands,
                       const std::vector<stitch_attr_t>& attrs = {}, const char* name = nullptr) {
    stitch_value_t v = -1;
    check(stitch_graph_add_op(h_, op.c_str(), operands.data(), operands.size(), attrs.data(),
                              attrs.size(), name, &v));
    return v;
  }
  void setOutputs(const std::vector<stitch_value_t>& values) {
    check(stitch_graph_set_outputs(h_, values.data(), values.size()));
  }
  void verify() const { check(stitch_graph_verify(h_)); }
  std::string print() const {
    size_t n = 0;
    check(stitch_graph_print(h_, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    check(stitch_graph_print(h_, s.data(), s.size(), &n));
    s.resize(n);
    return s;
  }
  // The fusion plan for `sizes` of the symbolic dims (see stitch_graph_explain_plan).
  std::string explainPlan(const std::map<std::string, std::string>& options,
                          const std::map<std::string, int64_t>& sizes) const {
    return textFor(stitch_graph_explain_plan, options, sizes);
  }
  // stitch_graph_codegen: emits and compiles the kernels for options["target"], runs nothing.
  std::string codegen(const std::map<std::string, std::string>& options,
                      const std::map<std::string, int64_t>& sizes) const {
    return textFor(stitch_graph_codegen, options, sizes);
  }
  std::string name() const { return stitch_graph_name(h_); }
  size_t numInputs() const { return stitch_graph_num_inputs(h_); }
  size_t numOutputs() const { return stitch_graph_num_outputs(h_); }
  size_t numOps() const { return stitch_graph_num_ops(h_); }
  ValueInfo input(size_t i) const { return info(0, i); }
  ValueInfo output(size_t i) const { return info(1, i); }

 private:
  using TextFn = stitch_status_t (*)(stitch_graph_t, const char* const*, const char* const*, size_t,
                                     const char* const*, const int64_t*, size_t, char*, size_t,
                                     size_t*);
  std::string textFor(TextFn fn, const std::map<std::string, std::string>& options,
                      const std::map<std::string, int64_t>& sizes) const {
    std::vector<const char*> keys, values, symbols;
    std::vector<int64_t> dims;
    for (const auto& kv : options) {
      keys.push_back(kv.first.c_str());
      values.push_back(kv.second.c_str());
    }
    for (const auto& kv : sizes) {
      symbols.push_back(kv.first.c_str());
      dims.push_back(kv.second);
    }
    size_t n = 0;
    check(fn(h_, keys.data(), values.data(), keys.size(), symbols.data(), dims.data(), dims.size(),
             nullptr, 0, &n));
    std::string s(n + 1, '\0');
    check(fn(h_, keys.data(), values.data(), keys.size(), symbols.data(), dims.data(), dims.size(),
             &s[0], s.size(), &n));
    s.resize(n);
    return s;
  }
  ValueInfo info(int isOutput, size_t i) const {
    const char* name = nullptr;
    stitch_dtype_t dtype = STITCH_F32;
    size_t rank = 0;
    check(stitch_graph_value_info(h_, isOutput, i, &name, &dtype, &rank, nullptr, 0));
    std::vector<stitch_dim_t> dims(rank);
    check(stitch_graph_value_info(h_, isOutput, i, &name, &dtype, &rank, dims.data(), rank));
    ValueInfo out{name, dtype, {}};
    for (const stitch_dim_t& d : dims) out.dims.push_back({d.size, d.symbol ? d.symbol : ""});
    return out;
  }
};

// A parsed .stitch file; graphs taken from it are borrowed and live as long as the module.
class Module : public Handle<stitch_module_t, stitch_module_destroy> {
 public:
  using Handle::Handle;
  static Module parse(const std::string& text, const std::string& filename = "<input>") {
    stitch_module_t m = nullptr;
    check(stitch_module_parse(text.c_str(), filename.c_str(), &m));
    return Module(m);
  }
  static Module parseFile(const std::string& path) {
    stitch_module_t m = nullptr;
    check(stitch_module_parse_file(path.c_str(), &m));
    return Module(m);
  }
  size_t size() const { return stitch_module_num_graphs(h_); }
  Graph graph(size_t i) const { return Graph(stitch_module_graph(h_, i), /*owned=*/false); }
  // A borrowed graph, or an empty Graph if there is none of that name.
  Graph find(const std::string& name) const {
    return Graph(stitch_module_find_graph(h_, name.c_str()), /*owned=*/false);
  }
};

class Program : public Handle<stitch_program_t, stitch_program_destroy> {
 public:
  using Handle::Handle;
  size_t numInputs() const { return stitch_program_num_inputs(h_); }
  size_t numOutputs() const { return stitch_program_num_outputs(h_); }
  stitch_program_stats_t stats() const {
    stitch_program_stats_t s{};
    check(stitch_program_stats(h_, &s));
    return s;
  }
  stitch_program_tuning_t tuning() const {
    stitch_program_tuning_t t{};
    check(stitch_program_tuning(h_, &t));
    return t;
  }
  std::vector<int64_t> outputShape(const std::vector<DLTensor>& inputs, size_t index) const {
    size_t rank = 0;
    check(stitch_program_output_shape(h_, inputs.data(), inputs.size(), index, nullptr, 0, &rank));
    std::vector<int64_t> shape(rank);
    check(stitch_program_output_shape(h_, inputs.data(), inputs.size(), index, shape.data(), rank,
                                      &rank));
    return shape;
  }
  void run(const std::vector<DLTensor>& inputs, std::vector<DLTensor>& outputs,
           void* stream = nullptr) const {
    check(stitch_program_run(h_, inputs.data(), inputs.size(), outputs.data(), outputs.size(),
                             stream));
  }
};

class Engine : public Handle<stitch_engine_t, stitch_engine_destroy> {
 public:
  using Handle::Handle;
  explicit Engine(const std::map<std::string, std::string>& options) {
    std::vector<const char*> keys, values;
    for (const auto& [k, v] : options) {
      keys.push_back(k.c_str());
      values.push_back(v.c_str());
    }
    check(stitch_engine_create(keys.data(), values.data(), keys.size(), &h_));
  }
  // Engine::create({{"backend", "reference"}}): a braced list is unambiguous here.
  static Engine create(const std::map<std::string, std::string>& options = {}) {
    return Engine(options);
  }
  std::string backend() const { return stitch_engine_backend(h_); }
  stitch_cache_stats_t cacheStats() const {
    stitch_cache_stats_t s{};
    check(stitch_engine_cache_stats(h_, &s));
    return s;
  }
  Program compile(const Graph& g) const {
    stitch_program_t p = nullptr;
    check(stitch_program_compile(h_, g.get(), &p));
    return Program(p);
  }
  // The DLPack device tensors must be on for this engine.
  DLDevice device() const {
    DLDevice d{};
    check(stitch_engine_device(h_, &d));
    return d;
  }
  void copy(void* dst, const void* src, size_t bytes, stitch_copy_kind_t kind,
            void* stream = nullptr) const {
    check(stitch_engine_copy(h_, dst, src, bytes, kind, stream));
  }
  void synchronize(void* stream = nullptr) const { check(stitch_engine_synchronize(h_, stream)); }
};

// The kernel cache's directory, as the environment names it (stitch.h, "The kernel cache's
// directory").
inline std::string cacheDirPath() {
  size_t n = 0;
  check(stitch_cache_dir_path(nullptr, 0, &n));
  std::string s(n + 1, '\0');
  check(stitch_cache_dir_path(&s[0], s.size(), &n));
  s.resize(n);
  return s;
}
inline stitch_cache_dir_stats_t cacheDirStats() {
  stitch_cache_dir_stats_t s{};
  check(stitch_cache_dir_stats(&s));
  return s;
}
inline stitch_cache_dir_kinds_t cacheDirKinds() {
  stitch_cache_dir_kinds_t k{};
  check(stitch_cache_dir_kinds(&k));
  return k;
}
struct CacheDirCleared {
  uint64_t files = 0;
  uint64_t bytes = 0;
};
inline CacheDirCleared cacheDirClear() {
  CacheDirCleared c;
  check(stitch_cache_dir_clear(&c.files, &c.bytes));
  return c;
}
inline stitch_cache_dir_prune_t cacheDirPrune() {
  stitch_cache_dir_prune_t p{};
  check(stitch_cache_dir_prune(&p));
  return p;
}

// stitch_tune_fit: fits this machine's cost model to its autotuning records, stores the
// calibration (unless options["dry_run"]) and returns the report. One call, with a buffer the
// report fits in: a second call would fit and store again.
inline std::string tuneFit(const std::map<std::string, std::string>& options) {
  std::vector<const char*> keys, values;
  for (const auto& kv : options) {
    keys.push_back(kv.first.c_str());
    values.push_back(kv.second.c_str());
  }
  std::string s(size_t{16} << 10, '\0');
  size_t n = 0;
  check(stitch_tune_fit(keys.data(), values.data(), keys.size(), &s[0], s.size(), &n));
  if (n >= s.size()) {  // longer than any report: fit again into a buffer that holds it
    s.assign(n + 1, '\0');
    check(stitch_tune_fit(keys.data(), values.data(), keys.size(), &s[0], s.size(), &n));
  }
  s.resize(n);
  return s;
}

// Memory on an engine's device (host memory on the host backends), freed on destruction. The
// engine must outlive it.
class DeviceBuffer {
 public:
  DeviceBuffer(const Engine& engine, size_t bytes) : engine_(engine.get()) {
    check(stitch_engine_alloc(engine_, bytes, &ptr_));
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : engine_(o.engine_), ptr_(o.ptr_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(engine_, o.engine_);
    std::swap(ptr_, o.ptr_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { stitch_engine_free(engine_, ptr_); }
  void* get() const { return ptr_; }

 private:
  stitch_engine_t engine_;
  void* ptr_ = nullptr;
};

}  // namespace stitch

#endif  // STITCH_STITCH_HPP
