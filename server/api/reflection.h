#pragma once
// gRPC server reflection, our own: grpc.reflection.v1 and grpc.reflection.v1alpha (one
// protocol under two package names; tools speak one or the other), answered from the
// descriptors linked into this binary (protobuf's generated pool).
//
// Why not gRPC's grpc++_reflection library: it registers its server-builder plugin from a
// static initializer as soon as it is linked, so every grpc::ServerBuilder of the process
// served reflection whatever the server decided, and the plugin cannot check a token. Here
// reflection is a service like the others: behind the token when token auth is on (unless
// the server declares it open), open without token auth.
//
// Each request on the stream gets one response, in order:
//   list_services                  the names given at construction
//   file_by_filename, file_containing_symbol, file_containing_extension
//                                  that file and every file it imports, transitively, each
//                                  once, as serialized google.protobuf.FileDescriptorProto
//   all_extension_numbers_of_type  the extension numbers of that message type
// A name that is not known gets an error_response NOT_FOUND naming it; a request without a
// message_request INVALID_ARGUMENT. The call itself ends OK when the client closes its side.
//
// Thread-safety: the services may serve any number of calls at once. They, `auth` and the
// names must outlive the grpc::Server they are registered with.
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/impl/service_type.h"
#include "server/api/auth.h"

namespace flashserve::api {

// The full names of the two reflection services.
inline constexpr const char* kReflectionServiceNames[] = {
    "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"};

// The v1 and v1alpha services. `services`: what list_services answers (include
// kReflectionServiceNames). `auth`: null = open to all; otherwise a call without an accepted
// token ends UNAUTHENTICATED before it reads a request.
std::vector<std::unique_ptr<grpc::Service>> make_reflection_services(
    std::vector<std::string> services, const TokenAuth* auth);

}  // namespace flashserve::api
