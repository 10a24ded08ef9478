import NIOPosix
import Synchronization

/// The task of one attempt. It is started on an event loop picked in turn (so that, where
/// Swift Concurrency runs on NIO's event loops, the attempts and their connections spread over
/// every core instead of sticking to the manager's), which means it may not exist yet when a
/// stop arrives: the stop is remembered and applied as soon as it does.
final class AttemptHandle: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        var cancelled = false
        var finished = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Starts `body` in a task created on the next event loop of NIO's shared group.
    static func start(_ body: @escaping @Sendable (AttemptHandle) async -> Void) -> AttemptHandle {
        let handle = AttemptHandle()
        MultiThreadedEventLoopGroup.singleton.next().execute {
            handle.set(
                Task {
                    await body(handle)
                    handle.finish()
                })
        }
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

    private func finish() {
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
