#include "server/api/reflection.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace flashserve::api {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

// Appends `file` and every file it imports, transitively, each once, `file` first.
void add_file_and_imports(const FileDescriptor* file, std::set<std::string>* seen,
                          std::vector<std::string>* out) {
  if (!seen->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->push_back(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) {
    add_file_and_imports(file->dependency(i), seen, out);
  }
}

template <typename Response>
void set_error(grpc::StatusCode code, std::string message, Response* response) {
  auto* error = response->mutable_error_response();
  error->set_error_code(code);
  error->set_error_message(std::move(message));
}

// The file a file request asks for (null when it is not known) and how to name what was
// asked for in an error.
template <typename Request>
std::pair<const FileDescriptor*, std::string> requested_file(const Request& request) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  switch (request.message_request_case()) {
    case Request::kFileByFilename:
      return {pool->FindFileByName(request.file_by_filename()),
              absl::StrCat("file '", request.file_by_filename(), "'")};
    case Request::kFileContainingSymbol:
      return {pool->FindFileContainingSymbol(request.file_containing_symbol()),
              absl::StrCat("symbol '", request.file_containing_symbol(), "'")};
    default: {
      const auto& extension = request.file_containing_extension();
      const Descriptor* type = pool->FindMessageTypeByName(extension.containing_type());
      const FieldDescriptor* field =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, extension.extension_number());
      return {field == nullptr ? nullptr : field->file(),
              absl::StrCat("extension ", extension.extension_number(), " of '",
                           extension.containing_type(), "'")};
    }
  }
}

template <typename Request, typename Response>
void answer(const std::vector<std::string>& services, const Request& request,
            Response* response) {
  response->set_valid_host(request.host());
  *response->mutable_original_request() = request;
  switch (request.message_request_case()) {
    case Request::kListServices:
      for (const std::string& name : services) {
        response->mutable_list_services_response()->add_service()->set_name(name);
      }
      return;
    case Request::kAllExtensionNumbersOfType: {
      const DescriptorPool* pool = DescriptorPool::generated_pool();
      const Descriptor* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        set_error(grpc::StatusCode::NOT_FOUND,
                  absl::StrCat("type '", request.all_extension_numbers_of_type(), "' not found"),
                  response);
        return;
      }
      std::vector<const FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      auto* numbers = response->mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const FieldDescriptor* extension : extensions) {
        numbers->add_extension_number(extension->number());
      }
      return;
    }
    case Request::kFileByFilename:
    case Request::kFileContainingSymbol:
    case Request::kFileContainingExtension: {
      const auto [file, what] = requested_file(request);
      if (file == nullptr) {
        set_error(grpc::StatusCode::NOT_FOUND, absl::StrCat(what, " not found"), response);
        return;
      }
      std::set<std::string> seen;
      std::vector<std::string> files;
      add_file_and_imports(file, &seen, &files);
      for (std::string& bytes : files) {
        response->mutable_file_descriptor_response()->add_file_descriptor_proto(std::move(bytes));
      }
      return;
    }
    default:
      set_error(grpc::StatusCode::INVALID_ARGUMENT, "the request sets no message_request",
                response);
  }
}

// One package's service (Base: its generated Service).
template <typename Base, typename Request, typename Response>
class ReflectionService final : public Base {
 public:
  ReflectionService(std::vector<std::string> services, const TokenAuth* auth)
      : services_(std::move(services)), auth_(auth) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<Response, Request>* stream) override {
    if (auth_ != nullptr) {
      grpc::Status status = auth_->check(*context);
      if (!status.ok()) return status;
    }
    Request request;
    while (stream->Read(&request)) {
      Response response;
      answer(services_, request, &response);
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

 private:
  const std::vector<std::string> services_;
  const TokenAuth* const auth_;
};

namespace v1 = grpc::reflection::v1;
namespace v1alpha = grpc::reflection::v1alpha;

}  // namespace

std::vector<std::unique_ptr<grpc::Service>> make_reflection_services(
    std::vector<std::string> services, const TokenAuth* auth) {
  std::vector<std::unique_ptr<grpc::Service>> out;
  out.push_back(std::make_unique<ReflectionService<v1::ServerReflection::Service,
                                                   v1::ServerReflectionRequest,
                                                   v1::ServerReflectionResponse>>(services, auth));
  out.push_back(std::make_unique<ReflectionService<v1alpha::ServerReflection::Service,
                                                   v1alpha::ServerReflectionRequest,
                                                   v1alpha::ServerReflectionResponse>>(
      std::move(services), auth));
  return out;
}

}  // namespace flashserve::api
