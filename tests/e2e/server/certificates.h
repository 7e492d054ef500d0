#pragma once
// Certificates for the TLS e2e tests, made by the openssl command line inside the test (EC
// P-256 keys: fast to make) in a fresh folder:
//   ca.pem/.key, other-ca.pem/.key      two CAs
//   server.pem/.key                      localhost / 127.0.0.1, signed by ca, valid for a day
//   client.pem/.key, stranger.pem/.key   client certificates signed by ca and by other-ca
//   expired.pem/.key                     a server certificate of ca valid only on 2020-01-01
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace flashserve::e2e {

inline std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// True when openssl made every file; its output is in DIR/openssl.log.
inline bool make_certificates(const std::string& dir) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; cd " + dir + "; exec >openssl.log 2>&1\n"
      "for ca in ca other-ca; do openssl req -x509 " + key + " -days 1 -subj /CN=$ca "
      "-keyout $ca.key -out $ca.pem; done\n"
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext\n"
      "openssl req " + key + " -subj /CN=localhost -keyout server.key -out server.csr\n"
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
      "-extfile san.ext -out server.pem\n"
      "for c in client:ca stranger:other-ca; do n=${c%%:*}; ca=${c##*:}; "
      "openssl req " + key + " -subj /CN=$n -keyout $n.key -out $n.csr; "
      "openssl x509 -req -in $n.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -days 1 "
      "-out $n.pem; done\n"
      // `openssl ca` takes explicit dates (x509 -req only takes a positive -days).
      "printf '[ca]\\ndefault_ca=old\\n[old]\\ndatabase=index.txt\\nnew_certs_dir=.\\n"
      "serial=ca.srl\\ndefault_md=sha256\\npolicy=any\\n[any]\\ncommonName=supplied\\n' "
      "> old-ca.cnf; touch index.txt\n"
      "openssl req " + key + " -subj /CN=localhost -keyout expired.key -out expired.csr\n"
      "openssl ca -batch -config old-ca.cnf -cert ca.pem -keyfile ca.key "
      "-startdate 20200101000000Z -enddate 20200102000000Z -in expired.csr -out expired.pem\n";
  return std::system(script.c_str()) == 0;
}

}  // namespace flashserve::e2e
