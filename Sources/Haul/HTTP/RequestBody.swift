import AsyncHTTPClient
import NIOCore

/// A request body of known length that can be sent again from its start: an upload's bytes,
/// read a chunk at a time as the connection takes them.
///
/// `chunk` gives the bytes at an offset within the body (at most ``chunkSize``, never none
/// before the end). Being a function of the offset rather than an iterator, the body can be
/// sent again on a fresh connection when a kept-alive one turns out stale: the caller's file
/// is read again, nothing is held in memory.
struct RequestBody: Sendable {
    /// The body's length in bytes (its `Content-Length`).
    let length: Int64
    /// The bytes from `offset` on, at most ``chunkSize`` of them, read into `spare` when given:
    /// a chunk the caller wrote and holds no more, whose memory is reused. (A fresh 1 MiB
    /// buffer per chunk is mapped and unmapped by the allocator each time: its page faults
    /// and unmaps were a fifth of an upload's CPU.)
    let chunk: @Sendable (_ offset: Int64, _ spare: consuming ByteBuffer?) async throws -> ByteBuffer

    /// The bytes from `offset` on, at most ``directChunkSize`` of them, read into `buffer`
    /// (cleared first, or replaced when too small) on the calling thread, only if that takes no
    /// wait: the bytes are in the page cache and no rate limit is in force. False when it
    /// cannot, and for any failure: the caller then takes ``chunk``, which waits and says what
    /// failed. Nil where the source has no such read.
    ///
    /// A connection's event loop writes a body this way (``PlainHTTPClient``), as curl does on
    /// one thread: read a little, write it, again until the socket is full, with no hop to
    /// another thread and back per chunk. Measured on a 512 MiB `PUT` to nginx over loopback,
    /// medians of 20 alternated with `curl -T`: 0.96× curl's wall this way, 0.99× with 1 MiB
    /// chunks read on NIO's blocking-I/O threads (`BENCHMARKS.md`).
    var readNow: (@Sendable (_ offset: Int64, _ buffer: inout ByteBuffer) -> Bool)?

    /// The most a chunk carries: big enough that a read and a write cost little per byte, small
    /// enough that two in flight keep memory flat.
    static let chunkSize = 1 << 20

    /// The most ``readNow`` reads at once: small enough that the buffer stays in the cache
    /// between the read that fills it and the write that empties it.
    static let directChunkSize = 128 << 10

    init(
        length: Int64,
        readNow: (@Sendable (_ offset: Int64, _ buffer: inout ByteBuffer) -> Bool)? = nil,
        chunk: @escaping @Sendable (_ offset: Int64, _ spare: consuming ByteBuffer?) async throws -> ByteBuffer
    ) {
        self.length = length
        self.readNow = readNow
        self.chunk = chunk
    }

    /// The body as AsyncHTTPClient streams it (HTTP/2, SOCKS proxies).
    var asyncHTTPClientBody: HTTPClientRequest.Body {
        .stream(Chunks(body: self), length: .known(length))
    }

    /// The chunks in order, for AsyncHTTPClient.
    struct Chunks: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let body: RequestBody

        struct AsyncIterator: AsyncIteratorProtocol {
            let body: RequestBody
            var offset: Int64 = 0

            mutating func next() async throws -> ByteBuffer? {
                guard offset < body.length else { return nil }
                let chunk = try await body.chunk(offset, nil)
                guard chunk.readableBytes > 0 else { throw RequestBodyEndedEarly() }
                offset += Int64(chunk.readableBytes)
                return chunk
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(body: body) }
    }
}

/// A body's source gave fewer bytes than its length said.
struct RequestBodyEndedEarly: Error {}
