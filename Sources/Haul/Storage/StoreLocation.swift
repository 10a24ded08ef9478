import Foundation

/// Where a ``Downloader`` keeps its records: SQLite in its state folder (the default), or a
/// PostgreSQL server, so that the queue lives beside the machine rather than on it.
///
/// ```swift
/// var configuration = Downloader.Configuration()
/// configuration.store = try StoreLocation(parsing: "postgresql://haul@db.example:5432/haul")
/// ```
public struct StoreLocation: Sendable, Hashable, CustomStringConvertible {
    /// A PostgreSQL server's address, account and database.
    struct PostgreSQL: Sendable, Hashable {
        /// A host name or address; nil with ``socket``.
        var host: String?
        var port = 5432
        /// The folder of the server's Unix socket (`/var/run/postgresql`), instead of a host.
        var socket: String?
        var user: String
        var password: String?
        var database: String
        /// libpq's `sslmode`: `disable`, `prefer` (its default: TLS when the server offers it)
        /// or `require`.
        var sslMode = "prefer"
        /// How long connecting may take (libpq's `connect_timeout`). A store that stops
        /// answering is retried for three times as long before its downloads stop.
        var connectTimeout: Duration = .seconds(10)
    }

    enum Kind: Sendable, Hashable {
        case stateDirectory
        case postgreSQL(PostgreSQL)
    }

    let kind: Kind

    /// SQLite, `state.sqlite` in ``Downloader/Configuration/stateDirectory``.
    public static let stateDirectory = StoreLocation(kind: .stateDirectory)

    init(kind: Kind) {
        self.kind = kind
    }

    /// A PostgreSQL server by its URL, libpq's form:
    /// `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=…&connect_timeout=…]`
    /// (`postgres://` too). The password may instead come from `$PGPASSWORD`; the user
    /// defaults to `$PGUSER`, then the account running Haul, and the database to the user. A
    /// host that is a folder (`%2Fvar%2Frun%2Fpostgresql`, or `?host=/var/run/postgresql`) is
    /// the folder of the server's Unix socket.
    ///
    /// - Throws: ``DownloadError/Kind/invalidRequest``, saying what is wrong with the URL.
    public init(parsing text: String) throws(DownloadError) {
        func invalid(_ why: String) -> DownloadError {
            .invalidRequest("cannot use the store \(Self.redacted(text)): \(why); give postgresql://USER@HOST[:PORT]/DATABASE")
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw invalid("it is not a URL")
        }
        guard scheme == "postgresql" || scheme == "postgres" else {
            throw invalid("only postgresql:// is known (SQLite, the default, needs no --store)")
        }
        let environment = ProcessInfo.processInfo.environment
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        var host = components.percentEncodedHost.flatMap { $0.removingPercentEncoding }.flatMap { $0.isEmpty ? nil : $0 }
        if let explicit = query["host"], !explicit.isEmpty { host = explicit }
        guard let host else { throw invalid("it names no host") }
        let user = components.user.flatMap { $0.isEmpty ? nil : $0 } ?? environment["PGUSER"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.accountName
        guard let user else { throw invalid("it names no user") }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !path.contains("/") else { throw invalid("a database name has no /") }
        var settings = PostgreSQL(user: user, database: path.isEmpty ? user : path)
        if host.hasPrefix("/") { settings.socket = host } else { settings.host = host }
        if let port = components.port ?? query["port"].flatMap(Int.init) {
            guard (1...65535).contains(port) else { throw invalid("port \(port) is out of range") }
            settings.port = port
        }
        settings.password = components.password ?? environment["PGPASSWORD"].flatMap { $0.isEmpty ? nil : $0 }
        if let mode = query["sslmode"] {
            guard ["disable", "prefer", "require"].contains(mode) else {
                throw invalid("sslmode \(mode) is not one of disable, prefer, require")
            }
            settings.sslMode = mode
        }
        if let timeout = query["connect_timeout"] {
            guard let seconds = Int(timeout), seconds > 0, seconds <= 3600 else {
                throw invalid("connect_timeout \(timeout) is not a number of seconds from 1 to 3600")
            }
            settings.connectTimeout = .seconds(seconds)
        }
        kind = .postgreSQL(settings)
    }

    /// The store as a message shows it: never a password.
    public var description: String {
        switch kind {
        case .stateDirectory: return "the state folder's state.sqlite"
        case .postgreSQL(let server):
            let place =
                server.socket.map { "[\($0)]" } ?? (server.host.map { $0.contains(":") ? "[\($0)]" : $0 } ?? "") + ":\(server.port)"
            return "postgresql://\(server.user)@\(place)/\(server.database)"
        }
    }

    /// `text` with the password of its user part (if any) replaced by `***`.
    static func redacted(_ text: String) -> String {
        guard let at = text.firstIndex(of: "@"), let schemeEnd = text.range(of: "://"), schemeEnd.upperBound < at else { return text }
        let user = text[schemeEnd.upperBound..<at]
        guard let colon = user.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }

    /// The name of the account running this process, libpq's default user.
    private static var accountName: String? {
        guard let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name else { return nil }
        return String(cString: name)
    }
}
