#pragma once
// absl::Status -> grpc::Status, code for code (both follow google.rpc.Code), message kept.
#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace flashserve::api {

inline grpc::Status to_grpc_status(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace flashserve::api
