# Shell functions shared by the TLS tests and the benchmark: a throw-away certificate
# authority and certificates made with the openssl command, in a directory of the caller's.
# tls_make_certs DIR writes there:
#   ca.crt ca.key              the test CA (trusted by the tests through tls_ca)
#   server.crt server.key      for 127.0.0.1, ::1 and localhost, signed by the CA
#   client.crt client.key      a client certificate for mutual TLS, signed by the CA
#   expired.crt                the server's key, signed by the CA, expired yesterday
#   other-ca.crt other.crt other.key   a second CA and a server certificate it signed
#   cn-only.crt cn-only.key    signed by the CA, CN=localhost and no subjectAltName (no host
#                              name may match it: there is no common-name fallback)
# EC P-256 keys: made in milliseconds, unlike RSA.

_tls_key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

# _tls_validity DAYS: the openssl x509 options for a certificate valid from now for DAYS days,
# or, for DAYS < 0, one that ended -DAYS days ago. OpenSSL 3.0 (Debian 12) takes -days -1;
# OpenSSL 3.4+ (3.5 on Debian 13) refuses an end before the start ("end date before start
# date") and has -not_before/-not_after instead.
_tls_validity() {
    if [ "$1" -ge 0 ]; then
        echo "-days $1"
    elif openssl x509 -help 2>&1 | grep -q -- '-not_after'; then
        echo "-not_before $(date -u -d "$(( 1 - $1 )) days ago" +%Y%m%d%H%M%SZ)" \
            "-not_after $(date -u -d "$(( -$1 )) days ago" +%Y%m%d%H%M%SZ)"
    else
        echo "-days $1"
    fi
}

# _tls_sign DIR NAME CA EXT DAYS [CN]: NAME.crt for NAME.key, signed by CA, with extensions
# EXT and the common name CN ("baton test NAME" when not given)
_tls_sign() {
    openssl req -new -key "$1/$2.key" -subj "/CN=${6:-baton test $2}" -out "$1/$2.csr" 2>/dev/null &&
    printf '%s\n' "$4" > "$1/$2.ext" &&
    # shellcheck disable=SC2046
    openssl x509 -req -in "$1/$2.csr" -CA "$1/$3.crt" -CAkey "$1/$3.key" -CAcreateserial \
        $(_tls_validity "$5") -extfile "$1/$2.ext" -out "$1/$2.crt" 2>/dev/null
}

tls_make_certs() {
    _d=$1
    _server_ext='subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost
extendedKeyUsage=serverAuth'
    for _ca in ca other-ca; do
        _tls_key "$_d/$_ca.key" &&
        openssl req -x509 -new -key "$_d/$_ca.key" -subj "/CN=baton test $_ca" -days 2 \
            -out "$_d/$_ca.crt" 2>/dev/null || return 1
    done
    _tls_key "$_d/server.key" && _tls_key "$_d/client.key" && _tls_key "$_d/other.key" &&
    _tls_sign "$_d" server ca "$_server_ext" 2 &&
    _tls_sign "$_d" client ca 'extendedKeyUsage=clientAuth' 2 &&
    _tls_sign "$_d" other other-ca "$_server_ext" 2 || return 1
    # expired: the server's own key, a certificate that ended yesterday
    cp "$_d/server.key" "$_d/expired.key" &&
    _tls_sign "$_d" expired ca "$_server_ext" -1 || return 1
    # a certificate from the trusted CA for the address but not for the name "localhost":
    # a host a hostile sentinel names (tests/net/test_tls.c)
    cp "$_d/server.key" "$_d/evil.key" &&
    _tls_sign "$_d" evil ca 'subjectAltName=IP:127.0.0.1,DNS:evil.example
extendedKeyUsage=serverAuth' 2 || return 1
    cp "$_d/server.key" "$_d/cn-only.key" &&
    _tls_sign "$_d" cn-only ca 'extendedKeyUsage=serverAuth' 2 localhost || return 1
    rm -f "$_d"/*.csr "$_d"/*.ext "$_d"/*.srl
}

# The redis-server arguments that serve TLS on port $2 with the certificates of $1 (clients
# may present a certificate; tls-auth-clients yes is for the tests that require one).
tls_server_args() {
    printf -- '--tls-port %s --tls-cert-file %s/server.crt --tls-key-file %s/server.key --tls-ca-cert-file %s/ca.crt --tls-auth-clients optional' \
        "$2" "$1" "$1" "$1"
}
