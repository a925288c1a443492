// Shared plumbing of the C API implementation: handle structs and the exception boundary.
//
// Every exported function body runs inside STITCH_API_GUARD, which turns any C++ exception into
// a status and the thread's last-error message. Nothing thrown ever reaches the C caller.
#pragma once

#include <stitch/stitch.h>

#include <string>

#include "support/error.h"
#include "ir/dtype.h"

namespace stitch::api {

// Records `message` as this thread's last error and returns status.
stitch_status_t setError(stitch_status_t status, std::string message);
// Maps the exception being handled to a status (call only inside a catch block).
stitch_status_t fromException();

}  // namespace stitch::api

#define STITCH_API_GUARD(...)             \
  try {                                   \
    __VA_ARGS__                           \
  } catch (...) {                         \
    return ::stitch::api::fromException(); \
  }

// Fails with INVALID_ARGUMENT when a required pointer argument is NULL.
#define STITCH_API_REQUIRE(ptr)                                                            \
  do {                                                                                     \
    if ((ptr) == nullptr)                                                                  \
      return ::stitch::api::setError(STITCH_ERROR_INVALID_ARGUMENT,                        \
                                     std::string(__func__) + ": " #ptr " must not be NULL"); \
  } while (0)
