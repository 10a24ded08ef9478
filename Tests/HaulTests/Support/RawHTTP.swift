import Foundation

/// One HTTP/1.1 exchange over a plain socket to 127.0.0.1, the request written byte for byte
/// as given (any Host, any headers, or none), the answer read until the server closes.
enum RawHTTP {
    struct Answer {
        var status: Int
        var head: String
        var body: String
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// `method target` with `headers` (written in order; add `Host` yourself) and `body`, sent
    /// from `source` (another loopback address is another client to the daemon).
    static func exchange(
        port: Int, _ method: String, _ target: String, headers: [(String, String)], body: String = "",
        timeout: Int = 30, from source: String? = nil
    ) throws -> Answer {
        var text = "\(method) \(target) HTTP/1.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { text += "Content-Length: \(body.utf8.count)\r\n" }
        text += "Connection: close\r\n\r\n" + body
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
        defer { close(fd) }
        var wait = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { throw Failure(description: "bind to \(source) failed: errno \(errno)") }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "connect to port \(port) failed: errno \(errno)") }
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }  // the server may answer and close before reading it all
            sent += n
        }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            data += chunk[..<n]
        }
        let response = String(decoding: data, as: UTF8.self)
        guard let split = response.range(of: "\r\n\r\n"),
            let status = Int(response.split(separator: " ", maxSplits: 2).dropFirst().first ?? "")
        else { throw Failure(description: "no HTTP answer: \(response.prefix(200))") }
        return Answer(status: status, head: String(response[..<split.lowerBound]), body: String(response[split.upperBound...]))
    }
}

/// Runs blocking work (a ``RawHTTP`` exchange) on a thread of its own, so that many can wait
/// at once without holding the few threads of Swift's cooperative pool.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
