#pragma once
// The PEM files of --tls-cert, --tls-key and --tls-client-ca, read and checked with OpenSSL
// before gRPC sees them, so that a wrong file is refused at start with its reason (gRPC only
// reports "cannot listen" and writes the cause to its own log):
//   - every file holds PEM data of the right kind (a certificate, a private key);
//   - the key matches the certificate ("the key does not match the certificate");
//   - the server certificate's expiry date is read, so that the server can warn at start
//     when it has passed (clients that check it will refuse every handshake).
// Messages name the flag and the file.
#include <string>

#include "absl/status/statusor.h"
#include "server/api/server_options.h"

namespace flashserve::api {

struct TlsFiles {
  std::string cert_pem;       // --tls-cert: the chain, server certificate first
  std::string key_pem;        // --tls-key
  std::string client_ca_pem;  // --tls-client-ca ("" = none)
  std::string not_after;      // the server certificate's expiry, "2026-12-31T23:59:59Z"
  bool expired = false;       // not_after has passed
};

// Reads and checks the files of `tls` (cert_path must be set). InvalidArgument naming the
// flag and file when one cannot be read, holds no PEM data of its kind, or when the key does
// not match the certificate.
absl::StatusOr<TlsFiles> read_tls_files(const TlsOptions& tls);

}  // namespace flashserve::api
