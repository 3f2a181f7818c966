/*
 * An LD_PRELOAD shim that makes writes or flushes of chosen files fail, for the storage-fault
 * tests (std-host/tests/server/faults.rs). Built with the machine's C compiler:
 *
 *     cc -shared -fPIC -O2 -o fault-shim.so fault-shim.c -ldl
 *
 * Configured by the environment:
 *   TASKSTREAM_FAULT_OP     write | fdatasync   which call fails (write covers write, pwrite,
 *                                               pwrite64, writev; fdatasync covers fsync too)
 *   TASKSTREAM_FAULT_PATH   a substring of the file's path; only calls on such files count
 *   TASKSTREAM_FAULT_AFTER  how many such calls succeed before the first failure (default 0)
 *   TASKSTREAM_FAULT_ERRNO  ENOSPC | EIO (default ENOSPC)
 *   TASKSTREAM_FAULT_PARTIAL  1: the first failing write first writes half its bytes and
 *                             returns that short count (a write that filled the disk midway)
 * Once a call failed, every later matching call fails too (a full disk stays full; a device
 * that failed a flush is not trusted again). Nothing else is touched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long calls;
static int failing;

static int op_is(const char *op) {
    const char *want = getenv("TASKSTREAM_FAULT_OP");
    return want != NULL && strcmp(want, op) == 0;
}

static int fd_matches(int fd) {
    const char *needle = getenv("TASKSTREAM_FAULT_PATH");
    char link[64];
    char path[4096];
    ssize_t n;
    if (needle == NULL || fd < 0) {
        return 0;
    }
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof path - 1);
    if (n <= 0) {
        return 0;
    }
    path[n] = '\0';
    return strstr(path, needle) != NULL;
}

static int fault_errno(void) {
    const char *e = getenv("TASKSTREAM_FAULT_ERRNO");
    if (e != NULL && strcmp(e, "EIO") == 0) {
        return EIO;
    }
    return ENOSPC;
}

/* 0: let the call through; 1: fail it; 2: the first failure, written partially. */
static int decide(const char *op, int fd) {
    long after;
    const char *a;
    if (!op_is(op) || !fd_matches(fd)) {
        return 0;
    }
    if (__atomic_load_n(&failing, __ATOMIC_SEQ_CST)) {
        return 1;
    }
    a = getenv("TASKSTREAM_FAULT_AFTER");
    after = a != NULL ? atol(a) : 0;
    if (__atomic_fetch_add(&calls, 1, __ATOMIC_SEQ_CST) < after) {
        return 0;
    }
    if (__atomic_exchange_n(&failing, 1, __ATOMIC_SEQ_CST)) {
        return 1;
    }
    a = getenv("TASKSTREAM_FAULT_PARTIAL");
    return a != NULL && strcmp(a, "1") == 0 ? 2 : 1;
}

#define REAL(name, ret, ...)                                                                   \
    static ret (*real_##name)(__VA_ARGS__);                                                    \
    if (real_##name == NULL) {                                                                 \
        real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name);                            \
    }

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write, ssize_t, int, const void *, size_t);
    switch (decide("write", fd)) {
    case 2:
        if (count > 1) {
            return real_write(fd, buf, count / 2);
        }
        /* fall through */
    case 1:
        errno = fault_errno();
        return -1;
    default:
        return real_write(fd, buf, count);
    }
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    REAL(writev, ssize_t, int, const struct iovec *, int);
    if (decide("write", fd)) {
        errno = fault_errno();
        return -1;
    }
    return real_writev(fd, iov, n);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off) {
    REAL(pwrite, ssize_t, int, const void *, size_t, off_t);
    if (decide("write", fd)) {
        errno = fault_errno();
        return -1;
    }
    return real_pwrite(fd, buf, count, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off) {
    REAL(pwrite64, ssize_t, int, const void *, size_t, off_t);
    if (decide("write", fd)) {
        errno = fault_errno();
        return -1;
    }
    return real_pwrite64(fd, buf, count, off);
}

int fdatasync(int fd) {
    REAL(fdatasync, int, int);
    if (decide("fdatasync", fd)) {
        errno = fault_errno();
        return -1;
    }
    return real_fdatasync(fd);
}

int fsync(int fd) {
    REAL(fsync, int, int);
    if (decide("fdatasync", fd)) {
        errno = fault_errno();
        return -1;
    }
    return real_fsync(fd);
}
