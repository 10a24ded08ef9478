import Foundation
import NIOCore
import PostgresNIO
import Synchronization

/// One connection to the server, made on first use and again once it broke. An exclusive slot
/// lends it to one user at a time (a transaction must not interleave with another); a shared
/// one to all at once (PostgreSQL answers their statements in turn). Once closed it lends none.
actor PostgreSQLConnectionSlot {
    private let connect: @Sendable () async throws -> PostgresConnection
    private let exclusive: Bool
    private var connection: PostgresConnection?
    /// A connection being made: everyone who needs one meanwhile waits for it.
    private var connecting: Task<PostgresConnection, any Error>?
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var closed = false
    private let sleep: @Sendable (ContinuousClock.Instant) async throws -> Void

    /// `sleep` stands for `Task.sleep(until:)` in the statements' timers (see ``answered(_:within:sleep:_:)``).
    init(
        connect: @escaping @Sendable () async throws -> PostgresConnection, exclusive: Bool,
        sleep: @escaping @Sendable (ContinuousClock.Instant) async throws -> Void = PostgreSQLConnectionSlot.sleep
    ) {
        self.connect = connect
        self.exclusive = exclusive
        self.sleep = sleep
    }

    /// Runs `body` on the slot's connection (made if needed) once the slot is free. With a
    /// `limit`, counted from then, a `body` that has not returned by then (a server gone
    /// silent) has its connection closed, which ends the statement it waits on, and
    /// ``StoreTimeout`` is thrown; so is a cancellation, which PostgresNIO's statements do not
    /// heed by themselves.
    func use<T: Sendable>(within limit: Duration? = nil, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        if exclusive {
            while busy { await withCheckedContinuation { waiters.append($0) } }
            busy = true
        }
        defer {
            if exclusive {
                busy = false
                if !waiters.isEmpty { waiters.removeFirst().resume() }
            }
        }
        let connection = try await current()
        do {
            guard let limit else { return try await body(connection) }
            return try await Self.answered(connection, within: limit, sleep: sleep, body)
        } catch {
            // A connection that broke is let go; the next use makes another.
            if connection.isClosed || PostgreSQLStoreDatabase.isTransient(error) || error is CancellationError {
                if self.connection === connection { self.connection = nil }
                try? await connection.close()
            }
            throw error
        }
    }

    /// `body`'s result, or ``StoreTimeout`` once `limit` has passed without one; the connection
    /// is closed then (and on cancellation), which ends the statement waiting on it. The caller
    /// does not wait for `body` to notice: a statement on a connection whose server vanished may
    /// never be answered, and the slot must not wait with it.
    ///
    /// Only time this process ran counts. A timer that wakes well after it was due slept through
    /// a pause of the process (`SIGSTOP`, a suspended machine, a starved CPU), not through a
    /// silent server: the answer may be waiting unread, so the statement gets `limit` again from
    /// then. `sleep` stands for `Task.sleep(until:)` (tests pass one that wakes late, as after a pause).
    static func answered<T: Sendable>(
        _ connection: PostgresConnection, within limit: Duration,
        sleep: @escaping @Sendable (ContinuousClock.Instant) async throws -> Void = PostgreSQLConnectionSlot.sleep,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let outcome = FirstOutcome<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                outcome.start(
                    continuation,
                    work: Task {
                        do { outcome.finish(.success(try await body(connection))) } catch { outcome.finish(.failure(error)) }
                    },
                    timer: Task {
                        var due = ContinuousClock.now + limit
                        for _ in 0..<8 {
                            guard (try? await sleep(due)) != nil else { return }
                            guard ContinuousClock.now - due > Self.pauseSlack else { break }
                            due = .now + limit
                        }
                        outcome.finish(.failure(StoreTimeout(seconds: Int(limit.components.seconds))))
                        try? await connection.close()
                    })
            }
        } onCancel: {
            outcome.finish(.failure(CancellationError()))
            let _: EventLoopFuture<Void> = connection.close()
        }
    }

    /// How late a timer may wake before its lateness is taken for a pause of this process.
    static let pauseSlack: Duration = .milliseconds(200)

    @Sendable static func sleep(until instant: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: instant, clock: .continuous)
    }

    private func current() async throws -> PostgresConnection {
        guard !closed else { throw StoreClosed() }
        if let connection, !connection.isClosed { return connection }
        connection = nil
        if let connecting { return try await connecting.value }
        let task = Task { try await connect() }
        connecting = task
        defer { connecting = nil }
        let made = try await task.value
        guard !closed else {
            try? await made.close()
            throw StoreClosed()
        }
        connection = made
        return made
    }

    /// Closes the connection, once what uses it now is done, and lends none from now on.
    func close() async {
        closed = true
        if exclusive {
            while busy { await withCheckedContinuation { waiters.append($0) } }
        }
        _ = await connecting?.result
        if let connection { try? await connection.close() }
        connection = nil
        for waiter in waiters { waiter.resume() }
        waiters = []
    }
}

/// The first of a statement's answer, its timeout and a cancellation: it resumes the waiting
/// caller once, and stops the other two.
final class FirstOutcome<T: Sendable>: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<T, any Error>?, early: Result<T, any Error>?, tasks: [Task<Void, Never>])>(
        (nil, nil, []))

    func start(_ continuation: CheckedContinuation<T, any Error>, work: Task<Void, Never>, timer: Task<Void, Never>) {
        let early: Result<T, any Error>? = state.withLock { state in
            state.tasks = [work, timer]
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        if let early {
            work.cancel()
            timer.cancel()
            continuation.resume(with: early)
        }
    }

    func finish(_ result: Result<T, any Error>) {
        let (continuation, tasks): (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) = state.withLock { state in
            if state.continuation == nil, state.tasks.isEmpty {
                // Before start: kept for it (a cancellation that came first).
                if state.early == nil { state.early = result }
                return (nil, [])
            }
            defer { state.continuation = nil }
            return (state.continuation, state.tasks)
        }
        guard let continuation else { return }
        for task in tasks { task.cancel() }
        continuation.resume(with: result)
    }
}
