/*
 * Runs a fuzz target without libFuzzer, so every build exercises it: first each file of the
 * seed corpus given on the command line, then N inputs made by mutating the seeds with a
 * fixed-seed generator (same inputs every run). Build with -DBATON_FUZZ=ON and clang for
 * real coverage-guided fuzzing.
 *
 *   fuzz_x [--runs N] SEED_FILE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

typedef struct seed {
    unsigned char *data;
    size_t len;
} seed;

static unsigned long long rng = 0x9e3779b97f4a7c15ULL;

static unsigned next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 32);
}

int main(int argc, char **argv)
{
    long runs = 20000;
    seed seeds[64];
    int nseeds = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = atol(argv[++i]);
            continue;
        }
        FILE *f = fopen(argv[i], "rb");
        if (!f || nseeds == 64)
            continue;
        unsigned char *buf = malloc(65536);
        size_t n = fread(buf, 1, 65536, f);
        fclose(f);
        seeds[nseeds++] = (seed){buf, n};
        LLVMFuzzerTestOneInput(buf, n);
    }
    unsigned char buf[4096];
    for (long r = 0; r < runs; r++) {
        size_t len = 0;
        if (nseeds) {
            seed *s = &seeds[next() % (unsigned)nseeds];
            len = s->len < sizeof buf ? s->len : sizeof buf;
            memcpy(buf, s->data, len);
        }
        int edits = 1 + (int)(next() % 8);
        for (int e = 0; e < edits; e++) {
            unsigned op = next() % 4, pos = len ? next() % (unsigned)len : 0;
            if (op == 0 && len) /* flip a byte */
                buf[pos] = (unsigned char)next();
            else if (op == 1 && len < sizeof buf) { /* insert */
                memmove(buf + pos + 1, buf + pos, len - pos);
                buf[pos] = (unsigned char)"\r\n*$:0123456789@/[]%{}"[next() % 22];
                len++;
            } else if (op == 2 && len) { /* delete */
                memmove(buf + pos, buf + pos + 1, len - pos - 1);
                len--;
            } else if (op == 3 && len) /* truncate */
                len = pos;
        }
        LLVMFuzzerTestOneInput(buf, len);
    }
    for (int i = 0; i < nseeds; i++)
        free(seeds[i].data);
    printf("%ld inputs, no crash\n", runs + nseeds);
    return 0;
}
