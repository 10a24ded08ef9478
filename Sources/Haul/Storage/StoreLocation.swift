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
        /// libpq's `sslmode`: `disable`, `prefer` (its default: TLS when the server offers it,
        /// unchecked), `require` (TLS, unchecked), `verify-ca` or `verify-full`.
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

    /// A PostgreSQL server by its URL, in libpq's form:
    /// `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=…&connect_timeout=…]`
    /// (`postgres://` too). What the URL leaves out comes from libpq's variables: the host from
    /// `$PGHOST` (else the Unix socket in `/var/run/postgresql`), the port from `$PGPORT` (else
    /// 5432), the user from `$PGUSER` (else the account running Haul), the password from
    /// `$PGPASSWORD` (or `?password=`), the database from `$PGDATABASE` (else the user's name).
    /// A host that is a folder (`%2Fvar%2Frun%2Fpostgresql`, or `?host=/var/run/postgresql`) is
    /// the folder of the server's Unix socket. `sslmode` is `disable`, `prefer` (the default) or
    /// `require`, which encrypt without checking the server's certificate as libpq does, or
    /// `verify-ca` and `verify-full`, which check it against the system's CAs (and its name).
    /// `~/.pgpass` is not read.
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
        // An empty parameter (`?user=`) says nothing, as an empty variable does.
        let query = Dictionary(
            (components.queryItems ?? []).compactMap { item in item.value.flatMap { $0.isEmpty ? nil : (item.name, $0) } },
            uniquingKeysWith: { _, last in last })
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let host =
            query["host"].flatMap { $0.isEmpty ? nil : $0 }
            ?? components.percentEncodedHost.flatMap { $0.removingPercentEncoding }.flatMap { $0.isEmpty ? nil : $0 }
            ?? variable("PGHOST") ?? "/var/run/postgresql"
        let user = components.user.flatMap { $0.isEmpty ? nil : $0 } ?? query["user"] ?? variable("PGUSER") ?? Self.accountName
        guard let user else { throw invalid("it names no user") }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !path.contains("/") else { throw invalid("a database name has no /") }
        let database = path.isEmpty ? (query["dbname"] ?? variable("PGDATABASE") ?? user) : path
        var settings = PostgreSQL(user: user, database: database)
        if host.hasPrefix("/") { settings.socket = host } else { settings.host = host }
        let portText = components.port.map(String.init) ?? query["port"] ?? variable("PGPORT")
        if let portText {
            guard let port = Int(portText), (1...65535).contains(port) else { throw invalid("port \(portText) is out of range") }
            settings.port = port
        }
        settings.password = components.password ?? query["password"] ?? variable("PGPASSWORD")
        if let mode = query["sslmode"] {
            guard ["disable", "prefer", "require", "verify-ca", "verify-full"].contains(mode) else {
                throw invalid("sslmode \(mode) is not one of disable, prefer, require, verify-ca, verify-full")
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

    /// `text` with its passwords replaced by `***`: the user part's (up to the last `@`, since a
    /// password may hold an `@`, `?` or `/` of its own) and a `password=` parameter's.
    static func redacted(_ text: String) -> String {
        var result = text
        if let schemeEnd = result.range(of: "://") {
            // The last @ of all: a password may hold a ? or a / too (hiding some of the host
            // when a parameter holds an @ is the safe mistake).
            if let at = result[schemeEnd.upperBound...].lastIndex(of: "@"),
                let colon = result[schemeEnd.upperBound..<at].firstIndex(of: ":")
            {
                result.replaceSubrange(result.index(after: colon)..<at, with: "***")
            }
        }
        if let query = result.firstIndex(of: "?") {
            let parameters = result[result.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false).map { parameter in
                parameter.hasPrefix("password=") ? "password=***" : String(parameter)
            }
            result = String(result[...query]) + parameters.joined(separator: "&")
        }
        return result
    }

    /// The name of the account running this process, libpq's default user.
    private static var accountName: String? {
        guard let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name else { return nil }
        return String(cString: name)
    }
}
