import Foundation

/// Paths as Haul stores and compares them.
public enum FilePaths {
    /// `path` with `.`, `..` and repeated slashes taken out, without looking at the disk (no
    /// symbolic link is followed: that is a lookup per component, and the user's path is the
    /// one to keep).
    public static func normalized(_ path: String) -> String {
        if isNormalizedAbsolute(path) { return path }
        let absolute = path.hasPrefix("/")
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": if parts.last.map({ $0 != ".." }) ?? false { parts.removeLast() } else if !absolute { parts.append(part) }
            default: parts.append(part)
            }
        }
        let joined = parts.joined(separator: "/")
        return absolute ? "/" + joined : (joined.isEmpty ? "." : joined)
    }

    /// Whether `path` is absolute with nothing for ``normalized(_:)`` to take out: no empty,
    /// `.` or `..` component and no trailing slash. One pass over the bytes, no allocation
    /// (every download of a long list into one folder asks this of the same folder).
    static func isNormalizedAbsolute(_ path: String) -> Bool {
        var path = path
        return path.withUTF8 { bytes in
            let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
            guard bytes.count > 1, bytes[0] == slash, bytes[bytes.count - 1] != slash else { return false }
            // Length of the current component so far, and whether it is all dots.
            var length = 0
            var dots = true
            for byte in bytes[1...] {
                if byte == slash {
                    if length == 0 || (dots && length <= 2) { return false }
                    length = 0
                    dots = true
                } else {
                    length += 1
                    dots = dots && byte == dot
                }
            }
            return !(dots && length <= 2)
        }
    }

    /// The folder of an absolute path (`/` for a file at the root), without Foundation: asked
    /// for every file a long list writes.
    static func folder(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")), slash != path.utf8.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// The last component of an absolute path (its file's name), without Foundation.
    static func name(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(path[path.utf8.index(after: slash)...])
    }

    /// The names beside `path` for a download that steps around a file, in order:
    /// `a/f.1.tar.gz`, `a/f.2.tar.gz`, … up to ``maxSuffix`` (the extension split once).
    static func candidates(beside path: String) -> some Sequence<String> {
        let (stem, ext) = splitExtension(path)
        return (1...maxSuffix).lazy.map { n in ext.isEmpty ? "\(stem).\(n)" : "\(stem).\(n).\(ext)" }
    }

    /// `a/f.tar.gz` → (`a/f`, `tar.gz`): compressed tarballs keep their double extension.
    static func splitExtension(_ path: String) -> (stem: String, ext: String) {
        let url = URL(fileURLWithPath: path)
        var ext = url.pathExtension
        var stem = url.deletingPathExtension()
        if !ext.isEmpty, stem.pathExtension == "tar" {
            ext = "tar." + ext
            stem = stem.deletingPathExtension()
        }
        return (stem.path, ext)
    }

    /// How far `name.N.ext` may count before giving up.
    static let maxSuffix = 999

    /// The user's home folder: `$HOME` when set, as curl, wget and aria2 take it (Foundation's
    /// `NSHomeDirectory()` reads the password database on Linux and ignores `$HOME`), else the
    /// password database's.
    public static var home: String {
        if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty { return home }
        return NSHomeDirectory()
    }

    /// `path` with a leading `~` or `~/` expanded (to ``home``; `~user` to that user's home),
    /// made absolute against the current folder, and normalized.
    public static func absolute(_ path: String) -> String {
        let expanded: String
        if path == "~" || path.hasPrefix("~/") {
            expanded = home + path.dropFirst()
        } else {
            expanded = path.hasPrefix("~") ? (path as NSString).expandingTildeInPath : path
        }
        if expanded.hasPrefix("/") { return normalized(expanded) }
        return normalized(FileManager.default.currentDirectoryPath + "/" + expanded)
    }

    /// Makes `path` and every missing folder above it (`mkdir -p`; mode 0777 less the umask).
    ///
    /// - Returns: nil when the folder is there, or the `errno` of the step that failed:
    ///   `EACCES`, `EPERM`, `EROFS`, `ENOSPC`, … as `mkdir` said it, `ENOTDIR` when a part of
    ///   the path is a file. (Foundation's `createDirectory` hides the number.)
    public static func makeFolders(_ path: String) -> Int32? {
        let absolute = path.hasPrefix("/")
        var current = absolute ? "" : "."
        for part in normalized(path).split(separator: "/") {
            current += "/" + part
            if mkdir(current, 0o777) == 0 { continue }
            let code = errno
            var status = stat()
            guard code == EEXIST, stat(current, &status) == 0 else { return code }
            guard status.st_mode & S_IFMT == S_IFDIR else { return ENOTDIR }
        }
        return nil
    }
}
