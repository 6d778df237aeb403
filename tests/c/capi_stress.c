/* A stress program for CuMem's C ABI (include/cumem.h), for `make sanitize` (built with
 * -fsanitize=address against an AddressSanitizer build of libcumem.so) and for the
 * stress figures of docs/reliability.md (built against the release library).
 *
 *   capi_stress [threads] [operations per thread] [seed]
 *
 * Each thread allocates blocks of 1 byte to 1 MiB (log-uniform), fills them with a
 * pattern of its own (memset, or an upload), checks the first and last 64 bytes of a
 * block before freeing it (a download), frees blocks of other threads now and then
 * (handed over through a shared slot), allocates on a stream of its own with
 * asynchronous uploads from pinned host blocks that it frees at once (the pinned pool
 * must keep them until the copy has run), and releases the cache now and then. Under
 * CUMEM_FAULT, out of memory and device errors are expected and counted; any other
 * error, a pattern that does not match, or memory left reserved after everything was
 * freed and reclaimed fails the run. Prints one line of figures (with the process's
 * RSS at the end and its peak); exit status 0 only when clean.
 */
#include "cumem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 48
#define EDGE 64

typedef struct {
    uint64_t ptr, bytes;
    uint8_t pattern;
    int known; /* 0 after a failed fill: contents unknown, not checked */
} block_t;

static atomic_ullong ops, faults, corruptions, unexpected, checked;
static atomic_ullong handoff[16]; /* blocks passed between threads: ptr, 0 when empty */
static atomic_ullong handoff_bytes[16];
static uint64_t ops_per_thread = 20000;
static unsigned nthreads = 4;

static uint64_t next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* An error is expected under CUMEM_FAULT (out of memory, device errors) or a real
 * failure (anything else): counted either way; returns whether the call succeeded. */
static int ok(int32_t code, const char *what) {
    if (code == CUMEM_SUCCESS) return 1;
    if (code == CUMEM_ERROR_OUT_OF_MEMORY || code == CUMEM_ERROR_DEVICE) {
        atomic_fetch_add(&faults, 1);
        return 0;
    }
    atomic_fetch_add(&unexpected, 1);
    fprintf(stderr, "capi_stress: %s: code %d: %s\n", what, code, cumem_last_error());
    return 0;
}

static void check_block(const block_t *b) {
    if (!b->known || b->bytes == 0) return;
    uint8_t buf[EDGE];
    uint64_t n = b->bytes < EDGE ? b->bytes : EDGE;
    for (int end = 0; end < 2; end++) {
        uint64_t off = end ? b->bytes - n : 0;
        if (!ok(cumem_copy_dtoh(buf, b->ptr + off, n), "cumem_copy_dtoh")) return;
        for (uint64_t i = 0; i < n; i++)
            if (buf[i] != b->pattern) {
                atomic_fetch_add(&corruptions, 1);
                fprintf(stderr, "capi_stress: block %#llx+%llu: byte %llu is %u, not %u\n",
                        (unsigned long long)b->ptr, (unsigned long long)b->bytes,
                        (unsigned long long)(off + i), buf[i], b->pattern);
                return;
            }
    }
    atomic_fetch_add(&checked, 1);
}

static void fill(block_t *b, uint64_t *rng) {
    b->known = 0;
    if (next(rng) % 2 == 0) {
        b->known = ok(cumem_memset(b->ptr, b->pattern, b->bytes), "cumem_memset");
    } else {
        uint8_t *h = malloc(b->bytes);
        if (!h) return;
        memset(h, b->pattern, b->bytes);
        b->known = ok(cumem_copy_htod(b->ptr, h, b->bytes), "cumem_copy_htod");
        free(h);
    }
}

/* An upload on `stream` from a pinned block freed at once, behind whatever the stream
 * still runs; checked after a synchronize. */
static void pinned_upload(uint64_t stream, uint64_t *rng) {
    uint64_t bytes = 4096 + next(rng) % (256 << 10), d = 0;
    uint8_t pattern = (uint8_t)(next(rng) | 1);
    void *h = NULL;
    if (!ok(cumem_alloc_async(bytes, stream, &d, 0), "cumem_alloc_async")) return;
    if (ok(cumem_host_alloc(bytes, &h), "cumem_host_alloc")) {
        memset(h, pattern, bytes);
        int queued = ok(cumem_copy_htod_async(d, h, bytes, stream), "cumem_copy_htod_async");
        ok(cumem_host_free(h), "cumem_host_free");
        void *h2 = NULL; /* the next pinned block of that size must not be h while queued */
        if (ok(cumem_host_alloc(bytes, &h2), "cumem_host_alloc")) {
            memset(h2, (uint8_t)~pattern, bytes);
            ok(cumem_host_free(h2), "cumem_host_free");
        }
        if (queued && ok(cumem_stream_synchronize(stream), "cumem_stream_synchronize")) {
            block_t b = {d, bytes, pattern, 1};
            check_block(&b);
        }
    }
    ok(cumem_free(d), "cumem_free");
}

static void *worker(void *arg) {
    unsigned t = (unsigned)(uintptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (t + 1) ^ 0xD1B54A32D192ED03ULL;
    block_t live[SLOTS];
    memset(live, 0, sizeof live);
    uint64_t stream = 0;
    if (!ok(cumem_stream_create(0, &stream), "cumem_stream_create")) stream = 0;
    for (uint64_t i = 0; i < ops_per_thread; i++) {
        uint64_t r = next(&rng);
        block_t *b = &live[r % SLOTS];
        if (b->ptr) { /* free it, after checking its pattern */
            check_block(b);
            unsigned k = (unsigned)((r >> 8) % 16);
            unsigned long long empty = 0;
            if ((r >> 16) % 8 == 0 &&
                atomic_compare_exchange_strong(&handoff[k], &empty, b->ptr)) {
                atomic_store(&handoff_bytes[k], b->bytes); /* another thread frees it */
            } else {
                ok(cumem_free(b->ptr), "cumem_free");
            }
            b->ptr = 0;
        } else {
            /* log-uniform from 1 byte to 1 MiB */
            uint64_t bytes = 1 + (next(&rng) % ((1ULL << (1 + next(&rng) % 20))));
            if (ok(cumem_alloc(bytes, &b->ptr), "cumem_alloc")) {
                b->bytes = bytes;
                b->pattern = (uint8_t)(next(&rng) | 1);
                fill(b, &rng);
            } else {
                b->ptr = 0;
            }
        }
        if (r % 64 == 1) { /* free a block another thread handed over */
            unsigned k = (unsigned)((r >> 24) % 16);
            unsigned long long p = atomic_exchange(&handoff[k], 0);
            if (p) ok(cumem_free(p), "cumem_free (handed over)");
        }
        if (stream && r % 97 == 2) pinned_upload(stream, &rng);
        if (r % 1009 == 3) cumem_reclaim(r % 2 ? UINT64_MAX : (1 << 20));
        atomic_fetch_add(&ops, 1);
    }
    for (int s = 0; s < SLOTS; s++)
        if (live[s].ptr) {
            check_block(&live[s]);
            ok(cumem_free(live[s].ptr), "cumem_free");
        }
    if (stream) ok(cumem_stream_destroy(stream), "cumem_stream_destroy");
    return NULL;
}

/* A line of /proc/self/status in KiB (VmRSS, VmHWM), 0 if unreadable. */
static unsigned long long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long v = 0;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

int main(int argc, char **argv) {
    if (argc > 1) nthreads = (unsigned)atoi(argv[1]);
    if (argc > 2) ops_per_thread = strtoull(argv[2], NULL, 10);
    if (nthreads < 1 || nthreads > 64) nthreads = 4;
    if (cumem_init() != CUMEM_SUCCESS) {
        fprintf(stderr, "capi_stress: cumem_init: %s\n", cumem_last_error());
        return 2;
    }
    pthread_t th[64];
    for (unsigned t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    for (int k = 0; k < 16; k++) {
        unsigned long long p = atomic_exchange(&handoff[k], 0);
        if (p) ok(cumem_free(p), "cumem_free (handed over)");
    }
    cumem_reclaim(UINT64_MAX);
    cumem_host_reclaim(UINT64_MAX);
    cumem_stats_t st, hst;
    int leak = 1;
    if (cumem_get_stats(&st) == CUMEM_SUCCESS && cumem_host_get_stats(&hst) == CUMEM_SUCCESS)
        leak = st.reserved_bytes != 0 || st.allocated_bytes != 0 || hst.allocated_bytes != 0 ||
               hst.reserved_bytes != 0 || st.num_allocations != st.num_frees;
    printf("capi_stress: %s pool on %s: %u threads, %llu operations, %llu blocks checked, "
           "%llu injected or out-of-memory errors, %llu unexpected errors, %llu corrupted, "
           "after freeing all and reclaim: reserved %llu bytes, pinned %llu bytes (%s); "
           "RSS %llu MiB (peak %llu MiB)\n",
           cumem_pool_name(), cumem_device_name(), nthreads, (unsigned long long)ops,
           (unsigned long long)checked, (unsigned long long)faults, (unsigned long long)unexpected,
           (unsigned long long)corruptions, (unsigned long long)st.reserved_bytes,
           (unsigned long long)hst.reserved_bytes, leak ? "LEAK" : "clean", status_kib("VmRSS") >> 10,
           status_kib("VmHWM") >> 10);
    return (corruptions || unexpected || leak) ? 1 : 0;
}
