import AsyncHTTPClient
import Foundation
import HaulTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing
@testable import Haul

/// The plain-HTTP client's connections: kept alive, replaced when the server closed them,
/// given up when an answer is left unread, and failed when the server stops sending.
struct PlainHTTPClientTests {
    private func client(stallTimeout: Duration = .seconds(10)) -> PlainHTTPClient {
        PlainHTTPClient(
            group: MultiThreadedEventLoopGroup.singleton, stallTimeout: stallTimeout,
            allocator: HTTPTransport.receiveAllocator(rateLimit: nil))
    }

    private func get(
        _ client: PlainHTTPClient, _ server: ScriptedServer, _ target: String,
        method: HTTPMethod = .GET
    ) async throws -> (status: Int, body: String) {
        let response = try await client.execute(
            method, host: "127.0.0.1", port: server.port, target: target,
            headers: [:], connectTimeout: .seconds(5))
        var body = ""
        for try await part in response.body { body += String(buffer: part) }
        return (Int(response.status.code), body)
    }

    @Test func answersKeptAliveShareOneConnection() async throws {
        let server = try ScriptedServer { _, connection, server in
            while let request = connection.readRequest() {
                server.note(request.components(separatedBy: "\r\n")[0])
                connection.write(
                    request.hasPrefix("HEAD")
                        ? "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
                        : ScriptedServer.answer(String(request.split(separator: " ")[1])))
            }
        }
        defer { server.stop() }
        let client = client()
        defer { client.shutdown() }

        #expect(try await get(client, server, "/a") == (200, "/a"))
        #expect(try await get(client, server, "/b", method: .HEAD) == (200, ""))
        #expect(try await get(client, server, "/c?x=1") == (200, "/c?x=1"))
        #expect(server.accepted == 1)
        #expect(server.notes == ["GET /a HTTP/1.1", "HEAD /b HTTP/1.1", "GET /c?x=1 HTTP/1.1"])
    }

    /// The server drops a kept-alive connection just as the next request goes out (its idle
    /// timeout): the request goes again on a new connection, and the caller sees no error.
    @Test func aConnectionClosedUnderARequestIsReplaced() async throws {
        let server = try ScriptedServer { index, connection, _ in
            guard connection.readRequest() != nil else { return }
            connection.write(ScriptedServer.answer("first \(index)"))
            // The second request on this connection is read and left unanswered: closed.
            _ = connection.readRequest()
        }
        defer { server.stop() }
        let client = client()
        defer { client.shutdown() }

        #expect(try await get(client, server, "/a") == (200, "first 0"))
        #expect(try await get(client, server, "/b") == (200, "first 1"))
        #expect(server.accepted == 2)
    }

    /// The server closes a kept-alive connection while it sits idle, without a word (its
    /// keep-alive timeout): the client hears it then, and a request that cannot be sent twice
    /// (a PATCH with a body, as a tus upload sends) goes on a new connection instead of failing
    /// on the dead one.
    @Test func aConnectionClosedWhileIdleIsNotUsedAgain() async throws {
        let server = try ScriptedServer { index, connection, server in
            guard let request = connection.readRequest() else { return }
            server.note(String(request.prefix { $0 != " " }))
            if request.hasPrefix("PATCH") { _ = connection.readBody(count: 5) }
            connection.write(ScriptedServer.answer("\(index)"))
            // The script ends: the connection is closed after the answer.
        }
        defer { server.stop() }
        let client = client()
        defer { client.shutdown() }

        #expect(try await get(client, server, "/a") == (200, "0"))
        try await Task.sleep(for: .milliseconds(300))
        let body = RequestBody(length: 5) { _, _ in ByteBuffer(string: "hello") }
        let response = try await client.execute(
            .PATCH, host: "127.0.0.1", port: server.port, target: "/b",
            headers: [:], connectTimeout: .seconds(5), body: body)
        var answer = ""
        for try await part in response.body { answer += String(buffer: part) }
        #expect(Int(response.status.code) == 200)
        #expect(answer == "1")
        #expect(server.accepted == 2)
        #expect(server.notes == ["GET", "PATCH"])
    }

    /// The server writes to a kept-alive connection between requests, unasked (a `408` some
    /// servers send before an idle close they then delay): those bytes are not taken as the
    /// next request's answer; the connection is given up and the request goes on a new one.
    @Test func bytesSentUnaskedBetweenRequestsEndTheConnection() async throws {
        let server = try ScriptedServer { index, connection, server in
            guard connection.readRequest() != nil else { return }
            connection.write(ScriptedServer.answer("\(index)"))
            guard index == 0 else { return }
            usleep(100_000)
            connection.write("HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
            server.note(connection.clientClosed(within: 5) ? "closed" : "still open")
        }
        defer { server.stop() }
        let client = client()
        defer { client.shutdown() }

        #expect(try await get(client, server, "/a") == (200, "0"))
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await get(client, server, "/b") == (200, "1"))
        #expect(server.accepted == 2)
        #expect(try await waitUntil { server.notes == ["closed"] })
    }

    @Test func connectionCloseIsHonoured() async throws {
        let server = try ScriptedServer { index, connection, server in
            guard connection.readRequest() != nil else { return }
            connection.write(ScriptedServer.answer("\(index)", close: true))
            // Left open by the server: the client must not send another request on it.
            if connection.readRequest() != nil { server.note("a request after Connection: close") }
        }
        defer { server.stop() }
        let client = client()
        defer { client.shutdown() }

        #expect(try await get(client, server, "/a") == (200, "0"))
        #expect(try await get(client, server, "/b") == (200, "1"))
        #expect(server.accepted == 2)
        #expect(server.notes.isEmpty)
    }

    /// A body left unread (a segment that has what it needs, an error page) closes its
    /// connection: the rest of that answer would be read as the next one.
    @Test func aBodyLeftUnreadClosesItsConnection() async throws {
        let server = try ScriptedServer { _, connection, server in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + String(repeating: "x", count: 100))
            server.note(connection.clientClosed(within: 10) ? "closed" : "still open")
        }
        defer { server.stop() }
        let client = client()
        defer { client.shutdown() }

        let response = try await client.execute(
            .GET, host: "127.0.0.1", port: server.port, target: "/",
            headers: [:], connectTimeout: .seconds(5))
        var iterator = response.body.makeAsyncIterator()
        let first = try await iterator.next()
        #expect(first?.readableBytes ?? 0 > 0)
        _ = consume iterator
        #expect(try await waitUntil { server.notes == ["closed"] })
    }

    @Test func anAnswerThatStopsFailsAsStalled() async throws {
        let server = try ScriptedServer { _, connection, _ in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nsome")
            _ = connection.clientClosed(within: 10)
        }
        defer { server.stop() }
        let client = client(stallTimeout: .milliseconds(300))
        defer { client.shutdown() }

        let started = ContinuousClock.now
        await #expect(throws: DownloadError.stalled(after: .milliseconds(300))) {
            _ = try await get(client, server, "/")
        }
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func aCancelledWaitEndsAtOnce() async throws {
        let server = try ScriptedServer { _, connection, _ in
            guard connection.readRequest() != nil else { return }
            // No answer at all until the client gives up.
            _ = connection.clientClosed(within: 10)
        }
        defer { server.stop() }
        let client = client()
        defer { client.shutdown() }

        let waiting = Task { try await get(client, server, "/") }
        #expect(try await waitUntil { server.accepted == 1 })
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
    }

    /// A reader that stops reading holds back the socket: the connection keeps at most 768 KiB,
    /// the watermark and the reads of one wake-up (two of at most 256 KiB), whatever the server
    /// sends. 4 connections of a 1 GiB download peaked 5 MiB lower than with the old 1 MiB
    /// watermark and four reads.
    @Test func aReaderThatStopsReadingHoldsBackTheSocket() async throws {
        let mebibyte = String(repeating: "x", count: 1 << 20)
        let server = try ScriptedServer { _, connection, _ in
            guard connection.readRequest() != nil else { return }
            connection.write("HTTP/1.1 200 OK\r\nContent-Length: \(64 << 20)\r\n\r\n")
            // Blocks once every buffer is full; ends when the client goes.
            for _ in 0..<64 { connection.write(mebibyte) }
        }
        defer { server.stop() }
        let client = client()
        defer { client.shutdown() }

        let response = try await client.execute(
            .GET, host: "127.0.0.1", port: server.port, target: "/big", headers: [:], connectTimeout: .seconds(5))
        var parts = response.body.makeAsyncIterator()
        #expect(try await parts.next() != nil)
        // Not read for a while: the channel fills up to its bound and stops.
        try await Task.sleep(for: .milliseconds(500))
        let held = PlainHTTPExchange.mostBuffered.load(ordering: .relaxed)
        #expect(held >= PlainHTTPExchange.highWatermark)
        #expect(held <= 768 << 10, "a connection held \(held) bytes")
    }

    /// A body's chunks are read into the memory of chunks already written (two in flight, the
    /// third read into the first's): a fresh buffer per chunk cost the allocator a map, page
    /// faults and an unmap each time.
    @Test(.enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func aBodysChunksReuseTheMemoryOfChunksWritten() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.file("www"), withIntermediateDirectories: true)
        let chunkSize = 1 << 20
        let chunks = 8
        // For each call: the address of the spare it was given, and of the chunk it returned.
        let calls = Mutex<[(spare: UInt?, returned: UInt)]>([])
        let body = RequestBody(length: Int64(chunks * chunkSize)) { offset, spare in
            let given = spare.map { buffer in buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } }
            var buffer = (consume spare) ?? ByteBufferAllocator().buffer(capacity: chunkSize)
            buffer.clear()
            buffer.writeRepeatingByte(UInt8(offset >> 20), count: chunkSize)
            let returned = buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
            calls.withLock { $0.append((given, returned)) }
            return buffer
        }
        let status = try await NginxServer.withServer(root: dir.file("www"), options: .init(webDAV: true)) { nginx in
            let client = client()
            defer { client.shutdown() }
            let answer = try await client.execute(
                .PUT, host: "127.0.0.1", port: nginx.port, target: "/dav/b.bin", headers: [:], connectTimeout: .seconds(5), body: body)
            for try await _ in answer.body {}
            return Int(answer.status.code)
        }
        #expect(status == 201)
        let stored = try #require(dir.contents("www/b.bin"))
        #expect(stored == (0..<chunks).flatMap { Array(repeating: UInt8($0), count: chunkSize) })
        let seen = calls.withLock { $0 }
        #expect(seen.count == chunks)
        #expect(seen.prefix(2).allSatisfy { $0.spare == nil })
        for index in 2..<seen.count {
            #expect(seen[index].spare == seen[index - 2].returned, "chunk \(index) is read into chunk \(index - 2)'s memory")
            #expect(seen[index].returned == seen[index - 2].returned)
        }
    }
    /// A body that reads without waiting is written from the connection's loop, and handed to
    /// `chunk` only where that read declines (a rate limit set meanwhile, bytes not yet in the
    /// page cache); the server gets every byte in order either way.
    @Test(.enabled(if: NginxServer.executablePath != nil || ProcessInfo.processInfo.environment["CI"] != nil))
    func aBodyReadWithoutWaitingIsWrittenFromTheLoop() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.file("www"), withIntermediateDirectories: true)
        let step = Int64(RequestBody.directChunkSize)
        let length = 40 * step + 1000
        let expected = (0..<Int(length)).map { UInt8(truncatingIfNeeded: $0 % 251) }
        @Sendable func bytes(from offset: Int64) -> ArraySlice<UInt8> { expected[Int(offset)..<Int(min(offset + step, length))] }
        let declining: Set<Int64> = [3 * step, 4 * step, 39 * step]
        let handed = Mutex<[Int64]>([])
        let body = RequestBody(
            length: length,
            readNow: { offset, buffer in
                guard !declining.contains(offset) else { return false }
                buffer.clear()
                buffer.writeBytes(bytes(from: offset))
                return true
            },
            chunk: { offset, _ in
                handed.withLock { $0.append(offset) }
                return ByteBuffer(bytes: bytes(from: offset))
            })
        let status = try await NginxServer.withServer(root: dir.file("www"), options: .init(webDAV: true)) { nginx in
            let client = client()
            defer { client.shutdown() }
            let answer = try await client.execute(
                .PUT, host: "127.0.0.1", port: nginx.port, target: "/dav/p.bin", headers: [:], connectTimeout: .seconds(5), body: body)
            for try await _ in answer.body {}
            return Int(answer.status.code)
        }
        #expect(status == 201)
        #expect(dir.contents("www/p.bin") == expected)
        #expect(handed.withLock { $0 } == declining.sorted())
    }
}
