// Version, status names, the per-thread last error and dtype names of the C API.
#include "api/api_internal.h"

namespace stitch::api {

namespace {
thread_local std::string tlsLastError;
}

stitch_status_t setError(stitch_status_t status, std::string message) {
  tlsLastError = std::move(message);
  return status;
}

stitch_status_t fromException() {
  try {
    throw;
  } catch (const Error& e) {
    return setError(static_cast<stitch_status_t>(e.code()), e.message());
  } catch (const std::bad_alloc&) {
    return setError(STITCH_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return setError(STITCH_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return setError(STITCH_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace stitch::api

using namespace stitch;

extern "C" {

const char* stitch_version(void) { return STITCH_VERSION_STRING; }

int stitch_version_number(void) { return STITCH_VERSION_NUMBER; }

const char* stitch_status_string(stitch_status_t status) {
  switch (status) {
    case STITCH_OK: return "STITCH_OK";
    case STITCH_ERROR_INVALID_ARGUMENT: return "STITCH_ERROR_INVALID_ARGUMENT";
    case STITCH_ERROR_PARSE: return "STITCH_ERROR_PARSE";
    case STITCH_ERROR_INVALID_GRAPH: return "STITCH_ERROR_INVALID_GRAPH";
    case STITCH_ERROR_SHAPE_MISMATCH: return "STITCH_ERROR_SHAPE_MISMATCH";
    case STITCH_ERROR_BACKEND_UNAVAILABLE: return "STITCH_ERROR_BACKEND_UNAVAILABLE";
    case STITCH_ERROR_COMPILE: return "STITCH_ERROR_COMPILE";
    case STITCH_ERROR_UNSUPPORTED: return "STITCH_ERROR_UNSUPPORTED";
    case STITCH_ERROR_OUT_OF_MEMORY: return "STITCH_ERROR_OUT_OF_MEMORY";
    case STITCH_ERROR_IO: return "STITCH_ERROR_IO";
    case STITCH_ERROR_INTERNAL: return "STITCH_ERROR_INTERNAL";
    case STITCH_ERROR_INDEX_OUT_OF_RANGE: return "STITCH_ERROR_INDEX_OUT_OF_RANGE";
  }
  return "STITCH_UNKNOWN_STATUS";
}

const char* stitch_last_error(void) { return api::tlsLastError.c_str(); }

const char* stitch_dtype_name(stitch_dtype_t dtype) {
  if (static_cast<int>(dtype) < 0 || static_cast<int>(dtype) >= ir::kNumDTypes) return "?";
  return ir::dtypeName(static_cast<ir::DType>(dtype)).data();
}

}  // extern "C"
