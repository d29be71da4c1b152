/*
 * The consumer of tests/vendor/: links libbaton through its public header only and prints
 * its version, and that an empty URL is refused.
 */
#include <baton/baton.h>

#include <stdio.h>

int main(void)
{
    baton_client *c = NULL;
    int rc = baton_client_open_url("", &c);
    printf("libbaton %s: empty URL: %s\n", baton_version(), baton_strerror(rc));
    return rc == BATON_EINVAL ? 0 : 1;
}
