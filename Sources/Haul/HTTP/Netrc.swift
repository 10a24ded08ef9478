import Foundation

/// Credentials from a `.netrc` file, read as curl and aria2 read it: `machine HOST login USER
/// password PASS` entries (tokens separated by any whitespace), a `default` entry for every
/// other host, `macdef` blocks skipped up to the next empty line.
struct Netrc: Sendable {
    private var machines: [String: (login: String, password: String)] = [:]
    private var fallback: (login: String, password: String)?

    /// `~/.netrc`.
    static var defaultPath: String { (NSHomeDirectory() as NSString).appendingPathComponent(".netrc") }

    /// Reads `path`; nil when there is no such file (a missing `.netrc` is not an error).
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/invalidRequest``) when it exists but
    ///   cannot be read.
    static func load(_ path: String) throws(DownloadError) -> Netrc? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .invalidRequest("cannot read the netrc file \(path)")
        }
        return Netrc(parsing: String(decoding: data, as: UTF8.self))
    }

    init(parsing text: String) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        var tokens: [Substring] = []
        // macdef bodies run to the next empty line and are not tokens.
        while let line = lines.popFirst() {
            let words = line.split(whereSeparator: \.isWhitespace)
            if let index = words.firstIndex(of: "macdef") {
                tokens += words[..<index]
                while let body = lines.popFirst(), !body.allSatisfy(\.isWhitespace) {}
                continue
            }
            tokens += words
        }
        var index = 0
        var current: (host: String?, isDefault: Bool, login: String, password: String)?
        func finish() {
            guard let entry = current else { return }
            if entry.isDefault { fallback = (entry.login, entry.password) } else if let host = entry.host, machines[host] == nil {
                machines[host] = (entry.login, entry.password)
            }
        }
        while index < tokens.count {
            let token = tokens[index]
            let value = index + 1 < tokens.count ? String(tokens[index + 1]) : ""
            switch token {
            case "machine":
                finish()
                current = (value.lowercased(), false, "", "")
                index += 2
            case "default":
                finish()
                current = (nil, true, "", "")
                index += 1
            case "login":
                current?.login = value
                index += 2
            case "password":
                current?.password = value
                index += 2
            case "account":
                index += 2
            default:
                index += 1
            }
        }
        finish()
    }

    /// The login and password for `host`, or the `default` entry's.
    func credentials(for host: String) -> (login: String, password: String)? {
        machines[host.lowercased()] ?? fallback
    }
}
