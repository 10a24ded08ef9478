import NIOCore
import NIOHTTP1
import Synchronization

/// One request and its answer on a ``PlainHTTPConnection``: the head and the body parts as the
/// channel delivers them, and whoever waits for them.
///
/// The channel's handler feeds it on the event loop; the download's task reads it from
/// anywhere. Parts wait here until read, so the connection is free for its next request as
/// soon as the answer's end has arrived.
final class PlainHTTPExchange: Sendable {
    /// What the reader and the channel share.
    struct State {
        var head: HTTPResponseHead?
        var headWaiter: CheckedContinuation<HTTPResponseHead, any Error>?
        var parts = CircularBuffer<ByteBuffer>()
        var buffered = 0
        var ended = false
        var failure: (any Error)?
        var bodyWaiter: CheckedContinuation<ByteBuffer?, any Error>?
        /// The handler stopped asking the channel for more: the reader has enough waiting.
        var readingPaused = false
        /// Any byte of the answer arrived (a failure before that may be a stale keep-alive
        /// connection, safe to try again on a new one).
        var answered = false
        /// The body's iterator was made: from then on its end, not the body's, lets go.
        var iterated = false
    }

    /// Body bytes waiting to be read beyond which the channel is not read further, so a slow
    /// disk holds back the socket. The kernel's socket buffer is the slack beyond it: 256 KiB
    /// (one read) lost no speed against 1 MiB and cut a 4-connection download's peak memory.
    static let highWatermark = 256 << 10

    let connection: PlainHTTPConnection
    private let state = Mutex(State())

    init(connection: PlainHTTPConnection) {
        self.connection = connection
    }

    // MARK: The channel's side (on its event loop)

    func received(_ head: HTTPResponseHead) {
        let waiter = state.withLock { state in
            state.answered = true
            state.head = head
            defer { state.headWaiter = nil }
            return state.headWaiter
        }
        waiter?.resume(returning: head)
    }

    func received(_ part: ByteBuffer) {
        let waiter = state.withLock { state -> CheckedContinuation<ByteBuffer?, any Error>? in
            if let waiter = state.bodyWaiter {
                state.bodyWaiter = nil
                return waiter
            }
            state.parts.append(part)
            state.buffered += part.readableBytes
            return nil
        }
        waiter?.resume(returning: part)
    }

    func receivedEnd() {
        let waiter = state.withLock { state in
            state.ended = true
            defer { state.bodyWaiter = nil }
            return state.bodyWaiter
        }
        waiter?.resume(returning: nil)
    }

    /// Whether the channel should be read further; false records that it paused.
    func wantsMore() -> Bool {
        let (more, held) = state.withLock { state -> (Bool, Int) in
            if state.ended || state.failure != nil { return (false, 0) }
            if state.buffered < Self.highWatermark { return (true, 0) }
            state.readingPaused = true
            return (false, state.buffered)
        }
        if held > 0 { _ = Self.mostBuffered.max(held, ordering: .relaxed) }
        return more
    }

    /// The most body bytes any exchange of this process held when it stopped reading: the
    /// watermark plus what the reads of one wake-up brought (the memory bound the tests check).
    static let mostBuffered = Atomic<Int>(0)

    /// Ends the exchange with `error` unless it ended already. Returns whether it was still open.
    @discardableResult
    func fail(_ error: any Error) -> Bool {
        let (head, body, open) = state.withLock { state in
            guard !state.ended, state.failure == nil else {
                return (CheckedContinuation<HTTPResponseHead, any Error>?.none, CheckedContinuation<ByteBuffer?, any Error>?.none, false)
            }
            state.failure = error
            defer {
                state.headWaiter = nil
                state.bodyWaiter = nil
            }
            return (state.headWaiter, state.bodyWaiter, true)
        }
        head?.resume(throwing: error)
        body?.resume(throwing: error)
        return open
    }

    var answered: Bool { state.withLock { $0.answered } }

    var iterated: Bool {
        get { state.withLock { $0.iterated } }
        set { state.withLock { $0.iterated = newValue } }
    }

    // MARK: The reader's side

    /// The answer's head, once it arrives.
    func head() async throws -> HTTPResponseHead {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponseHead, any Error>) in
                let ready: Result<HTTPResponseHead, any Error>? = state.withLock { state in
                    if let head = state.head { return .success(head) }
                    if let failure = state.failure { return .failure(failure) }
                    state.headWaiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// The next part of the body; nil at its end.
    func next() async throws -> ByteBuffer? {
        // Most parts of a small answer are already here: no continuation for them.
        switch take() {
        case .part(let part): return part
        case .end: return nil
        case .failed(let error): throw error
        case .wait: break
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ByteBuffer?, any Error>) in
                let ready: Result<ByteBuffer?, any Error>? = state.withLock { state in
                    if let part = state.parts.popFirst() {
                        state.buffered -= part.readableBytes
                        return .success(part)
                    }
                    if let failure = state.failure { return .failure(failure) }
                    if state.ended { return .success(nil) }
                    state.bodyWaiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
    }

    private enum Taken {
        case part(ByteBuffer)
        case end
        case failed(any Error)
        case wait
    }

    private func take() -> Taken {
        let (taken, resume) = state.withLock { state -> (Taken, Bool) in
            if let part = state.parts.popFirst() {
                state.buffered -= part.readableBytes
                let resume = state.readingPaused && state.buffered < Self.highWatermark
                if resume { state.readingPaused = false }
                return (.part(part), resume)
            }
            if let failure = state.failure { return (.failed(failure), false) }
            if state.ended { return (.end, false) }
            let resume = state.readingPaused
            state.readingPaused = false
            return (.wait, resume)
        }
        if resume { connection.resumeReading() }
        return taken
    }

    /// The task waiting was cancelled: the answer will not be read, so neither is the connection.
    func cancel() {
        if fail(CancellationError()) { connection.close() }
    }

    /// The reader let go of the body: an answer not read to its end leaves the connection
    /// unusable for another request.
    func abandon() {
        if fail(CancellationError()) { connection.close() }
    }
}

/// An answer's body as an async sequence of buffers, read once. Letting go of its iterator
/// before the end, or of the body without iterating it, closes the connection (as
/// AsyncHTTPClient's body does): a segment that stops reading where its range ends frees its
/// connection at once, not when its answer goes out of scope.
struct PlainHTTPBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    /// Lives as long as some copy of the body does.
    final class Holder: Sendable {
        let exchange: PlainHTTPExchange
        init(_ exchange: PlainHTTPExchange) { self.exchange = exchange }
        deinit { if !exchange.iterated { exchange.abandon() } }
    }

    /// Lives as long as the iterator does.
    final class Reader: Sendable {
        let exchange: PlainHTTPExchange
        init(_ exchange: PlainHTTPExchange) { self.exchange = exchange }
        deinit { exchange.abandon() }
    }

    let holder: Holder

    init(_ exchange: PlainHTTPExchange) {
        holder = Holder(exchange)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let reader: Reader
        mutating func next() async throws -> ByteBuffer? { try await reader.exchange.next() }
    }

    func makeAsyncIterator() -> AsyncIterator {
        holder.exchange.iterated = true
        return AsyncIterator(reader: Reader(holder.exchange))
    }
}
