#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CHaulSystem
import Foundation
import NIOCore
import Synchronization

/// The open `DEST.part` of one download: positional writes, flushes, and the lock that
/// makes its process the only writer.
///
/// The lock is `flock` on the part file itself, released when the descriptor closes (also
/// when the process dies, so a `kill -9` never leaves a stale lock).
///
/// A small download starts in a part file without a name (``unnamed(path:)``) and gets its
/// name only when a checkpoint is due (``name()``): most small files are complete before
/// that, and go from no name straight to their final one. One directory entry a file instead
/// of two, and none at all for a download that a crash cuts short (the system frees the file).
final class PartFile: Sendable {
    /// Where the part file is, or will be once it has a name: `DEST.part`.
    let path: String
    let descriptor: Int32
    /// The folder held open for a confined download; nil: paths are taken as they are.
    let folder: DownloadFolder?
    /// The part file's name for the `*at` system calls: relative to ``folder`` when there is
    /// one, else ``path`` itself.
    let localName: String
    /// Whether the file has the part file's name, or its bytes were put at their final name
    /// straight from no name (``whileUnnamed(_:)``): then it never takes the part file's name.
    private enum Naming { case unnamed, named, placed }
    private let naming: Mutex<Naming>
    /// The file was made empty by this download (an unnamed one): nobody else has written to it,
    /// so its size is what this download wrote, and nothing in it needs to be forgotten.
    let startedEmpty: Bool

    /// Opens or creates the part file, without locking it. A symbolic link, a folder or a file
    /// with other hard links at `path` is someone else's: it is neither opened nor followed.
    ///
    /// - Parameter folder: the folder of `path`, held open (a confined download).
    init(path: String, in folder: DownloadFolder? = nil) throws(DownloadError) {
        self.path = path
        self.folder = folder
        localName = folder == nil ? path : FilePaths.name(of: path)
        // O_NONBLOCK: a FIFO planted at the name must not hang the open.
        let fd = openat(folder?.descriptor ?? AT_FDCWD, localName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o644)
        guard fd >= 0 else {
            if errno == ELOOP || errno == EISDIR || errno == ENXIO { throw Self.foreign(path) }
            throw .io("write to", path: path, errno: errno)
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1 else {
            close(fd)
            throw Self.foreign(path)
        }
        descriptor = fd
        naming = Mutex(.named)
        startedEmpty = false
    }

    private init(unnamed descriptor: Int32, path: String, folder: DownloadFolder?) {
        self.path = path
        self.descriptor = descriptor
        self.folder = folder
        localName = folder == nil ? path : FilePaths.name(of: path)
        naming = Mutex(.unnamed)
        startedEmpty = true
    }

    deinit { close(descriptor) }

    /// The error for something at `path` that is not a part file Haul may write. Found before
    /// the download starts it is stepped around (``isForeign(_:)``); appearing between that
    /// look and the open, it fails the download.
    static func foreign(_ path: String) -> DownloadError {
        .io(
            "\(path) is a symbolic link, a folder or a file with other links: not Haul's part file, so it is left alone; remove it or choose another name",
            path: path)
    }

    /// Whether something is at `path` that ``init(path:in:)`` would refuse to open (a symbolic
    /// link, a folder, a device, a file with other hard links): one `lstat`.
    static func isForeign(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        return (info.st_mode & S_IFMT) != S_IFREG || info.st_nlink != 1
    }

    /// The folder descriptor the `*at` system calls take names relative to.
    var directory: Int32 { folder?.descriptor ?? AT_FDCWD }

    /// `path` (a file beside the part file) as the `*at` system calls take it, with ``directory``.
    func relativeName(_ path: String) -> String {
        folder == nil ? path : FilePaths.name(of: path)
    }

    /// A new part file without a name, in the folder of `path` (its name to be), or nil where
    /// the system cannot make one (a filesystem without `O_TMPFILE`, no `/proc`): then the
    /// caller makes a named one.
    static func unnamed(path: String, in folder: DownloadFolder? = nil) -> PartFile? {
        guard canLinkDescriptors else { return nil }
        let fd = if let folder { haul_open_unnamed(folder.descriptor, ".") } else { haul_open_unnamed(AT_FDCWD, FilePaths.folder(of: path)) }
        return fd >= 0 ? PartFile(unnamed: fd, path: path, folder: folder) : nil
    }

    /// Whether a descriptor can surely be given a name later: ``name()`` links it directly where
    /// the system allows, else through `/proc/self/fd`.
    private static let canLinkDescriptors = access("/proc/self/fd", X_OK) == 0

    /// Whether the file has its name, `path`.
    var isNamed: Bool { naming.withLock { $0 == .named } }

    /// Gives an unnamed part file its name `path`, locked before it is visible so that no
    /// other writer can take it in between. Does nothing for a named one.
    ///
    /// - Returns: false when something is at `path` already (another process downloads the
    ///   same file), or when the bytes are at their final name already (a checkpoint that
    ///   comes after the file was put in place): the file stays as it is.
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/io``) when the name cannot be made.
    func name() throws(DownloadError) -> Bool {
        try naming.withLock { (naming: inout Naming) throws(DownloadError) -> Bool in
            switch naming {
            case .named: return true
            case .placed: return false
            case .unnamed: break
            }
            guard try link() else { return false }
            naming = .named
            return true
        }
    }

    /// For a file without a name: runs `place`, which puts it at its final name, with its
    /// naming held, so that no checkpoint gives it the part file's name meanwhile or after
    /// (the same file under both names, the `.part` left behind). `place` may name it first
    /// with the function it is given (``name()``'s work), and says whether the bytes are now
    /// at their final name. Nil, without running `place`, for a file that has its name.
    func whileUnnamed<T>(_ place: (_ name: () throws(DownloadError) -> Bool) -> (result: T, placed: Bool)) -> T? {
        naming.withLock { naming in
            guard naming == .unnamed else { return nil }
            var namedNow = false
            let (result, placed) = place { () throws(DownloadError) -> Bool in
                guard try self.link() else { return false }
                namedNow = true
                return true
            }
            // Placed (linked, or named and then renamed): not at `path` any more either way.
            naming = placed ? .placed : namedNow ? .named : .unnamed
            return result
        }
    }

    /// Links the unnamed file at `path`, locked first; false when something is there already.
    private func link() throws(DownloadError) -> Bool {
        // Nobody else can hold the lock of a file without a name.
        _ = try tryLock()
        guard haul_link_descriptor(descriptor, directory, localName) == 0 else {
            if errno == EEXIST { return false }
            throw .io("create", path: path, errno: errno)
        }
        return true
    }

    /// Removes the part file from its folder, if it has a name (an unnamed one goes with its
    /// descriptor; `path` may then be another writer's file).
    func remove() {
        if isNamed { unlinkat(directory, localName, 0) }
    }

    /// Takes the exclusive write lock without waiting. Returns the pid of the holder (0 when
    /// it cannot be told) when someone else has it.
    ///
    /// `flock` does the excluding: it belongs to this open file, so it also keeps out a second
    /// download of the same destination in this process, and closing another descriptor of the
    /// file does not drop it. A POSIX record lock on one byte far past any data only labels the
    /// holder, because `F_GETLK` can report its pid.
    func tryLock() throws(DownloadError) -> pid_t? {
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 {
            var label = Self.labelLock(F_WRLCK)
            _ = fcntl(descriptor, F_SETLK, &label)
            return nil
        }
        let code = errno
        guard code == EWOULDBLOCK || code == EINTR else { throw .io("lock", path: path, errno: code) }
        var probe = Self.labelLock(F_WRLCK)
        guard fcntl(descriptor, F_GETLK, &probe) == 0, probe.l_type != Int16(F_UNLCK) else { return 0 }
        return probe.l_pid
    }

    /// Gives the lock up before the descriptor closes: the transfer is over, and whoever
    /// discards the partial next (in this process too) must be able to take it. A part file
    /// without a name has nobody to give it to (no system call for each small file).
    func unlock() {
        if isNamed { flock(descriptor, LOCK_UN) }
    }

    private static func labelLock(_ type: Int32) -> flock {
        var lock = Glibc.flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(Int64.max - 1)
        lock.l_len = 1
        return lock
    }

    /// Whether `path` still names the file this descriptor has open (a writer that held the
    /// lock before us may have renamed it to its final name and gone).
    func isStillAtPath() -> Bool {
        var opened = stat()
        var named = stat()
        guard fstat(descriptor, &opened) == 0, fstatat(directory, localName, &named, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
        return opened.st_dev == named.st_dev && opened.st_ino == named.st_ino
    }

    func size() throws(DownloadError) -> Int64 {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw .io("read", path: path, errno: errno) }
        return Int64(info.st_size)
    }

    func truncate(to length: Int64 = 0) throws(DownloadError) {
        // ftruncate to the current size still frees blocks reserved past the end (ext4, xfs):
        // every fresh 200 "starts over" from an empty file and would undo ``preallocate(_:)``.
        if try size() == length { return }
        guard ftruncate(descriptor, off_t(length)) == 0 else { throw .io("truncate", path: path, errno: errno) }
    }

    /// Reserves disk blocks for the first `length` bytes without changing the file size, so
    /// a full disk shows up before the transfer rather than in the middle of it.
    ///
    /// The size must stay as it is: it bounds which recorded ranges are still trusted. Where the
    /// filesystem cannot preallocate this does nothing, and writes allocate as they go.
    ///
    /// - Throws: ``DownloadError/Kind/io`` when the disk has no room for `length` bytes.
    func preallocate(_ length: Int64) throws(DownloadError) {
        var code: Int32
        repeat {
            code = haul_fallocate_keep_size(descriptor, 0, length) == 0 ? 0 : errno
        } while code == EINTR
        // Only ENOSPC is worth a failure: the file cannot fit. Anything else (EOPNOTSUPP, ENOSYS,
        // EINVAL from a filesystem without support, e.g. some overlay or NFS mounts) just loses
        // an optimisation.
        guard code == ENOSPC else { return }
        // A failed fallocate can keep the blocks it got past the end of the file; truncating
        // to the current size hands them back.
        if let size = try? size() { _ = ftruncate(descriptor, off_t(size)) }
        throw .io("not enough disk space for \(path): \(length) bytes needed; free some and run again", path: path, reason: .diskFull, errorNumber: ENOSPC)
    }

    /// Writes all of `buffer` at `offset`, retrying short writes and EINTR.
    func write(_ buffer: ByteBuffer, at offset: Int64) throws(DownloadError) {
        let failure: Int32? = buffer.withUnsafeReadableBytes { bytes in
            var done = 0
            while done < bytes.count {
                let n = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            return nil
        }
        if let failure { throw .io("write to", path: path, errno: failure) }
    }

    /// Reads up to `count` bytes at `offset` into `buffer` (for checksums of resumed files).
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(DownloadError) -> Int {
        while true {
            let n = pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw .io("read", path: path, errno: errno) }
        }
    }

    /// Flushes written data to the device: the step before the store may record it.
    func sync() throws(DownloadError) {
        guard fdatasync(descriptor) == 0 else { throw .io("flush", path: path, errno: errno) }
    }

    /// Flushes the part file's folder itself: the names created and renamed in it survive a
    /// crash. A folder that cannot be opened or flushed is an error: the names in it may not
    /// survive a power cut, so the caller must not report them done.
    func syncFolder() throws(DownloadError) {
        if let folder { return try folder.sync() }
        let path = FilePaths.folder(of: self.path)
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io("open folder", path: path, errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .io("flush folder", path: path, errno: errno) }
    }
}

extension PartFile {
    /// Deletes `destination.part`, unless another writer holds the part file's lock right now
    /// (then it stays: that writer still needs it), and forgets the progress `id` recorded.
    static func discard(destination: String, id: DownloadID?, store: Store) {
        let path = destination + ".part"
        if FileManager.default.fileExists(atPath: path) {
            guard let part = try? PartFile(path: path), (try? part.tryLock()) == .some(nil) else { return }
            unlink(path)
        }
        if let id { store.writer.update(id, .ranges(ByteRanges())) }
    }
}
