#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CHaulSystem
import Foundation
import Synchronization

/// The folder a confined download writes into, held open: its part file is made, named and
/// renamed relative to this descriptor, so a folder swapped for a symbolic link after the
/// download opened it changes nothing about where the bytes go.
///
/// A download is confined when its request says so (``DownloadRequest/confinement``: the
/// daemon without a secret, the folder of `haul get -d`). The folder is opened when the
/// download starts, not when it was added: a link planted between the two is met here.
final class DownloadFolder: Sendable {
    /// The folder, absolute.
    let path: String
    let descriptor: Int32
    /// The folder's device and inode when it was opened (``isStillAtPath``).
    private let device: UInt64
    private let inode: UInt64

    /// Opens `folder` (absolute) beneath `root`, creating the folders that are missing.
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/io``) when a component of `folder`
    ///   leads outside `root` (a symbolic link, `..`), or when it cannot be made or opened.
    convenience init(_ folder: String, beneath root: String) throws(DownloadError) {
        try self.init(folder, beneath: DownloadFolder(root: root))
    }

    /// Opens the download folder `root` itself (absolute), made as asked like `mkdir -p` when
    /// it is missing: the folder is the caller's choice, links in its path included.
    convenience init(root: String) throws(DownloadError) {
        let root = FilePaths.normalized(root)
        var opened = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if opened < 0, errno == ENOENT {
            if let code = FilePaths.makeFolders(root) { throw .io("create folder", path: root, errno: code) }
            opened = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        guard opened >= 0 else { throw .io("open the download folder", path: root, errno: errno) }
        try self.init(path: root, descriptor: opened)
    }

    /// Opens `folder` (absolute) beneath the download folder `root`, held open, creating the
    /// folders that are missing.
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/io``) when a component of `folder`
    ///   leads outside `root` (a symbolic link, `..`), or when it cannot be made or opened.
    convenience init(_ folder: String, beneath root: DownloadFolder) throws(DownloadError) {
        let folder = FilePaths.normalized(folder)
        guard let relative = Self.relative(folder, to: root.path) else { throw Self.outside(folder, root: root.path) }
        // The root itself (most downloads of a list): a descriptor of its own for the same folder.
        var opened = relative.isEmpty ? dup(root.descriptor) : Self.openBeneath(root.descriptor, relative)
        var code = errno
        if opened < 0, code == EXDEV, let real = Self.realPath(folder), let realRoot = Self.realPath(root.path),
            let inside = Self.relative(real, to: realRoot)
        {
            // A link by absolute path to a folder that is inside after all (openat2 refuses every
            // absolute link): opened again by its real path, through the same checks.
            opened = Self.openBeneath(root.descriptor, inside.isEmpty ? "." : inside)
            code = errno
        }
        if opened < 0, code == ENOENT {
            opened = try Self.make(relative, beneath: root.descriptor, root: root.path)
            code = errno
        }
        guard opened >= 0 else {
            if code == EXDEV || code == ELOOP { throw Self.outside(folder, root: root.path) }
            throw .io("open folder", path: folder, errno: code)
        }
        try self.init(path: folder, descriptor: opened)
    }

    /// Takes `descriptor` (an open folder) once it is found writable; closes it otherwise.
    private init(path: String, descriptor: Int32) throws(DownloadError) {
        var info = stat()
        guard faccessat(descriptor, ".", W_OK, 0) == 0, fstat(descriptor, &info) == 0 else {
            let code = errno
            close(descriptor)
            throw .io("write to", path: path, errno: code)
        }
        self.path = path
        self.descriptor = descriptor
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// Whether `path` still leads to the folder held open (links followed, as when it was
    /// opened): a folder removed, renamed or replaced since is not.
    var isStillAtPath: Bool {
        var info = stat()
        return stat(path, &info) == 0 && UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// Makes the missing folders of `relative` one at a time, each relative to its parent just
    /// opened (a folder is never made through a link), and opens the last. Returns -1 with
    /// `errno` set when a component cannot be opened beneath the root.
    private static func make(_ relative: String, beneath root: Int32, root path: String) throws(DownloadError) -> Int32 {
        var parent = dup(root)
        var sofar = ""
        for component in relative.split(separator: "/") {
            sofar += sofar.isEmpty ? String(component) : "/" + component
            var next = openBeneath(root, sofar)
            if next < 0, errno == ENOENT {
                if mkdirat(parent, String(component), 0o777) != 0, errno != EEXIST {
                    let code = errno
                    close(parent)
                    throw .io("create folder", path: path + "/" + sofar, errno: code)
                }
                // Opened again through the checks: a link planted meanwhile is refused.
                next = openBeneath(root, sofar)
            }
            let code = errno
            close(parent)
            guard next >= 0 else {
                errno = code
                return -1
            }
            parent = next
        }
        return parent
    }

    private static func realPath(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    deinit { close(descriptor) }

    /// `path` relative to `root` (empty for `root` itself), or nil when it is not inside.
    static func relative(_ path: String, to root: String) -> String? {
        if path == root { return "" }
        let prefix = root == "/" ? "/" : root + "/"
        guard path.hasPrefix(prefix) else { return nil }
        let rest = String(path.dropFirst(prefix.count))
        return rest.split(separator: "/").contains("..") ? nil : rest
    }

    /// Opens the folder `root/relative`, refusing one that leads outside `root` (EXDEV, ELOOP).
    private static func openBeneath(_ root: Int32, _ relative: String) -> Int32 {
        let opened = haul_open_folder_beneath(root, relative)
        guard opened < 0, errno == ENOSYS else { return opened }
        // No openat2 (before Linux 5.6): each component opened without following any link.
        var current = dup(root)
        for component in relative.split(separator: "/") {
            let next = openat(current, String(component), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let code = errno
            close(current)
            guard next >= 0 else {
                errno = code
                return -1
            }
            current = next
        }
        return current
    }

    private static func outside(_ folder: String, root: String) -> DownloadError {
        .io("\(folder) leads outside \(root) (a symbolic link or '..'); Haul writes this download only inside \(root)", path: folder, reason: .outsideFolder)
    }

    /// Flushes the folder itself, so the names made and renamed in it survive a crash.
    func sync() throws(DownloadError) {
        guard fsync(descriptor) == 0 else { throw .io("flush folder", path: path, errno: errno) }
    }
}

/// The download folders of one ``Downloader`` held open, shared by its downloads: a list of
/// thousands of files into one folder opens that folder once instead of once a file (an open, a
/// permission check and a close each). A root is used while its path still leads to it (one
/// `stat`); a folder below a root is opened beneath it for each download, through the checks.
final class DownloadFolders: Sendable {
    private let roots = Mutex<[String: DownloadFolder]>([:])
    /// Roots held at most: a daemon's downloads go to a few folders.
    static let limit = 16

    /// `folder` (absolute) held open beneath `root`, made if missing.
    ///
    /// - Throws: ``DownloadError`` when the folder leads outside `root` or cannot be made or opened.
    func folder(_ folder: String, beneath root: String) throws(DownloadError) -> DownloadFolder {
        let root = FilePaths.normalized(root)
        let held = try self.root(root)
        return FilePaths.normalized(folder) == root ? held : try DownloadFolder(folder, beneath: held)
    }

    private func root(_ path: String) throws(DownloadError) -> DownloadFolder {
        if let held = roots.withLock({ $0[path] }), held.isStillAtPath { return held }
        let opened = try DownloadFolder(root: path)
        roots.withLock { roots in
            if roots.count >= Self.limit, roots[path] == nil { roots.removeAll() }
            roots[path] = opened
        }
        return opened
    }
}
