import Foundation

/// Credentials from a `.netrc` file, read as curl and aria2 read it: `machine HOST login USER
/// password PASS` entries (tokens separated by any whitespace), a `default` entry for every
/// other host, `macdef` blocks skipped up to the next empty line, values in double quotes
/// when they hold spaces.
struct Netrc: Sendable {
    private var machines: [String: (login: String, password: String)] = [:]
    private var fallback: (login: String, password: String)?

    /// `$HOME/.netrc` (see ``FilePaths/home``).
    static var defaultPath: String { FilePaths.home + "/.netrc" }

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
        var tokens: [String] = []
        // macdef bodies run to the next empty line and are not tokens.
        while let line = lines.popFirst() {
            let words = Self.tokens(line)
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
            if entry.isDefault {
                fallback = (entry.login, entry.password)
            } else if let host = entry.host, machines[host] == nil {
                machines[host] = (entry.login, entry.password)
            }
        }
        while index < tokens.count {
            let token = tokens[index]
            let value = index + 1 < tokens.count ? tokens[index + 1] : ""
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

    /// The words of one line: separated by whitespace, or in double quotes with `\"`, `\\`,
    /// `\n`, `\r` and `\t` escapes (as curl reads them), so a password may hold spaces.
    static func tokens(_ line: Substring) -> [String] {
        var tokens: [String] = []
        var characters = line.makeIterator()
        var current: String?
        while let character = characters.next() {
            if character == "\"", current == nil {
                var quoted = ""
                while let next = characters.next(), next != "\"" {
                    guard next == "\\", let escaped = characters.next() else {
                        quoted.append(next)
                        continue
                    }
                    switch escaped {
                    case "n": quoted.append("\n")
                    case "r": quoted.append("\r")
                    case "t": quoted.append("\t")
                    default: quoted.append(escaped)
                    }
                }
                tokens.append(quoted)
            } else if character.isWhitespace {
                if let word = current { tokens.append(word) }
                current = nil
            } else {
                current = (current ?? "") + String(character)
            }
        }
        if let word = current { tokens.append(word) }
        return tokens
    }
}
