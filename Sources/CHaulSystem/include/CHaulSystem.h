#ifndef CHAUL_SYSTEM_H
#define CHAUL_SYSTEM_H

// Swift's Glibc module exports neither fallocate nor FALLOC_FL_KEEP_SIZE, nor syncfs.
#if defined(__linux__)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
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

/// Renames `from` to `to` unless something is at `to` already (then fails with EEXIST): the
/// check and the rename in one step, so no file that appears meanwhile is replaced. Where the
/// kernel or filesystem cannot (EINVAL, ENOSYS), -1 with that errno: the caller checks and renames.
/// Both names are taken relative to the folder `dir` (AT_FDCWD: the current folder).
static inline int haul_rename_noreplace(int dir, const char *from, const char *to) {
#if defined(__linux__) && defined(RENAME_NOREPLACE)
    return renameat2(dir, from, dir, to, RENAME_NOREPLACE);
#else
    (void)dir; (void)from; (void)to;
    errno = ENOSYS;
    return -1;
#endif
}

/// Opens a new regular file without a name in the folder `folder`, taken relative to `dir`
/// (Linux's O_TMPFILE), for reading and writing. Returns the descriptor, or -1 with errno set
/// where the kernel or the filesystem cannot (EOPNOTSUPP, EISDIR, EINVAL; ENOSYS elsewhere).
static inline int haul_open_unnamed(int dir, const char *folder) {
#if defined(__linux__) && defined(O_TMPFILE)
    return openat(dir, folder, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
#else
    (void)dir; (void)folder;
    errno = ENOSYS;
    return -1;
#endif
}

/// Gives the file open at `fd` the name `to` (relative to the folder `dir`), failing with EEXIST
/// when something is there: the check and the naming in one step. Works for a file opened with
/// haul_open_unnamed.
///
/// The descriptor is linked directly (AT_EMPTY_PATH), which Linux allows since 6.10 to the
/// process that opened the file and before that only with a privilege; where it is refused,
/// through /proc/self/fd from then on.
static inline int haul_link_descriptor(int fd, int dir, const char *to) {
#if defined(__linux__)
#if defined(AT_EMPTY_PATH)
    static _Atomic int direct_refused = 0;
    int tried_direct = !direct_refused;
    if (tried_direct) {
        if (linkat(fd, "", dir, to, AT_EMPTY_PATH) == 0) return 0;
        // A refusal is ENOENT (or EPERM); ENOENT may also mean a missing folder, so only a
        // link that then works the other way proves it.
        if (errno != EPERM && errno != ENOENT && errno != EINVAL) return -1;
    }
#endif
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int result = linkat(AT_FDCWD, path, dir, to, AT_SYMLINK_FOLLOW);
#if defined(AT_EMPTY_PATH)
    if (result == 0 && tried_direct) direct_refused = 1;
#endif
    return result;
#else
    (void)fd; (void)dir; (void)to;
    errno = ENOSYS;
    return -1;
#endif
}

/// Opens the folder `path` (relative, several components) beneath the folder `root`, for use
/// as the `dir` of the calls above: no component may lead outside `root`, by `..` or by a
/// symbolic link (Linux's openat2 with RESOLVE_BENEATH; EXDEV when one would). Where openat2
/// is missing, -1 with ENOSYS (before Linux 5.6): the caller then opens each component without
/// following links. Returns the descriptor, or -1 with errno set.
static inline int haul_open_folder_beneath(int root, const char *path) {
#if defined(__linux__) && defined(SYS_openat2)
    struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC, .mode = 0,
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
    long fd = syscall(SYS_openat2, root, path, &how, sizeof how);
    return (int)fd;
#else
    (void)root; (void)path;
    errno = ENOSYS;
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

/// The `statfs` magic number of the file system holding `path` (Linux), or -1 when it cannot
/// be read (and elsewhere).
static inline long long haul_file_system_type(const char *path) {
#if defined(__linux__)
    struct statfs info;
    return statfs(path, &info) == 0 ? (long long)info.f_type : -1;
#else
    (void)path;
    return -1;
#endif
}

/// Reads up to `count` bytes at `offset` of `fd` into `buffer` only if that needs no wait on
/// the disk: the bytes are in the page cache (Linux's preadv2 with RWF_NOWAIT; fewer bytes when
/// only some are). Returns how many were read, or -1 with errno set: EAGAIN when the read would
/// wait, and where the kernel, the file system or the platform cannot tell (EOPNOTSUPP, ENOSYS).
static inline long haul_pread_nowait(int fd, void *buffer, long count, long long offset) {
#if defined(__linux__) && defined(SYS_preadv2) && __SIZEOF_LONG__ == 8
    // By the system call, not glibc's preadv2: <sys/uio.h> under _GNU_SOURCE defines fd_set
    // unlike Dispatch's module, which a clean build refuses. The vector has struct iovec's
    // layout; RWF_NOWAIT is 8 in Linux's ABI; on 64-bit the offset goes whole in its low half.
    struct { void *base; unsigned long length; } part = { buffer, (unsigned long)count };
    return syscall(SYS_preadv2, fd, &part, 1, (unsigned long)offset, 0UL, 8);
#else
    (void)fd; (void)buffer; (void)count; (void)offset;
    errno = ENOSYS;
    return -1;
#endif
}

/// Two malloc arenas instead of one a thread, and allocations from `mmapThreshold` bytes on
/// straight from and back to the system (glibc); nothing elsewhere.
static inline void haul_tune_malloc(int mmapThreshold) {
#if defined(__linux__) && defined(M_ARENA_MAX)
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_MMAP_THRESHOLD, mmapThreshold);
#else
    (void)mmapThreshold;
#endif
}

#endif
