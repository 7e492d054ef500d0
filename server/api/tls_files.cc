#include "server/api/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace flashserve::api {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Certificate = std::unique_ptr<X509, X509Free>;
using PrivateKey = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::Status bad(absl::string_view flag, const std::string& path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", path, "' ", problem));
}

absl::StatusOr<std::string> read_file(absl::string_view flag, const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) return bad(flag, path, "cannot be read");
  return text.str();
}

std::unique_ptr<BIO, BioFree> memory_bio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The first certificate of a PEM chain; null when there is none.
Certificate first_certificate(const std::string& pem) {
  Certificate cert(PEM_read_bio_X509(memory_bio(pem).get(), nullptr, nullptr, nullptr));
  ERR_clear_error();  // a failed parse leaves errors on this thread's queue
  return cert;
}

// Never asks for a passphrase (OpenSSL's default would prompt on the terminal): an
// encrypted key is refused.
int no_passphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*user*/) { return 0; }

PrivateKey private_key(const std::string& pem) {
  PrivateKey key(PEM_read_bio_PrivateKey(memory_bio(pem).get(), nullptr, no_passphrase, nullptr));
  ERR_clear_error();
  return key;
}

// "2026-12-31T23:59:59Z"; "" when OpenSSL cannot convert the time.
std::string iso_time(const ASN1_TIME* time) {
  std::tm tm = {};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return "";
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

absl::StatusOr<TlsFiles> read_tls_files(const TlsOptions& tls) {
  TlsFiles files;
  ASSIGN_OR_RETURN(files.cert_pem, read_file("tls-cert", tls.cert_path));
  ASSIGN_OR_RETURN(files.key_pem, read_file("tls-key", tls.key_path));
  const Certificate cert = first_certificate(files.cert_pem);
  if (cert == nullptr) return bad("tls-cert", tls.cert_path, "holds no PEM certificate");
  const PrivateKey key = private_key(files.key_pem);
  if (key == nullptr) {
    return bad("tls-key", tls.key_path, "holds no PEM private key (or an encrypted one)");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key: '", tls.key_path, "': the key does not match the certificate "
                     "of --tls-cert '", tls.cert_path, "'"));
  }
  const ASN1_TIME* not_after = X509_get0_notAfter(cert.get());
  files.not_after = iso_time(not_after);
  files.expired = X509_cmp_current_time(not_after) < 0;
  if (!tls.client_ca_path.empty()) {
    ASSIGN_OR_RETURN(files.client_ca_pem, read_file("tls-client-ca", tls.client_ca_path));
    if (first_certificate(files.client_ca_pem) == nullptr) {
      return bad("tls-client-ca", tls.client_ca_path, "holds no PEM certificate");
    }
  }
  return files;
}

}  // namespace flashserve::api
