#pragma once
// StatusOr plumbing for every layer (header-only, target flashserve_base, the bottom of the
// dependency graph: it depends on Abseil only).
//
//   RETURN_IF_ERROR(file.check_header());
//       returns the absl::Status of the expression when it is not OK.
//   ASSIGN_OR_RETURN(const int64_t n, file.get_int(key));
//   ASSIGN_OR_RETURN(config->num_layers, positive_int(file, key));
//       evaluates an absl::StatusOr<T> expression once; on error returns its status from the
//       enclosing function (which returns absl::Status or any absl::StatusOr<U>), else
//       declares or assigns `lhs` from the moved value. One use per line (the temporary's
//       name is made unique by the line number).
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FLASHSERVE_STATUS_CONCAT_INNER(a, b) a##b
#define FLASHSERVE_STATUS_CONCAT(a, b) FLASHSERVE_STATUS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                                               \
  do {                                                                      \
    if (::absl::Status status_macros_s_ = (expr); !status_macros_s_.ok()) { \
      return status_macros_s_;                                              \
    }                                                                       \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr)                                                         \
  FLASHSERVE_ASSIGN_OR_RETURN_IMPL(FLASHSERVE_STATUS_CONCAT(status_macros_or_, __LINE__), lhs, \
                                   expr)

#define FLASHSERVE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return std::move(tmp).status();         \
  lhs = std::move(*tmp)
