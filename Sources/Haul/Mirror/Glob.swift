import Foundation

/// `--include` and `--exclude` for `haul mirror`: shell globs (`fnmatch`) matched against a
/// path below the mirrored folder and against its last name, so `*.iso` and `pub/*.iso`
/// both work.
package enum Glob {
    /// Whether a file or folder is copied: no `exclude` matches it, and, for a file, some
    /// `include` matches it when any is given (folders are walked into whatever `include` says,
    /// as files below them may match).
    package static func accepts(_ path: String, isDirectory: Bool, include: [String], exclude: [String]) -> Bool {
        let path = isDirectory && path.hasSuffix("/") ? String(path.dropLast()) : path
        let name = path.split(separator: "/").last.map(String.init) ?? path
        func matches(_ pattern: String) -> Bool {
            fnmatch(pattern, path, FNM_PATHNAME) == 0 || fnmatch(pattern, name, 0) == 0
        }
        if exclude.contains(where: matches) { return false }
        return isDirectory || include.isEmpty || include.contains(where: matches)
    }
}
