#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HaulTestSupport

/// A response read off a raw socket: head parsed, body exactly as it came off the wire.
struct RawResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    /// The read timed out before the server closed the connection.
    var timedOut: Bool

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}

/// A blocking HTTP/1.1 client over a plain socket, so tests see cut and stalled bodies byte for byte.
///
/// Every request says `Connection: close` and the body is whatever arrives until EOF.
final class RawHTTPClient {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let fd: Int32

    /// Connects to 127.0.0.1:`port`; reads give up after `timeout` seconds of silence.
    init(port: Int, timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
        var wait = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(fd)
            throw Failure(description: "connect to port \(port) failed: errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// Sends a request; `extraHeaders` are written as given.
    func send(_ method: String, _ target: String, _ extraHeaders: [(String, String)] = []) throws {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (name, value) in extraHeaders { text += "\(name): \(value)\r\n" }
        let bytes = Array((text + "\r\n").utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send failed: errno \(errno)") }
            sent += n
        }
    }

    /// Reads until EOF or timeout and parses the head.
    func receive() throws -> RawResponse {
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var timedOut = false
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { data += chunk[..<n]; continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { timedOut = true }
            break
        }
        return try Self.parse(data, timedOut: timedOut)
    }

    /// True once the server has closed the connection (reads EOF).
    func readsEOF() -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, 0) == 0
    }

    private static func parse(_ data: [UInt8], timedOut: Bool) throws -> RawResponse {
        let separator = Array("\r\n\r\n".utf8)
        guard let end = data.indices.first(where: { data[$0...].starts(with: separator) }) else {
            throw Failure(description: "no response head in \(data.count) bytes")
        }
        let lines = String(decoding: data[..<end], as: UTF8.self).split(separator: "\r\n").map(String.init)
        let statusLine = lines.first?.split(separator: " ") ?? []
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw Failure(description: "bad status line \(lines.first ?? "")")
        }
        let headers = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), String(line[line.index(after: colon)...].drop { $0 == " " }))
        }
        return RawResponse(status: status, headers: headers, body: Array(data[(end + 4)...]), timedOut: timedOut)
    }
}

extension RawHTTPClient {
    /// One request on a fresh connection, read to EOF.
    static func fetch(
        _ server: FaultServer,
        _ path: String,
        method: String = "GET",
        headers: [(String, String)] = []
    ) throws -> RawResponse {
        let client = try RawHTTPClient(port: server.port)
        try client.send(method, path, headers)
        return try client.receive()
    }
}
