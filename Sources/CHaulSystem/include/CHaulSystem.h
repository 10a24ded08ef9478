#ifndef CHAUL_SYSTEM_H
#define CHAUL_SYSTEM_H

// Swift's Glibc module exports neither fallocate nor FALLOC_FL_KEEP_SIZE, nor syncfs.
#if defined(__linux__)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <unistd.h>
#include <linux/falloc.h>
#else
#include <errno.h>
#include <unistd.h>
#endif

/// Reserves blocks for `length` bytes at `offset` without changing the file size.
/// Returns 0, or -1 with errno set (EOPNOTSUPP where the platform has no fallocate).
static inline int haul_fallocate_keep_size(int fd, long long offset, long long length) {
#if defined(__linux__)
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
#else
    (void)fd; (void)offset; (void)length;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

/// Flushes every dirty page of the filesystem holding `fd` (Linux's syncfs), so a batch of
/// finished files costs one flush. Elsewhere, fsync of `fd` alone.
static inline int haul_syncfs(int fd) {
#if defined(__linux__)
    return syncfs(fd);
#else
    return fsync(fd);
#endif
}

#endif
