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

    /// The most a chunk carries: big enough that a read and a write cost little per byte, small
    /// enough that two in flight keep memory flat.
    static let chunkSize = 1 << 20

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
