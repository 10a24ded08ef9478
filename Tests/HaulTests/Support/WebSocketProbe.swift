import Foundation

/// A minimal WebSocket client over a plain socket (RFC 6455 text frames), for tests: it sends
/// no `Origin`, as a program would, or the one it is given, as a browser would.
enum WebSocketProbe {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Connects to `ws://127.0.0.1:PORT/jsonrpc`, sends `send`, and collects text messages until
    /// one satisfies `done`, or `timeout` of silence.
    static func collect(
        port: Int, send: [String], origin: String? = nil, timeout: Int = 30,
        until done: (String) -> Bool
    ) throws -> [String] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed") }
        defer { close(fd) }
        var wait = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "cannot connect to port \(port)") }
        var handshake = "GET /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        handshake += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let origin { handshake += "Origin: \(origin)\r\n" }
        try write(fd, Array((handshake + "\r\n").utf8))
        var buffer: [UInt8] = []
        let terminator = Array("\r\n\r\n".utf8)
        var found: Int?
        while found == nil {
            buffer += try read(fd)
            found = buffer.indices.first { buffer[$0...].starts(with: terminator) }
        }
        let headEnd = found! + 4
        let head = String(decoding: buffer[..<headEnd], as: UTF8.self)
        guard head.hasPrefix("HTTP/1.1 101") else { throw Failure(description: "upgrade refused: \(head.prefix(80))") }
        buffer.removeFirst(headEnd)
        for message in send { try write(fd, frame(message)) }
        var messages: [String] = []
        while true {
            while let (message, used) = parse(buffer) {
                buffer.removeFirst(used)
                guard let message else { return messages }  // a close frame
                messages.append(message)
                if done(message) { return messages }
            }
            buffer += try read(fd)
        }
    }

    /// A masked text frame, as a client must send.
    static func frame(_ text: String) -> [UInt8] {
        let payload = Array(text.utf8)
        var bytes: [UInt8] = [0x81]
        switch payload.count {
        case ..<126: bytes.append(0x80 | UInt8(payload.count))
        case ..<65536: bytes += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: bytes += [0x80 | 127] + (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let mask: [UInt8] = [1, 2, 3, 4]
        return bytes + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    /// One frame off the front of `bytes`: its text (nil for a close frame) and its length, or
    /// nil when the frame is not complete yet. Pings and other control frames read as "".
    static func parse(_ bytes: [UInt8]) -> (String?, Int)? {
        guard bytes.count >= 2 else { return nil }
        var length = Int(bytes[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard bytes.count >= 4 else { return nil }
            length = Int(bytes[2]) << 8 | Int(bytes[3])
            offset = 4
        } else if length == 127 {
            guard bytes.count >= 10 else { return nil }
            length = (2..<10).reduce(0) { $0 << 8 | Int(bytes[$1]) }
            offset = 10
        }
        guard bytes.count >= offset + length else { return nil }
        let opcode = bytes[0] & 0x0F
        if opcode == 0x8 { return (nil, offset + length) }
        return (opcode == 0x1 ? String(decoding: bytes[offset..<offset + length], as: UTF8.self) : "", offset + length)
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send failed: errno \(errno)") }
            sent += n
        }
    }

    static func read(_ fd: Int32) throws -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw Failure(description: n == 0 ? "the server closed the connection" : "no message in time") }
        return Array(chunk[..<n])
    }
}
