/// One managed download's lifecycle as a value: an event in, the actions to perform out.
///
/// The manager holds exactly one per download and keeps no other state flag: the status it
/// stores and every event it sends come from these transitions. Each attempt (``start()``)
/// therefore ends with exactly one terminal event — paused, completed, failed or removed —
/// whatever arrives while it stops (a pause, then a cancel, then a remove, a shutdown).
struct DownloadLifecycle: Sendable {
    enum State: Sendable {
        /// Not running: waiting its turn, or held until resumed (`paused`).
        case waiting(paused: Bool)
        /// An attempt is transferring; `stop` is set once something asked it to stop.
        case running(Attempt)
        case completed(DownloadResult)
        /// Boxed: failures are few, and the box keeps every other download's entry small.
        indirect case failed(DownloadError)
    }

    struct Attempt: Sendable, Equatable {
        var number: Int
        /// What to do once the transfer has stopped; the strongest request wins.
        var stop: Stop?
        /// A resume arrived while a pause was under way: wait for a turn again afterwards.
        var resumeAfterStop = false
        /// It holds a host connection slot and a place among the downloads running at once;
        /// it gives both up once every byte is in (only the commit to the final name is left).
        var holdsSlot = true
    }

    /// Why a running attempt is being stopped, weakest first.
    enum Stop: Int, Comparable, Sendable {
        /// The manager is going away: the row keeps saying "running", so a restore continues it first.
        case shutdown
        /// The request changed: stop, then wait for a turn again with the new one.
        case restart
        case pause
        /// Stop and delete the partial; stays listed as failed (cancelled).
        case cancel
        /// Stop, delete the partial, forget the download.
        case remove

        static func < (a: Stop, b: Stop) -> Bool { a.rawValue < b.rawValue }
    }

    /// What an event tells a subscriber.
    enum Announcement: Sendable, Equatable {
        case added, started, paused, completed, failed, removed
    }

    enum Action: Sendable, Equatable {
        /// Launch attempt `number` of the transfer.
        case start(attempt: Int)
        /// Cancel the running transfer; it saves its state and ends, which comes back as
        /// ``DownloadLifecycle/attemptEnded(_:_:)``.
        case stopTransfer
        /// Give back the host connection slot the attempt held.
        case releaseHostSlot
        /// Write the status (with the result or error of ``state``) to the store.
        case persist(DownloadStatus)
        case announce(Announcement)
        /// Delete the partial file and its progress (nothing runs on it any more).
        case discardPartial
        /// Delete the row and the download.
        case forget
    }

    private(set) var state: State
    private(set) var attempts = 0
    /// It was running when the last process stopped: it goes first when it is its turn.
    private(set) var restoredRunning = false

    /// A new download: waiting, or held (`paused`).
    static func added(paused: Bool) -> (DownloadLifecycle, [Action]) {
        (DownloadLifecycle(state: .waiting(paused: paused)), [.persist(paused ? .paused : .queued), .announce(.added)])
    }

    /// A download as an earlier process left it in the store (no actions: nothing happens).
    init(restoring status: DownloadStatus, result: DownloadResult? = nil, error: DownloadError? = nil) {
        switch status {
        case .running:
            state = .waiting(paused: false)
            restoredRunning = true
        case .queued: state = .waiting(paused: false)
        case .paused: state = .waiting(paused: true)
        case .completed: state = result.map(State.completed) ?? .waiting(paused: false)
        case .failed: state = .failed(error ?? .stored(kind: "io", message: "failed"))
        }
    }

    private init(state: State) {
        self.state = state
    }

    // MARK: Reading

    /// The status as stored and shown.
    var status: DownloadStatus {
        switch state {
        case .waiting(let paused): paused ? .paused : .queued
        case .running: .running
        case .completed: .completed
        case .failed: .failed
        }
    }

    /// Waiting for its turn (not held, not running, not finished).
    var isQueued: Bool {
        if case .waiting(paused: false) = state { return true }
        return false
    }

    var isRunning: Bool {
        if case .running = state { return true }
        return false
    }

    /// Completed or failed.
    var isFinished: Bool {
        switch state {
        case .completed, .failed: true
        case .waiting, .running: false
        }
    }

    var runningAttempt: Attempt? {
        if case .running(let attempt) = state { return attempt }
        return nil
    }

    var result: DownloadResult? {
        if case .completed(let result) = state { return result }
        return nil
    }

    var error: DownloadError? {
        if case .failed(let error) = state { return error }
        return nil
    }

    // MARK: Events

    /// Its turn came: only a queued download starts.
    mutating func start() -> [Action] {
        guard isQueued else { return [] }
        attempts += 1
        restoredRunning = false
        state = .running(Attempt(number: attempts))
        return [.start(attempt: attempts), .persist(.running), .announce(.started)]
    }

    /// Every byte of attempt `number` is in: another download may take its place.
    mutating func transferred(_ number: Int) -> [Action] {
        guard case .running(var attempt) = state, attempt.number == number, attempt.holdsSlot else { return [] }
        attempt.holdsSlot = false
        state = .running(attempt)
        return [.releaseHostSlot]
    }

    /// Whether it counts among the downloads running at once (transferring, not committing).
    var holdsSlot: Bool { runningAttempt?.holdsSlot ?? false }

    /// Whether every byte is in and its file is being put in place: running without a slot.
    var isCommitting: Bool { runningAttempt.map { !$0.holdsSlot } ?? false }

    /// Attempt `number` ended with `outcome`; a stale attempt (one already accounted for) is ignored.
    mutating func attemptEnded(_ number: Int, _ outcome: Result<DownloadResult, DownloadError>) -> [Action] {
        guard case .running(let attempt) = state, attempt.number == number else { return [] }
        var actions = ended(attempt, outcome)
        if !attempt.holdsSlot { actions.removeAll { $0 == .releaseHostSlot } }
        return actions
    }

    private mutating func ended(_ attempt: Attempt, _ outcome: Result<DownloadResult, DownloadError>) -> [Action] {
        switch (outcome, attempt.stop) {
        case (.success, .remove?):
            // It completed before the stop took: the file is kept, the download forgotten.
            return [.releaseHostSlot, .forget, .announce(.removed)]
        case (.success(let result), _):
            state = .completed(result)
            return [.releaseHostSlot, .persist(.completed), .announce(.completed)]
        case (.failure, .remove?):
            return [.releaseHostSlot, .discardPartial, .forget, .announce(.removed)]
        case (.failure, .cancel?):
            state = .failed(.cancelled)
            return [.releaseHostSlot, .discardPartial, .persist(.failed), .announce(.failed)]
        case (.failure(let error), _) where error.kind != .cancelled:
            // It failed by itself before (or while) stopping: that is how the attempt ended.
            state = .failed(error)
            return [.releaseHostSlot, .persist(.failed), .announce(.failed)]
        case (.failure, .shutdown?):
            // The row keeps saying "running": a restore continues it first.
            state = .waiting(paused: true)
            return [.releaseHostSlot, .announce(.paused)]
        case (.failure, .restart?):
            state = .waiting(paused: false)
            return [.releaseHostSlot, .persist(.queued), .announce(.paused)]
        case (.failure, .pause?), (.failure, nil):
            let resume = attempt.resumeAfterStop
            state = .waiting(paused: !resume)
            return [.releaseHostSlot, .persist(resume ? .queued : .paused), .announce(.paused)]
        }
    }

    /// Hold it: a queued one waits until resumed, a running one stops (its partial kept).
    mutating func pause() -> [Action] {
        switch state {
        case .waiting(paused: false):
            state = .waiting(paused: true)
            return [.persist(.paused), .announce(.paused)]
        case .running(var attempt):
            attempt.resumeAfterStop = false
            return stop(&attempt, .pause)
        default:
            return []
        }
    }

    /// Let it wait for its turn again: a held or failed one, or one whose pause is under way.
    mutating func resume() -> [Action] {
        switch state {
        case .waiting(paused: true), .failed:
            state = .waiting(paused: false)
            return [.persist(.queued)]
        case .running(var attempt) where attempt.stop == .pause:
            attempt.resumeAfterStop = true
            state = .running(attempt)
            return []
        default:
            return []
        }
    }

    /// Like ``resume()``, and a completed one waits for a turn too (to be checked against the server).
    mutating func requeue() -> [Action] {
        if case .completed = state {
            state = .waiting(paused: false)
            return [.persist(.queued)]
        }
        return resume()
    }

    /// Stop it for good and delete its partial; it stays listed as failed (cancelled).
    mutating func cancel() -> [Action] {
        switch state {
        case .waiting:
            state = .failed(.cancelled)
            return [.discardPartial, .persist(.failed), .announce(.failed)]
        case .running(var attempt):
            return stop(&attempt, .cancel)
        case .completed, .failed:
            return []
        }
    }

    /// Forget it; an unfinished one's partial is deleted (a completed one's file is kept).
    mutating func remove() -> [Action] {
        switch state {
        case .waiting, .failed:
            return [.discardPartial, .forget, .announce(.removed)]
        case .completed:
            return [.forget, .announce(.removed)]
        case .running(var attempt):
            return stop(&attempt, .remove)
        }
    }

    /// The manager is going away: a running attempt stops and keeps its row as "running".
    mutating func shutdown() -> [Action] {
        guard case .running(var attempt) = state else { return [] }
        return stop(&attempt, .shutdown)
    }

    /// Its request changed: a running attempt stops and waits for a turn with the new one.
    mutating func restart() -> [Action] {
        guard case .running(var attempt) = state else { return [] }
        return stop(&attempt, .restart)
    }

    /// A download it depends on failed or was removed: a queued one can never start.
    mutating func dependencyFailed(_ error: DownloadError) -> [Action] {
        guard isQueued else { return [] }
        state = .failed(error)
        return [.persist(.failed), .announce(.failed)]
    }

    /// Nothing can be recorded any more (the store failed): a waiting download fails with
    /// `error` here and now, in memory only.
    mutating func fail(_ error: DownloadError) -> [Action] {
        guard case .waiting = state else { return [] }
        state = .failed(error)
        return [.announce(.failed)]
    }

    /// Records the stronger of the pending stop and `reason`; the transfer is told to stop
    /// only the first time.
    private mutating func stop(_ attempt: inout Attempt, _ reason: Stop) -> [Action] {
        let first = attempt.stop == nil
        attempt.stop = max(attempt.stop ?? reason, reason)
        state = .running(attempt)
        return first ? [.stopTransfer] : []
    }
}
