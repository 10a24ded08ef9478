import Foundation
import Synchronization

/// Picks the final path of a download (rule 4 of "Resume semantics"): the name the server
/// suggests or the URL's, inside the folder asked for; never a file Haul must not touch.
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
    ///
    /// - Parameter urlName: the name from `url`'s path, when the caller worked it out already.
    func path(for destination: DownloadRequest.Destination, suggestedName: String?, url: String,
              urlName: String?? = nil) throws(DownloadError) -> String {
        switch destination {
        case .file(let path):
            return Self.absolute(path)
        case .directory(let directory):
            let name = suggestedName.flatMap(FileNameSanitizer.sanitize) ?? (urlName ?? Self.name(of: url)) ?? "index.html"
            let folder = Self.absolute(directory)
            return folder == "/" ? "/" + name : folder + "/" + name
        }
    }

    /// The file name a URL's path gives, if any.
    static func name(of url: String) -> String? {
        FileNameSanitizer.name(fromURLPath: percentEncodedPath(of: url))
    }

    /// The path of an absolute `scheme://authority/path?query#fragment` URL as it is written
    /// (what `URLComponents.percentEncodedPath` answers, without parsing the rest).
    static func percentEncodedPath(of url: String) -> String {
        if let path = URLParts.path(of: url) { return String(path) }
        return URLComponents(string: url)?.percentEncodedPath ?? ""
    }

    /// Whether anything (a file, a folder, a link) is at `path`: one `lstat`.
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Applies rule 4 to `path`: an existing complete file is reported or stepped around.
    ///
    /// - Parameter seenFree: the caller found nothing at `path` a moment ago; it is not looked at
    ///   again (a file that appears from now on is met when the download is put in place).
    func resolve(_ path: String, remoteLength: Int64?, seenFree: Bool = false) throws(DownloadError) -> Outcome {
        try Self.ensureFolder(of: path)
        if seenFree { return .download(path) }
        var info = stat()
        guard stat(path, &info) == 0 else { return .download(path) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw .io("cannot write to \(path): it exists and is not a regular file")
        }
        let size = Int64(info.st_size)
        if let remoteLength, size == remoteLength { return .alreadyComplete(path, bytes: size) }
        if overwrite { return .download(path) }
        // Never modify a file Haul did not write: step aside to name.1.ext, name.2.ext, …
        for candidate in Self.candidates(beside: path) {
            guard let existing = Self.regularFileSize(candidate) else { return .download(candidate) }
            if let remoteLength, existing == remoteLength { return .alreadyComplete(candidate, bytes: existing) }
        }
        throw .io("cannot find a free name next to \(path): \(Self.maxSuffix) copies exist")
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

    static func absolute(_ path: String) -> String {
        FilePaths.absolute(path)
    }

    static func regularFileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// Folders already made and found writable in this process: a list of 100,000 files into
    /// one folder checks it once.
    private static let knownFolders = Mutex<Set<String>>([])

    /// Creates the folder (like `mkdir -p`) and checks it can be written to.
    static func ensureFolder(of path: String) throws(DownloadError) {
        let folder = FilePaths.folder(of: path)
        if knownFolders.withLock({ $0.contains(folder) }) { return }
        defer { if access(folder, W_OK) == 0 { _ = knownFolders.withLock { $0.insert(folder) } } }
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
