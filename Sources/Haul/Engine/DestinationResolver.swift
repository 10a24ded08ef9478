import Foundation

/// Picks the final path of a download (DESIGN rule 4): the name the server suggests or
/// the URL's, inside the folder asked for; never a file Haul must not touch.
struct DestinationResolver: Sendable {
    enum Outcome: Equatable {
        /// Download to this path.
        case download(String)
        /// A complete file of the remote's size is already there.
        case alreadyComplete(String, bytes: Int64)
    }

    var overwrite: Bool
    /// How far `name.N.ext` may count before giving up.
    static let maxSuffix = 999

    /// The absolute path for `destination`, given what the probe learned.
    func path(for destination: DownloadRequest.Destination, suggestedName: String?, url: String) throws(DownloadError) -> String {
        switch destination {
        case .file(let path):
            return Self.absolute(path)
        case .directory(let directory):
            let name = suggestedName.flatMap(FileNameSanitizer.sanitize)
                ?? URLComponents(string: url).flatMap { FileNameSanitizer.name(fromURLPath: $0.percentEncodedPath) }
                ?? "index.html"
            return (Self.absolute(directory) as NSString).appendingPathComponent(name)
        }
    }

    /// Applies rule 4 to `path`: an existing complete file is reported or stepped around.
    func resolve(_ path: String, remoteLength: Int64?) throws(DownloadError) -> Outcome {
        try Self.ensureFolder(of: path)
        guard let size = Self.regularFileSize(path) else {
            if FileManager.default.fileExists(atPath: path) {
                throw .io("cannot write to \(path): it exists and is not a regular file")
            }
            return .download(path)
        }
        if let remoteLength, size == remoteLength { return .alreadyComplete(path, bytes: size) }
        if overwrite { return .download(path) }
        // Never modify a file Haul did not write: step aside to name.1.ext, name.2.ext, …
        let (stem, ext) = Self.splitExtension(path)
        for n in 1...Self.maxSuffix {
            let candidate = ext.isEmpty ? "\(stem).\(n)" : "\(stem).\(n).\(ext)"
            guard let existing = Self.regularFileSize(candidate) else { return .download(candidate) }
            if let remoteLength, existing == remoteLength { return .alreadyComplete(candidate, bytes: existing) }
        }
        throw .io("cannot find a free name next to \(path): \(Self.maxSuffix) copies exist")
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

    static func absolute(_ path: String) -> String {
        let expanded = (path as NSString).expandingTildeInPath
        if expanded.hasPrefix("/") { return (expanded as NSString).standardizingPath }
        return ((FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(expanded) as NSString).standardizingPath
    }

    static func regularFileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// Creates the folder (like `mkdir -p`) and checks it can be written to.
    static func ensureFolder(of path: String) throws(DownloadError) {
        let folder = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw .io("write to", path: folder, errno: ENOTDIR) }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            } catch {
                let code = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)?.code
                throw .io("create folder", path: folder, errno: code.map(Int32.init) ?? ENOTDIR)
            }
        }
        guard access(folder, W_OK) == 0 else { throw .io("write to", path: folder, errno: errno) }
    }
}
