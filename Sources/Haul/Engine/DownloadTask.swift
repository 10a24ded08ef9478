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

    private enum Phase {
        case running, pausing, paused, resuming, cancelling
        case finished(Result<DownloadResult, DownloadError>)
    }

    private struct State {
        var phase: Phase = .paused
        var run: Task<Void, Never>?
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
        state.withLock { state in
            state.phase = .running
            state.run = launch()
        }
        store.writer.update(id, .status(.running))
    }

    private func launch() -> Task<Void, Never> {
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
            await self?.runEnded(result)
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

    private func runEnded(_ result: Result<DownloadResult, DownloadError>) async {
        enum Next { case done, paused, relaunch, cleanUp(String?) }
        let next: Next = state.withLock { state in
            state.run = nil
            switch state.phase {
            case .pausing:
                // Paused once the pause is recorded (below); a resume meanwhile relaunches then.
                if case .failure(let error) = result, error.kind == .cancelled { return .paused }
                return .done
            case .resuming:
                if case .failure(let error) = result, error.kind == .cancelled {
                    state.phase = .running
                    state.run = launch()
                    return .relaunch
                }
                return .done
            case .cancelling:
                return .cleanUp(state.destination)
            default:
                return .done
            }
        }
        switch next {
        case .paused:
            store.writer.update(id, .status(.paused))
            do throws(DownloadError) {
                // A caller, or another process, may read the record as soon as the pause returns.
                try await store.flush()
            } catch {
                finish(.failure(error))
                return
            }
            let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
                if case .resuming = state.phase {
                    state.phase = .running
                    state.run = launch()
                    return []
                }
                state.phase = .paused
                defer { state.stopWaiters = [] }
                return state.stopWaiters
            }
            for waiter in waiters { waiter.resume() }
        case .relaunch:
            return
        case .cleanUp(let destination):
            await removePartial(destination: destination)
            finish(.failure(.cancelled))
        case .done:
            switch result {
            case .success: store.writer.update(id, .status(.completed))
            case .failure(let error): store.writer.update(id, .status(.failed, error: error))
            }
            finish(result)
        }
    }

    private func finish(_ result: Result<DownloadResult, DownloadError>) {
        let (waiters, stopWaiters) = state.withLock { state in
            state.phase = .finished(result)
            defer { state.waiters = []; state.stopWaiters = [] }
            return (state.waiters, state.stopWaiters)
        }
        continuation.finish()
        for waiter in waiters { waiter.resume(returning: result) }
        for waiter in stopWaiters { waiter.resume() }
    }

    /// Deletes the partial file and the row.
    private func removePartial(destination: String?) async {
        if let destination { PartFile.discard(destination: destination, id: nil, store: store) }
        store.writer.delete(id)
    }

    /// Stops transferring and keeps the partial and its record; ``resume()`` continues.
    public func pause() {
        state.withLock { state in
            switch state.phase {
            case .running, .resuming:
                state.phase = .pausing
                state.run?.cancel()
            default:
                break
            }
        }
    }

    /// Pauses, and returns once the transfer has stopped and its state is saved (or the
    /// download had already ended).
    public func pauseAndWait() async {
        pause()
        await withCheckedContinuation { continuation in
            let stopped = state.withLock { state in
                switch state.phase {
                case .paused, .finished: return true
                default:
                    state.stopWaiters.append(continuation)
                    return false
                }
            }
            if stopped { continuation.resume() }
        }
    }

    /// Continues a paused download from its recorded ranges.
    public func resume() {
        state.withLock { state in
            switch state.phase {
            case .paused:
                state.phase = .running
                state.run = launch()
            case .pausing:
                state.phase = .resuming
            default:
                break
            }
        }
    }

    /// Stops the download and removes its partial file and record. ``result()`` then throws a
    /// ``DownloadError`` of kind ``DownloadError/Kind/cancelled``.
    public func cancel() {
        let cleanUpNow: String?? = state.withLock { state in
            switch state.phase {
            case .running, .pausing, .resuming:
                state.phase = .cancelling
                state.run?.cancel()
                return nil
            case .paused:
                state.phase = .cancelling
                return .some(state.destination)
            case .cancelling, .finished:
                return nil
            }
        }
        if let destination = cleanUpNow {
            Task {
                await removePartial(destination: destination)
                finish(.failure(.cancelled))
            }
        }
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
                if case .finished(let result) = state.phase { return result }
                state.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Whether the task is paused (stopped, partial kept, resumable).
    public var isPaused: Bool {
        state.withLock { if case .paused = $0.phase { true } else { false } }
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
