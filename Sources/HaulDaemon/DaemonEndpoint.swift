import Foundation

/// Where a running daemon listens, written to `daemon.json` in its state folder at start
/// (mode 0600: it holds the secret) and removed when it stops. `haul add`, `haul ls` and
/// friends find the daemon through it.
public struct DaemonEndpoint: Codable, Sendable, Hashable {
    public var pid: Int32
    public var address: String
    public var port: Int
    public var secret: String?

    public init(pid: Int32, address: String, port: Int, secret: String?) {
        self.pid = pid
        self.address = address
        self.port = port
        self.secret = secret
    }

    public static let fileName = "daemon.json"

    public static func path(in stateDirectory: String) -> String {
        (stateDirectory as NSString).appendingPathComponent(fileName)
    }

    /// The host to connect to: a wildcard address is reached on loopback.
    var connectHost: String {
        switch address {
        case "0.0.0.0", "": "127.0.0.1"
        case "::": "::1"
        default: address
        }
    }

    /// `http://HOST:PORT/jsonrpc`.
    public var rpcURL: String {
        let host = connectHost.contains(":") ? "[\(connectHost)]" : connectHost
        return "http://\(host):\(port)/jsonrpc"
    }

    /// The web page's address, with the secret in the fragment (never sent over the network).
    public var pageURL: String {
        guard let secret else { return pageBaseURL }
        return pageBaseURL + "#token=" + (secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? secret)
    }

    /// The web page's address without the secret: `http://HOST:PORT/`.
    public var pageBaseURL: String { String(rpcURL.dropLast("jsonrpc".count)) }

    /// The endpoint a daemon wrote into `stateDirectory`, or nil when none is there.
    public static func read(stateDirectory: String) throws -> DaemonEndpoint? {
        let path = path(in: stateDirectory)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return try JSONDecoder().decode(DaemonEndpoint.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Writes the file readable by its owner only, replacing it atomically.
    func write(stateDirectory: String) throws {
        let path = Self.path(in: stateDirectory)
        let temporary = path + ".tmp"
        let data = try JSONEncoder().encode(self)
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let written = data.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, rename(temporary, path) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    static func remove(stateDirectory: String) {
        unlink(path(in: stateDirectory))
    }
}
