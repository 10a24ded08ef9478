import Foundation
import Haul

/// Where the daemon may write what a client asks for.
///
/// Without a secret anyone who can reach the port drives the daemon, so every download stays
/// inside its download folder (`-d`): a relative `dir` resolves against the current `dir`
/// (itself inside it), an absolute one outside it is refused, and symbolic links are followed
/// before comparing. With a secret, any folder the daemon's user can write, as in aria2.
/// Names with control characters are refused either way.
struct FolderPolicy: Sendable {
    /// The daemon's download folder, absolute.
    let root: String
    /// Whether everything must stay inside ``root``.
    let confined: Bool

    /// The absolute folder for a `dir` option; a relative one is taken from `base`.
    func folder(_ dir: String, base: String) throws(RPCError) -> String {
        try Self.refuseControlCharacters(dir, "dir")
        let path = Self.normalized(dir.hasPrefix("/") ? dir : base + "/" + dir)
        guard !confined || Self.contains(root, path) else {
            throw .failed(
                "dir \(dir) is outside the download folder \(root): without --rpc-secret the daemon writes only there; give a folder inside it, or start the daemon with a secret"
            )
        }
        return path
    }

    /// The file for an `out` option inside `folder`: a relative path without `..` that ends in
    /// a name (not `.`, `..` or `/`), each part short enough for the file system.
    func file(_ out: String, in folder: String) throws(RPCError) -> String {
        try Self.refuseControlCharacters(out, "out")
        let parts = out.split(separator: "/", omittingEmptySubsequences: false)
        guard !out.hasPrefix("/"), !parts.contains("..") else {
            throw .failed("out must be a file name inside dir, not \(out)")
        }
        // `.` or `sub/` would make the folder itself the file: it fails only once the server
        // answers, after tellStatus has shown the folder's parent as its dir.
        guard let name = parts.last, !name.isEmpty, name != "." else {
            throw .failed("out must end in a file name, not \(out.debugDescription)")
        }
        if let long = parts.dropLast().first(where: { $0.utf8.count > Self.maxNameBytes }) {
            throw .failed("out has a folder name of \(long.utf8.count) bytes; the file system takes at most \(Self.maxNameBytes)")
        }
        guard name.utf8.count <= Self.maxFileNameBytes else {
            throw .failed(
                "out's file name is \(name.utf8.count) bytes; it may be at most \(Self.maxFileNameBytes) (the file system's \(Self.maxNameBytes) less \(Self.partSuffix) while it downloads)"
            )
        }
        let path = Self.normalized(folder + "/" + out)
        guard !confined || Self.contains(root, path) else {
            throw .failed("out \(out) leads outside the download folder \(root)")
        }
        return path
    }

    /// `NAME_MAX`: the longest name of a file or folder, in bytes (Linux file systems, APFS).
    static let maxNameBytes = 255
    /// What the file is called while it downloads: the name and this.
    static let partSuffix = ".part"
    /// The longest name `out` may end in, so that its part file's name fits too.
    static let maxFileNameBytes = maxNameBytes - partSuffix.utf8.count

    static func refuseControlCharacters(_ text: String, _ name: String) throws(RPCError) {
        // The control characters (category Cc) are exactly these: C0, DEL and C1.
        if let bad = text.unicodeScalars.first(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
            throw .failed("\(name) must not contain control characters (found U+\(String(format: "%04X", bad.value)))")
        }
    }

    static func normalized(_ path: String) -> String {
        FilePaths.normalized(path)
    }

    /// Whether `path` is `folder` or inside it once symbolic links are followed (as far as the
    /// path exists: the rest is created as plain folders).
    static func contains(_ folder: String, _ path: String) -> Bool {
        if plainlyInside(folder, path) { return true }
        return bytes(of: resolved(path), below: resolved(folder)) != nil
    }

    /// What follows `folder` in `path` when `path` is `folder` (nothing) or inside it, compared
    /// byte for byte as file systems do (`String`'s `==` and `hasPrefix` take `é` and `e` with
    /// a combining accent as equal; the file system takes them as two names).
    static func bytes(of path: String, below folder: String) -> ArraySlice<UInt8>? {
        let (inner, outer) = (Array(path.utf8), Array(folder.utf8))
        if inner == outer { return [] }
        let prefix = outer == Array("/".utf8) ? outer : outer + Array("/".utf8)
        guard inner.starts(with: prefix) else { return nil }
        return inner[prefix.count...]
    }

    /// Whether `path` is written as `folder` or inside it, and none of its parts below `folder`
    /// is a symbolic link (`lstat` of each part that exists; the first missing one ends the
    /// walk). The usual case, answered without resolving both paths: `realpath` of each cost
    /// five `readlink` calls per `addUri`, a fifth of a `system.multicall`'s time.
    static func plainlyInside(_ folder: String, _ path: String) -> Bool {
        let (outer, inner) = (normalized(folder), normalized(path))
        guard let below = bytes(of: inner, below: outer) else { return false }
        var current = outer == "/" ? "" : outer
        var status = stat()
        for part in below.split(separator: UInt8(ascii: "/")) {
            current += "/" + String(decoding: part, as: UTF8.self)
            guard lstat(current, &status) == 0 else { return errno == ENOENT }
            if status.st_mode & S_IFMT == S_IFLNK { return false }
        }
        return true
    }

    /// `path` with the longest part that exists resolved by `realpath`.
    static func resolved(_ path: String) -> String {
        var existing = normalized(path)
        var rest: [String] = []
        while existing != "/" {
            if let real = realpath(existing, nil) {
                defer { free(real) }
                let base = String(cString: real)
                return normalized(([base] + rest.reversed()).joined(separator: "/"))
            }
            rest.append((existing as NSString).lastPathComponent)
            existing = (existing as NSString).deletingLastPathComponent
        }
        return normalized("/" + rest.reversed().joined(separator: "/"))
    }
}
