#!/bin/sh
# Runs one test program with a throw-away certificate authority and certificates
# (scripts/tls-lib.sh) in BATON_TEST_TLS_DIR, and a private plain redis-server
# (with-redis.sh); the program starts its TLS servers itself, each with the certificates
# its case needs. The directory goes whatever happens.
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/tls-lib.sh"
BATON_TEST_TLS_DIR=$(mktemp -d /tmp/baton-tls.XXXXXX) || exit 1
trap 'rm -rf "$BATON_TEST_TLS_DIR"' EXIT INT TERM
tls_make_certs "$BATON_TEST_TLS_DIR" || { echo "could not make test certificates" >&2; exit 1; }
export BATON_TEST_TLS_DIR
"$top/tests/with-redis.sh" "$@"
