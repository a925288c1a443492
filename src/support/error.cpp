#include "support/error.h"

namespace stitch {

void throwError(ErrorCode code, std::string message) { throw Error(code, std::move(message)); }

}  // namespace stitch
