import Synchronization

/// The task of one attempt, and a stop that may come before the task is set (it is then
/// applied as soon as it is).
final class AttemptHandle: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        var cancelled = false
        var finished = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Starts `body` in a task of its own, on Swift's global executor. (It was started from an
    /// event loop picked in turn, to spread the attempts over the loops where they ran on them;
    /// they never did in the release binary, and the hop cost a thread switch a download.)
    ///
    /// With `finishing` false, the task's end is not the attempt's: whoever `body` reports its
    /// end to calls ``finish()`` once it has taken the report in.
    static func start(finishing: Bool = true, _ body: @escaping @Sendable (AttemptHandle) async -> Void) -> AttemptHandle {
        let handle = AttemptHandle()
        handle.set(
            Task {
                await body(handle)
                if finishing { handle.finish() }
            })
        return handle
    }

    private func set(_ task: Task<Void, Never>) {
        let cancelled = state.withLock { state in
            state.task = task
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }

    func finish() {
        let waiters = state.withLock { state in
            state.finished = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the attempt's task has run to its end.
    func wait() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state in
                if state.finished { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}
