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
    /// The URL of the download the path is for: a path another download of this process chose
    /// for another URL is taken (``PathClaims``).
    var url: String
    /// Files the store knows as other downloads' (another URL's file of the same name and
    /// size): never reported as this download's, stepped around instead.
    var othersFiles: Set<String> = []

    /// The absolute path for `destination`, given what the probe learned.
    ///
    /// - Parameter urlName: the name from `url`'s path, when the caller worked it out already.
    func path(
        for destination: DownloadRequest.Destination, suggestedName: String?, url: String,
        urlName: String?? = nil
    ) throws(DownloadError) -> String {
        switch destination {
        case .file(let path):
            return FilePaths.absolute(path)
        case .directory(let directory):
            let name = suggestedName.flatMap(FileNameSanitizer.sanitize) ?? (urlName ?? Self.name(of: url)) ?? "index.html"
            let folder = FilePaths.absolute(directory)
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

    /// Applies rule 4 to `path`: an existing complete file is reported or stepped around. (A
    /// file of the remote's size is reported as this download's; the caller asks the store
    /// whether it is another download's, and if so resolves again with it in
    /// ``othersFiles``.)
    ///
    /// A name whose part file is something Haul must not write through (a symbolic link, a
    /// folder: ``PartFile/isForeign(_:)``) is stepped around like a different file at the name.
    ///
    /// - Parameters:
    ///   - seenFree: the caller found nothing at `path` a moment ago; it is not looked at
    ///     again (a file that appears from now on is met when the download is put in place).
    ///   - folderReady: the caller made and opened the folder itself (a confined download).
    ///
    /// A path it answers ``Outcome/download(_:)`` with is claimed for the download
    /// (``PathClaims``) until the download releases it.
    func resolve(_ path: String, remoteLength: Int64?, seenFree: Bool = false, folderReady: Bool = false) throws(DownloadError) -> Outcome {
        if !folderReady { try Self.ensureFolder(of: path) }
        if seenFree { return try chosen(path, remoteLength: remoteLength) }
        var info = stat()
        guard stat(path, &info) == 0 else {
            return PartFile.isForeign(path + ".part") ? try stepAround(path, remoteLength: remoteLength) : try chosen(path, remoteLength: remoteLength)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw .io("cannot write to \(path): it exists and is not a regular file", path: path)
        }
        let size = Int64(info.st_size)
        if let remoteLength, size == remoteLength, !othersFiles.contains(path) { return .alreadyComplete(path, bytes: size) }
        if overwrite, !PartFile.isForeign(path + ".part") {
            PathClaims.claim(path, for: url, shared: true)
            return .download(path)
        }
        return try stepAround(path, remoteLength: remoteLength)
    }

    /// `path`, free on disk, unless another download of this process chose it for another URL.
    private func chosen(_ path: String, remoteLength: Int64?) throws(DownloadError) -> Outcome {
        PathClaims.claim(path, for: url) ? .download(path) : try stepAround(path, remoteLength: remoteLength)
    }

    /// Never modify a file Haul did not write: step aside to name.1.ext, name.2.ext, …
    private func stepAround(_ path: String, remoteLength: Int64?) throws(DownloadError) -> Outcome {
        for candidate in FilePaths.candidates(beside: path) {
            guard let existing = Self.regularFileSize(candidate) else {
                if PartFile.isForeign(candidate + ".part") || Self.exists(candidate) || !PathClaims.claim(candidate, for: url) { continue }
                return .download(candidate)
            }
            if let remoteLength, existing == remoteLength, !othersFiles.contains(candidate) {
                return .alreadyComplete(candidate, bytes: existing)
            }
        }
        throw .io("cannot find a free name next to \(path): \(FilePaths.maxSuffix) copies exist", path: path)
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
            if let code = FilePaths.makeFolders(folder) { throw .io("create folder", path: folder, errno: code) }
        }
        guard access(folder, W_OK) == 0 else { throw .io("write to", path: folder, errno: errno) }
    }
}
