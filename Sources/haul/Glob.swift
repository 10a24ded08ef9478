import Foundation

/// `--include` and `--exclude` for `haul mirror`: shell globs (`fnmatch`) matched against a
/// path below the mirrored folder and against its last name, so `*.iso` and `pub/*.iso`
/// both work.
enum Glob {
    /// Whether a file or folder is copied: no `exclude` matches it, and, for a file, some
    /// `include` matches it when any is given (folders are walked into whatever `include` says,
    /// as files below them may match).
    static func accepts(_ path: String, isDirectory: Bool, include: [String], exclude: [String]) -> Bool {
        let path = isDirectory && path.hasSuffix("/") ? String(path.dropLast()) : path
        let name = path.split(separator: "/").last.map(String.init) ?? path
        func matches(_ pattern: String) -> Bool {
            fnmatch(pattern, path, FNM_PATHNAME) == 0 || fnmatch(pattern, name, 0) == 0
        }
        if exclude.contains(where: matches) { return false }
        return isDirectory || include.isEmpty || include.contains(where: matches)
    }
}

/// The start URL of a mirror.
enum ListingRoot {
    /// An absolute http(s) URL with a host.
    static func isFolderURL(_ url: String) -> Bool {
        let lower = url.lowercased()
        for scheme in ["http://", "https://"] where lower.hasPrefix(scheme) {
            let rest = lower.dropFirst(scheme.count)
            return !rest.isEmpty && !rest.hasPrefix("/")
        }
        return false
    }

    /// The folder URL: without query or fragment, ending with `/`.
    static func folder(_ url: String) -> String {
        var folder = url
        if let end = folder.firstIndex(where: { $0 == "?" || $0 == "#" }) { folder = String(folder[..<end]) }
        return folder.hasSuffix("/") ? folder : folder + "/"
    }
}
