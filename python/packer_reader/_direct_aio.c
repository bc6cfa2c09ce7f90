/* O_DIRECT batch reads for packer_reader through Linux native asynchronous I/O, loaded with
 * ctypes by _segment.py from the same library as the CRC (_lib/libpackercrc.so; plain C, no
 * Python.h, so ctypes releases the GIL for the whole call).
 *
 *   int packer_pread_batch(int n, const int32_t *fds, const int64_t *offs,
 *                          const int32_t *niov, const struct iovec *iov, int depth,
 *                          int8_t *status)
 *       Job k reads consecutive file bytes of descriptor fds[k] from offset offs[k] into its
 *       niov[k] buffers (the next niov[k] entries of iov, jobs in order), as one preadv would.
 *       depth jobs are kept in flight. status[k] is set to 0 where job k read every byte, 1
 *       where it failed or came back short (the caller reads those again another way). Returns
 *       the number of jobs with status 1, or -1 where native asynchronous I/O is not available
 *       (not Linux, io_setup refused) or failed: the caller then reads the whole batch another
 *       way (every read this call started has ended when it returns).
 *
 * Why: a shuffled batch of small records is one read per record. Issued from Python threads,
 * each read takes and releases the interpreter lock (about 45 000 reads/s on a 2-CPU machine,
 * below the disk's rate at queue depth 8); here a whole batch's reads cost one call. The
 * contexts (io_setup) are kept in a small pool and reused, as creating and destroying one per
 * batch costs more than the batch's small reads; a forked child starts with an empty pool.
 *
 * Build: with _crc32c_hw.c, scripts/build-crc.sh.
 */
#include <stdint.h>

#if defined(__linux__)
#include <errno.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define POOL 16 /* contexts kept for reuse (one per thread reading at a time) */

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static aio_context_t pool_ctx[POOL];
static int pool_nr[POOL];
static int pool_len;
static pid_t pool_pid;

static aio_context_t take_ctx(int depth, int *nr) {
    aio_context_t ctx = 0;
    pthread_mutex_lock(&pool_mu);
    if (pool_pid != getpid()) { /* a forked child: the parent's contexts are not ours */
        pool_len = 0;
        pool_pid = getpid();
    }
    for (int i = pool_len - 1; i >= 0; i--) {
        if (pool_nr[i] >= depth) {
            ctx = pool_ctx[i];
            *nr = pool_nr[i];
            pool_ctx[i] = pool_ctx[pool_len - 1];
            pool_nr[i] = pool_nr[pool_len - 1];
            pool_len--;
            break;
        }
    }
    pthread_mutex_unlock(&pool_mu);
    if (ctx != 0)
        return ctx;
    if (syscall(SYS_io_setup, depth, &ctx) != 0)
        return 0;
    *nr = depth;
    return ctx;
}

static void give_ctx(aio_context_t ctx, int nr) {
    pthread_mutex_lock(&pool_mu);
    if (pool_pid == getpid() && pool_len < POOL) {
        pool_ctx[pool_len] = ctx;
        pool_nr[pool_len] = nr;
        pool_len++;
        ctx = 0;
    }
    pthread_mutex_unlock(&pool_mu);
    if (ctx != 0)
        syscall(SYS_io_destroy, ctx);
}

int packer_pread_batch(int n, const int32_t *fds, const int64_t *offs, const int32_t *niov,
                       const struct iovec *iov, int depth, int8_t *status) {
    if (n <= 0)
        return 0;
    if (depth < 1)
        depth = 1;
    if (depth > n)
        depth = n;
    int nr = 0;
    aio_context_t ctx = take_ctx(depth, &nr);
    if (ctx == 0)
        return -1;
    struct iocb *cbs = calloc((size_t)depth, sizeof *cbs);
    struct iocb **sub = calloc((size_t)depth, sizeof *sub);
    int *freeslot = calloc((size_t)depth, sizeof *freeslot);
    int64_t *want = calloc((size_t)n, sizeof *want);
    size_t *first = calloc((size_t)n, sizeof *first);
    struct io_event *ev = calloc((size_t)depth, sizeof *ev);
    int failed = 0, nfree = 0, next = 0, done = 0, inflight = 0;
    if (!cbs || !sub || !freeslot || !want || !first || !ev) {
        failed = -1;
        goto out;
    }
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        first[k] = at;
        int64_t w = 0;
        for (int i = 0; i < niov[k]; i++)
            w += (int64_t)iov[at + (size_t)i].iov_len;
        want[k] = w;
        at += (size_t)niov[k];
    }
    for (int i = 0; i < depth; i++)
        freeslot[i] = i;
    nfree = depth;
    while (done < n) {
        int m = 0;
        while (nfree > 0 && next < n) {
            struct iocb *cb = &cbs[freeslot[--nfree]];
            memset(cb, 0, sizeof *cb);
            cb->aio_data = (uint64_t)next;
            cb->aio_lio_opcode = IOCB_CMD_PREADV;
            cb->aio_fildes = (uint32_t)fds[next];
            cb->aio_buf = (uint64_t)(uintptr_t)&iov[first[next]];
            cb->aio_nbytes = (uint64_t)niov[next];
            cb->aio_offset = offs[next];
            sub[m++] = cb;
            next++;
        }
        int s = 0;
        while (s < m) {
            long r = syscall(SYS_io_submit, ctx, (long)(m - s), sub + s);
            if (r > 0) {
                s += (int)r;
                inflight += (int)r;
                continue;
            }
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0 && errno == EAGAIN && inflight > 0)
                break; /* the rest waits for a completion */
            /* refused: the first unsubmitted job failed; the others are retried */
            struct iocb *cb = sub[s];
            status[cb->aio_data] = 1;
            failed++;
            done++;
            freeslot[nfree++] = (int)(cb - cbs);
            s++;
        }
        for (int i = s; i < m; i++) { /* not submitted: back in line, in order */
            freeslot[nfree++] = (int)(sub[i] - cbs);
        }
        if (s < m)
            next = (int)sub[s]->aio_data;
        if (inflight == 0)
            continue;
        long g = syscall(SYS_io_getevents, ctx, 1L, (long)depth, ev, NULL);
        if (g < 0) {
            if (errno == EINTR)
                continue;
            /* cannot happen with a valid context; give up on what is in flight */
            failed = -1;
            goto out;
        }
        for (long i = 0; i < g; i++) {
            struct iocb *cb = (struct iocb *)(uintptr_t)ev[i].obj;
            int k = (int)ev[i].data;
            if (ev[i].res != want[k]) {
                status[k] = 1;
                failed++;
            } else {
                status[k] = 0;
            }
            freeslot[nfree++] = (int)(cb - cbs);
            inflight--;
            done++;
        }
    }
out:
    if (failed < 0 && inflight > 0) {
        /* reads still in flight write into the caller's buffers: destroying the context
         * waits for them before the buffers can be reused */
        syscall(SYS_io_destroy, ctx);
        ctx = 0;
    }
    if (ctx != 0)
        give_ctx(ctx, nr);
    free(cbs);
    free(sub);
    free(freeslot);
    free(want);
    free(first);
    free(ev);
    return failed;
}

#else

int packer_pread_batch(int n, const int32_t *fds, const int64_t *offs, const int32_t *niov,
                       const void *iov, int depth, int8_t *status) {
    (void)n, (void)fds, (void)offs, (void)niov, (void)iov, (void)depth, (void)status;
    return -1;
}

#endif
