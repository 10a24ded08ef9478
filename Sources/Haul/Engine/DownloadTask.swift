import Foundation
import Synchronization

/// A download run by a ``Downloader`` outside any manager: watch its progress, pause,
/// resume, cancel, await it. Its status is written to its row as it changes.
///
/// A task runs until it stops: it completes, fails, is cancelled (its partial and record
/// deleted), is paused (both kept), or its ``Downloader`` shuts down (a pause for good).
/// ``result()`` and ``progress`` follow the current run and end when it stops; after
/// ``resume()`` they follow the next one. See <doc:ResumeSemantics#Pausing-a-task>.
///
/// ```swift
/// let task = try await downloader.download(request)
/// let token = await task.pause()  // every byte on disk is recorded, and in the token
/// task.resume()                   // or, in another process: download(resuming: token)
/// let result = try await task.result()
/// ```
public final class DownloadTask: Sendable {
    private struct State {
        /// Its lifecycle, the manager's own (a manager of one): the only record of where it is.
        var lifecycle = DownloadLifecycle.added(paused: false).0
        var run: Task<Void, Never>?
        /// How it ended for good, once it has: ``result()`` answers with it.
        var outcome: Result<DownloadResult, DownloadError>?
        /// The ``DownloadError/Kind/paused`` error while it is paused (recorded and not resumed).
        var paused: DownloadError?
        /// Callers of ``result()``, by a number each, so that one whose task is cancelled leaves.
        var waiters: [Int: CheckedContinuation<Result<DownloadResult, DownloadError>, Never>] = [:]
        var nextWaiter = 0
        /// Callers of ``pause()`` (and of a shutdown), waiting for the stop to be recorded.
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        /// The downloader is shutting down: nothing starts again.
        var closing = false
        var destination: String?
        var lastProgress = DownloadProgress(bytesDone: 0, bytesPerSecond: 0)
        /// The current run's progress sequence and its writing end.
        var progress: AsyncStream<DownloadProgress>
        var continuation: AsyncStream<DownloadProgress>.Continuation

        init() {
            (progress, continuation) = State.makeProgress()
        }

        /// A sequence for a new run; a slow reader sees the latest snapshot, never a backlog.
        static func makeProgress() -> (AsyncStream<DownloadProgress>, AsyncStream<DownloadProgress>.Continuation) {
            AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        }
    }

    private let state = Mutex(State())
    private let store: Store
    /// Its row in the store.
    let id: DownloadID
    private let makeRunner: @Sendable (DownloadRunner.RunEvents) -> DownloadRunner
    /// Told once the task has ended for good (its downloader stops keeping it).
    private let ended: @Sendable (DownloadID) -> Void

    init(
        store: Store, id: DownloadID, makeRunner: @escaping @Sendable (DownloadRunner.RunEvents) -> DownloadRunner,
        ended: @escaping @Sendable (DownloadID) -> Void = { _ in }
    ) {
        self.store = store
        self.id = id
        self.makeRunner = makeRunner
        self.ended = ended
    }

    /// Progress snapshots of the current run, about ten a second while bytes flow, and one
    /// for each passing condition (a retry, a wait for a lock: ``DownloadProgress/note``).
    ///
    /// The sequence ends when the run stops: completed, failed, cancelled or paused. After
    /// ``resume()`` this property gives the next run's sequence. One reader per sequence; a
    /// slow reader sees the latest snapshot, never a backlog.
    public var progress: AsyncStream<DownloadProgress> {
        state.withLock { $0.progress }
    }

    func start() {
        perform(state.withLock { Self.startIfQueued(&$0) })
    }

    /// Starts the next attempt when the lifecycle waits for its turn (a task has no queue: its
    /// turn is now). Under the lock, so that two callers cannot both start one.
    private static func startIfQueued(_ state: inout State) -> [DownloadLifecycle.Action] {
        state.closing ? [] : state.lifecycle.start()
    }

    /// Carries out a transition's actions. A task has no host slots and announces nothing but
    /// its end (through ``result()``) and its pauses (through ``pause()``).
    private func perform(_ actions: [DownloadLifecycle.Action]) {
        for action in actions {
            switch action {
            case .start(let attempt):
                let run = launch(attempt)
                // A pause or cancel that came between the start and now found no task to stop.
                // (Not written with Optional.map: Swift 6.3's optimizer fails on that closure.)
                let stopAsked = state.withLock { state -> Bool in
                    state.run = run
                    guard let running = state.lifecycle.runningAttempt else { return false }
                    return running.number == attempt && running.stop != nil
                }
                if stopAsked { run.cancel() }
            case .stopTransfer:
                state.withLock { $0.run }?.cancel()
            case .persist(let status):
                // A pause is recorded (and waited for) where its announcement is handled.
                guard status != .paused else { continue }
                store.writer.update(id, .status(status, error: state.withLock { $0.lifecycle.error }))
            case .discardPartial:
                if let destination = state.withLock({ $0.destination }) {
                    PartFile.discard(destination: destination, id: nil, store: store)
                }
            case .forget:
                store.writer.delete(id)
            case .announce(.completed), .announce(.failed), .announce(.removed):
                let outcome: Result<DownloadResult, DownloadError> = state.withLock { state in
                    if let result = state.lifecycle.result { return .success(result) }
                    return .failure(state.lifecycle.error ?? .cancelled)
                }
                finish(outcome)
            case .announce, .releaseHostSlot:
                break
            }
        }
    }

    private func launch(_ attempt: Int) -> Task<Void, Never> {
        let events = DownloadRunner.RunEvents(
            progress: { [weak self] progress in self?.publish(progress) },
            note: { [weak self] note in self?.publish(note: note) },
            resolved: { [weak self] destination in
                self?.state.withLock { $0.destination = destination }
            })
        let runner = makeRunner(events)
        return Task { [weak self] in
            let result: Result<DownloadResult, DownloadError>
            do throws(DownloadError) { result = .success(try await runner.run()) } catch { result = .failure(error) }
            await self?.runEnded(attempt, result)
        }
    }

    private func publish(_ progress: DownloadProgress) {
        let continuation = state.withLock { state in
            state.lastProgress = progress
            return state.continuation
        }
        continuation.yield(progress)
    }

    private func publish(note: String) {
        let (progress, continuation) = state.withLock { state in
            var progress = state.lastProgress
            progress.note = note
            return (progress, state.continuation)
        }
        continuation.yield(progress)
    }

    private func runEnded(_ attempt: Int, _ result: Result<DownloadResult, DownloadError>) async {
        let actions = state.withLock { state in
            state.run = nil
            return state.lifecycle.attemptEnded(attempt, result)
        }
        perform(actions)
        guard actions.contains(.announce(.paused)) else { return }
        // Paused (or stopped to go on at once): recorded before anyone hears of it, since a
        // caller (or another process) may read the record as soon as the pause returns.
        let resumed = state.withLock { $0.lifecycle.isQueued }
        store.writer.update(id, .status(resumed ? .queued : .paused))
        let token: ResumeToken?
        do throws(DownloadError) {
            try await store.flush()
            // The row as flushed: the runner recorded every byte it wrote before it ended.
            let named = state.withLock { $0.destination } != nil
            token = named ? try await recordedToken().get() : nil
        } catch {
            finish(.failure(error))
            return
        }
        // A resume while it stopped (or while the pause was recorded) goes on now; otherwise
        // this run has stopped: its progress ends and its waiters hear that it paused.
        let (restart, stopped, stopWaiters) = state.withLock { state in
            let restart = Self.startIfQueued(&state)
            var stopped: (DownloadError, [CheckedContinuation<Result<DownloadResult, DownloadError>, Never>], AsyncStream<DownloadProgress>.Continuation)?
            if restart.isEmpty, !state.lifecycle.isRunning, state.outcome == nil {
                let paused = DownloadError.paused(token, becauseClosed: state.closing)
                state.paused = paused
                stopped = (paused, Array(state.waiters.values), state.continuation)
                state.waiters = [:]
            }
            defer { state.stopWaiters = [] }
            return (restart, stopped, state.stopWaiters)
        }
        perform(restart)
        if let (paused, waiters, continuation) = stopped {
            continuation.finish()
            for waiter in waiters { waiter.resume(returning: .failure(paused)) }
        }
        for waiter in stopWaiters { waiter.resume() }
    }

    /// The token of the row as the store holds it. Read in a task of its own: the run that
    /// asks was cancelled to stop its transfer, and the store's reads give up in a cancelled task.
    private func recordedToken() async -> Result<ResumeToken?, DownloadError> {
        let (store, id) = (store, id)
        return await Task { () async -> Result<ResumeToken?, DownloadError> in
            do throws(DownloadError) { return .success(try await store.row(id).map(ResumeToken.init)) } catch { return .failure(error) }
        }.value
    }

    /// Ends the task for good: its result, its progress and every wait.
    private func finish(_ result: Result<DownloadResult, DownloadError>) {
        let (waiters, stopWaiters, continuation) = state.withLock { state in
            state.outcome = result
            state.paused = nil
            defer {
                state.waiters = [:]
                state.stopWaiters = []
            }
            return (Array(state.waiters.values), state.stopWaiters, state.continuation)
        }
        continuation.finish()
        for waiter in waiters { waiter.resume(returning: result) }
        for waiter in stopWaiters { waiter.resume() }
        ended(id)
    }

    /// Stops transferring, keeps the partial and its record, and returns once every byte
    /// written is flushed and recorded: NSURLSession's `cancelByProducingResumeData`, but the
    /// task stays resumable (``resume()``).
    ///
    /// ``result()`` then throws a ``DownloadError`` of kind ``DownloadError/Kind/paused``
    /// carrying the same token, and ``progress`` ends. A resume asked while the pause is under
    /// way lets the download go on at once; the token still covers what was on disk when it
    /// stopped.
    ///
    /// - Returns: a token whose ranges are exactly the bytes in the part file, for
    ///   ``Downloader/download(resuming:configure:)`` in this process or another; nil when
    ///   there is nothing to continue: the download had already ended (``result()`` says
    ///   how), or it stopped before the server named its file.
    @discardableResult
    public func pause() async -> ResumeToken? {
        perform(state.withLock { state in state.outcome == nil ? state.lifecycle.pause() : [] })
        await withCheckedContinuation { continuation in
            let stopped = state.withLock { state in
                guard state.outcome == nil, state.lifecycle.isRunning else { return true }
                state.stopWaiters.append(continuation)
                return false
            }
            if stopped { continuation.resume() }
        }
        return state.withLock { state in
            if let paused = state.paused { return paused.resumeToken }
            if case .failure(let error)? = state.outcome { return error.resumeToken }
            return nil
        }
    }

    /// Ends the task as its ``Downloader`` shuts down: a running attempt stops as for a pause
    /// (its bytes recorded), and every wait ends with a ``DownloadError/Kind/paused`` error.
    func close() async {
        state.withLock { $0.closing = true }
        let token = await pause()
        let closed = state.withLock { $0.outcome == nil }
        if closed { finish(.failure(.paused(token, becauseClosed: true))) }
    }

    /// Continues a paused download from its recorded ranges (or goes on, when its pause is
    /// still under way). A task that ended (completed, failed, cancelled, or its downloader
    /// shut down) stays ended.
    public func resume() {
        let actions = state.withLock { state in
            guard state.outcome == nil, !state.closing else { return [DownloadLifecycle.Action]() }
            let actions = state.lifecycle.resume() + Self.startIfQueued(&state)
            if state.paused != nil, state.lifecycle.isRunning {
                // A new run: its own progress sequence, and result() waits for it.
                state.paused = nil
                (state.progress, state.continuation) = State.makeProgress()
            }
            return actions
        }
        perform(actions.filter { $0 != .persist(.queued) })
    }

    /// Stops the download and removes its partial file and record. ``result()`` then throws a
    /// ``DownloadError`` of kind ``DownloadError/Kind/cancelled``.
    public func cancel() {
        perform(state.withLock { state in state.outcome == nil ? state.lifecycle.remove() : [] })
    }

    /// Waits for the current run to stop.
    ///
    /// Returns at once when the task has already stopped. Cancelling the task that awaits
    /// ends the wait at once with a ``DownloadError/Kind/cancelled`` error; the download
    /// itself goes on (``cancel()`` stops it).
    ///
    /// - Returns: the final path and size, once the file is complete, verified and in place.
    /// - Throws: ``DownloadError`` saying why it stopped: of kind ``DownloadError/Kind/paused``
    ///   (with its ``DownloadError/resumeToken``) when it was paused or its ``Downloader``
    ///   shut down, ``DownloadError/Kind/cancelled`` when it was cancelled, any other kind
    ///   when it failed.
    public func result() async throws(DownloadError) -> DownloadResult {
        try await outcome().get()
    }

    /// ``result()`` as a value.
    func outcome() async -> Result<DownloadResult, DownloadError> {
        let key = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let done: Result<DownloadResult, DownloadError>? = state.withLock { state in
                    if let outcome = state.outcome { return outcome }
                    if let paused = state.paused { return .failure(paused) }
                    // Checked under the lock the cancellation handler takes: a cancel that came
                    // first is seen here, one that comes later finds the waiter.
                    if Task.isCancelled { return .failure(.waitCancelled) }
                    state.waiters[key] = continuation
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: key) }
            waiter?.resume(returning: .failure(.waitCancelled))
        }
    }

    /// Whether the task is paused (stopped, partial kept, resumable).
    public var isPaused: Bool {
        state.withLock { $0.outcome == nil && $0.lifecycle.status == .paused }
    }

    /// A token from which another process can continue this download, from what the store
    /// holds now: while the download runs, its last flushed checkpoint (up to a second or 8 MiB
    /// behind); once ``pause()`` has returned, every byte on disk (``pause()`` returns the
    /// same token).
    ///
    /// - Throws: ``DownloadError`` when the destination is not known yet or the store fails.
    public func resumeToken() async throws(DownloadError) -> ResumeToken {
        guard state.withLock({ $0.destination }) != nil else {
            throw .invalidRequest("the download has not reached its destination yet")
        }
        guard let row = try await store.row(id), row.path != nil else {
            throw .invalidRequest("no record of download \(id)")
        }
        return ResumeToken(row)
    }
}
