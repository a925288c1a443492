// The CUDA kernels on the host (design note in gpu_emulator.h).
#include "gpu/gpu_emulator.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "codegen/gpu/cstyle_emitter.h"
#include "ir/signature.h"
#include "runtime/index_checks.h"

namespace stitch::gputest {

namespace {

// The source as the emulator compiles it: without its includes (the translation unit includes
// every template once) and with C++ linkage (each kernel is in a namespace of its own).
std::string inNamespace(const std::string& source, size_t index) {
  std::istringstream in(source);
  std::string out = fmt::format("namespace k{} {{\n", index), line;
  while (std::getline(in, line)) {
    if (line.rfind("#include", 0) == 0) continue;
    if (line.rfind("extern \"C\" ", 0) == 0) line.erase(0, 11);
    out += line + "\n";
  }
  return out + "}\n";
}

std::string runCommand(const std::string& command) {
  std::string output;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + command);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) output.append(buf, n);
  if (pclose(p) != 0) throw std::runtime_error(command + " failed:\n" + output.substr(0, 20000));
  return output;
}

}  // namespace

Emulator::Emulator(std::span<const rt::ProgramArtifact* const> programs, size_t form,
                   const std::string& dir)
    : form_(form) {
  namespace fs = std::filesystem;
  fs::create_directories(fs::path(dir) / "stitch");
  for (const codegen::DeviceHeaderText& h : codegen::deviceHeaders())
    std::ofstream(fs::path(dir) / std::string(h.name)) << h.text;
  std::string tu = "#include \"" STITCH_SOURCE_DIR "/tests/gpu/emulator/device_emulation.h\"\n";
  for (const char* h : {"math", "reduce", "vec", "random", "grid", "check"})
    tu += fmt::format("#include \"stitch/{}.cuh\"\n", h);
  std::vector<std::pair<std::string, size_t>> order;  // key, phases
  for (const rt::ProgramArtifact* p : programs)
    for (const rt::KernelArtifact& k : p->kernels) {
      const rt::KernelCode& code = k.forms.at(form);
      if (code.language != "cuda") throw std::runtime_error("the emulator runs CUDA code");
      const std::string key = code.key.canonical();
      if (entries_.count(key)) continue;
      entries_[key];
      const size_t index = order.size();
      order.emplace_back(key, code.phases.size());
      tu += inNamespace(code.text, index);
      for (size_t ph = 0; ph < code.phases.size(); ++ph)
        tu += fmt::format(
            "extern \"C\" int emu_k{0}_p{1}(long long grid, int block, void** args) {{\n"
            "  return emu::launch([](void** a) {{ emu::invoke(&k{0}::{2}, a); }}, grid, block, "
            "args);\n}}\n",
            index, ph, code.phases[ph].symbol);
    }
  const fs::path source = fs::path(dir) / "kernels.cpp", library = fs::path(dir) / "kernels.so";
  std::ofstream(source) << tu;
  auto t0 = std::chrono::steady_clock::now();
  runCommand(fmt::format("{} -std=c++20 -O1 -w -shared -fPIC -I {} -o {} {}", STITCH_TEST_CXX, dir,
                         library.string(), source.string()));
  compileSeconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  library_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library_) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  for (size_t i = 0; i < order.size(); ++i)
    for (size_t ph = 0; ph < order[i].second; ++ph) {
      void* fn = dlsym(library_, fmt::format("emu_k{}_p{}", i, ph).c_str());
      if (!fn) throw std::runtime_error("missing emulated entry");
      entries_[order[i].first].push_back(reinterpret_cast<Entry>(fn));
    }
}

Emulator::~Emulator() {
  if (library_) dlclose(library_);
}

void Emulator::launch(const rt::KernelArtifact& a, std::vector<void*>& pointers,
                      int64_t maxGrid) const {
  const rt::KernelCode& code = a.forms.at(form_);
  const std::vector<Entry>& entries = entries_.at(code.key.canonical());
  // cuLaunchKernel's convention: the address of each parameter's value, sizes after buffers
  // (and after the status words' pointer, the last of `pointers` when the kernel has checks).
  std::vector<int64_t> sizes = a.sizes;
  std::vector<void*> args;
  for (void*& p : pointers) args.push_back(&p);
  for (int64_t& s : sizes) args.push_back(&s);
  for (size_t ph = 0; ph < entries.size(); ++ph) {
    const rt::EntryPoint& e = code.phases[ph];
    if (entries[ph](std::min(e.grid, maxGrid), e.block, args.data()) != 0)
      throw std::runtime_error(
          fmt::format("kernel {} phase {}: threads of a block disagree on barriers", a.name, ph));
  }
}

std::vector<reference::HostTensor> Emulator::run(const ir::Graph& g, const ir::Bindings& b,
                                                 const rt::ProgramArtifact& program,
                                                 std::span<const reference::HostTensor> inputs,
                                                 int64_t maxGrid) const {
  // One buffer per value and per scratch index, as large as any kernel declares it, 256-byte
  // aligned (the aligned form's vector accesses need 16).
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::map<std::pair<bool, int>, std::unique_ptr<void, Free>> buffers;
  std::map<std::pair<bool, int>, size_t> bytes;
  const auto shapes = ir::concreteShapes(g, b);
  auto need = [&](bool scratch, int id, ir::DType t, int64_t elements) {
    size_t& n = bytes[{scratch, id}];
    n = std::max(n, static_cast<size_t>(elements * ir::dtypeBytes(t)));
  };
  auto elementsOf = [&](int node) {
    int64_t n = 1;
    for (int64_t e : shapes[static_cast<size_t>(node)]) n *= e;
    return n;
  };
  for (int id : program.external) need(false, id, g.node(id).type.dtype, elementsOf(id));
  for (const rt::KernelArtifact& k : program.kernels)
    for (const rt::KernelBuffer& p : k.params)
      need(p.value < 0, p.value < 0 ? p.scratch : p.value, p.dtype, p.elements);
  for (const auto& [id, n] : bytes) {
    void* p = std::aligned_alloc(256, (n + 256) / 256 * 256);
    std::memset(p, 0xA5, (n + 256) / 256 * 256);  // garbage, as device memory is
    buffers[id].reset(p);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = g.inputs()[i];
    reference::encode(inputs[i], {inputs[i].dtype, inputs[i].shape, buffers.at({false, id}).get()});
  }
  for (size_t ki = 0; ki < program.kernels.size(); ++ki) {
    const rt::KernelArtifact& k = program.kernels[ki];
    std::vector<void*> pointers;
    for (const rt::KernelBuffer& p : k.params)
      pointers.push_back(buffers.at({p.value < 0, p.value < 0 ? p.scratch : p.value}).get());
    std::array<int64_t, rt::kCheckStatusWords> status{};
    if (!k.checks.empty()) pointers.push_back(status.data());
    launch(k, pointers, maxGrid);
    if (status[0] != 0) rt::throwCheckFailure(status, k.checks, program.name, ki);
  }
  std::vector<reference::HostTensor> out;
  for (int id : g.outputs()) {
    const ir::DType t = g.node(id).type.dtype;
    out.push_back(
        reference::decode({t, shapes[static_cast<size_t>(id)], buffers.at({false, id}).get()}));
  }
  return out;
}

}  // namespace stitch::gputest
