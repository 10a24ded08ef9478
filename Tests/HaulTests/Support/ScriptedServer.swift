import Foundation
import Synchronization

/// A TCP server on 127.0.0.1 whose every connection follows a script: read a request, write
/// these bytes, close now or keep still. For what an HTTP server does to a connection between
/// answers (keeps it, closes it, stops mid-body), which a real server does only at its own time.
final class ScriptedServer: Sendable {
    /// One accepted connection, on a thread of its own.
    struct Connection {
        let fd: Int32

        /// The next request's head, or nil when the client closed (or sent nothing for 10 s).
        func readRequest() -> String? {
            var data: [UInt8] = []
            var byte: UInt8 = 0
            while true {
                let n = recv(fd, &byte, 1, 0)
                guard n == 1 else { return nil }
                data.append(byte)
                if data.count >= 4, data.suffix(4) == [13, 10, 13, 10] { return String(decoding: data, as: UTF8.self) }
            }
        }

        /// `count` bytes of a request's body, or nil when the client closed first.
        func readBody(count: Int) -> [UInt8]? {
            var data = [UInt8](repeating: 0, count: count)
            var received = 0
            while received < count {
                let n = data[received...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard n > 0 else { return nil }
                received += n
            }
            return data
        }

        func write(_ text: String) {
            let bytes = Array(text.utf8)
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard n > 0 else { return }
                sent += n
            }
        }

        /// Whether the client closed its end (reads end-of-file) within `seconds`.
        func clientClosed(within seconds: Int) -> Bool {
            var wait = timeval(tv_sec: seconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, 0) == 0
        }
    }

    let port: Int
    private let listener: Int32
    private let state = Mutex<(accepted: Int, notes: [String])>((0, []))

    /// Starts listening; `script` runs once per accepted connection, which is closed after it.
    init(_ script: @escaping @Sendable (_ index: Int, Connection, ScriptedServer) -> Void) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard fd >= 0, bound else { throw RawHTTP.Failure(description: "cannot listen on 127.0.0.1: errno \(errno)") }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let accepting = Thread { [self] in
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                let index = state.withLock { state in
                    defer { state.accepted += 1 }
                    return state.accepted
                }
                var wait = timeval(tv_sec: 10, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
                let serving = Thread { [self] in
                    script(index, Connection(fd: client), self)
                    close(client)
                }
                serving.start()
            }
        }
        accepting.start()
    }

    /// Connections accepted so far.
    var accepted: Int { state.withLock { $0.accepted } }

    /// What scripts wrote down (for checks made on their threads).
    var notes: [String] { state.withLock { $0.notes } }

    func note(_ text: String) { state.withLock { $0.notes.append(text) } }

    /// Stops accepting (the accept loop ends when the socket is shut down).
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// A 200 with `body` and a length, kept alive unless `close`.
    static func answer(_ body: String, close: Bool = false) -> String {
        "HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n" + body
    }
}
