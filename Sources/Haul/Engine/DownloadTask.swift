import Foundation
import Synchronization

/// A download run by a ``Downloader`` outside any manager: watch its progress, pause,
/// resume, cancel, await it. Its status is written to its row as it changes.
///
/// Pausing keeps the partial file and its record; cancelling removes both.
public final class DownloadTask: Sendable {
    /// Progress snapshots, newest first to go: a slow reader sees the latest, never a backlog.
    /// Ends when the download ends (completed, failed or cancelled). One reader.
    public let progress: AsyncStream<DownloadProgress>

    private struct State {
        /// Its lifecycle, the manager's own (a manager of one): the only record of where it is.
        var lifecycle = DownloadLifecycle.added(paused: false).0
        var run: Task<Void, Never>?
        /// How it ended, once it has: ``result()`` answers with it.
        var outcome: Result<DownloadResult, DownloadError>?
        var waiters: [CheckedContinuation<Result<DownloadResult, DownloadError>, Never>] = []
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        var destination: String?
        var lastProgress = DownloadProgress(bytesDone: 0, bytesPerSecond: 0)
    }

    private let state = Mutex(State())
    private let continuation: AsyncStream<DownloadProgress>.Continuation
    private let store: Store
    /// Its row in the store.
    let id: DownloadID
    private let makeRunner: @Sendable (DownloadRunner.RunEvents) -> DownloadRunner

    init(store: Store, id: DownloadID, makeRunner: @escaping @Sendable (DownloadRunner.RunEvents) -> DownloadRunner) {
        (progress, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.store = store
        self.id = id
        self.makeRunner = makeRunner
    }

    func start() {
        perform(state.withLock { Self.startIfQueued(&$0) })
    }

    /// Starts the next attempt when the lifecycle waits for its turn (a task has no queue: its
    /// turn is now). Under the lock, so that two callers cannot both start one.
    private static func startIfQueued(_ state: inout State) -> [DownloadLifecycle.Action] {
        state.lifecycle.start()
    }

    /// Carries out a transition's actions. A task has no host slots and announces nothing but
    /// its end (through ``result()``) and its pauses (through ``pauseAndWait()``).
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
        state.withLock { $0.lastProgress = progress }
        continuation.yield(progress)
    }

    private func publish(note: String) {
        let progress = state.withLock { state in
            var progress = state.lastProgress
            progress.note = note
            return progress
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
        do throws(DownloadError) {
            try await store.flush()
        } catch {
            finish(.failure(error))
            return
        }
        // A resume while it stopped (or while the pause was recorded) goes on now.
        perform(state.withLock { Self.startIfQueued(&$0) })
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            guard !state.lifecycle.isRunning else { return [] }
            defer { state.stopWaiters = [] }
            return state.stopWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func finish(_ result: Result<DownloadResult, DownloadError>) {
        let (waiters, stopWaiters) = state.withLock { state in
            state.outcome = result
            defer { state.waiters = []; state.stopWaiters = [] }
            return (state.waiters, state.stopWaiters)
        }
        continuation.finish()
        for waiter in waiters { waiter.resume(returning: result) }
        for waiter in stopWaiters { waiter.resume() }
    }

    /// Stops transferring and keeps the partial and its record; ``resume()`` continues.
    public func pause() {
        perform(state.withLock { state in state.outcome == nil ? state.lifecycle.pause() : [] })
    }

    /// Pauses, and returns once the transfer has stopped and its state is saved (or the
    /// download had already ended).
    public func pauseAndWait() async {
        pause()
        await withCheckedContinuation { continuation in
            let stopped = state.withLock { state in
                guard state.outcome == nil, state.lifecycle.isRunning else { return true }
                state.stopWaiters.append(continuation)
                return false
            }
            if stopped { continuation.resume() }
        }
    }

    /// Continues a paused download from its recorded ranges (or goes on, when its pause is
    /// still under way).
    public func resume() {
        let actions = state.withLock { state in
            // An ended task stays ended: a failed one is not tried again here.
            state.outcome == nil ? state.lifecycle.resume() + Self.startIfQueued(&state) : []
        }
        perform(actions.filter { $0 != .persist(.queued) })
    }

    /// Stops the download and removes its partial file and record. ``result()`` then throws a
    /// ``DownloadError`` of kind ``DownloadError/Kind/cancelled``.
    public func cancel() {
        perform(state.withLock { state in state.outcome == nil ? state.lifecycle.remove() : [] })
    }

    /// Waits for the download to end. A pause does not end it; a cancel does.
    ///
    /// - Returns: the final path and size.
    /// - Throws: ``DownloadError`` saying why it failed.
    public func result() async throws(DownloadError) -> DownloadResult {
        try await outcome().get()
    }

    /// ``result()`` as a value.
    func outcome() async -> Result<DownloadResult, DownloadError> {
        await withCheckedContinuation { continuation in
            let done: Result<DownloadResult, DownloadError>? = state.withLock { state in
                if let outcome = state.outcome { return outcome }
                state.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Whether the task is paused (stopped, partial kept, resumable).
    public var isPaused: Bool {
        state.withLock { $0.outcome == nil && $0.lifecycle.status == .paused }
    }

    /// A token from which another process can continue this download, from what the store
    /// holds now (the last checkpoint).
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
