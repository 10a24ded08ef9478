import Foundation

/// Paths as Haul stores and compares them.
public enum FilePaths {
    /// `path` with `.`, `..` and repeated slashes taken out, without looking at the disk (no
    /// symbolic link is followed: that is a lookup per component, and the user's path is the
    /// one to keep).
    public static func normalized(_ path: String) -> String {
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

    /// `path` with `~` expanded, made absolute against the current folder, and normalized.
    public static func absolute(_ path: String) -> String {
        let expanded = path.hasPrefix("~") ? (path as NSString).expandingTildeInPath : path
        if expanded.hasPrefix("/") { return normalized(expanded) }
        return normalized(FileManager.default.currentDirectoryPath + "/" + expanded)
    }
}
