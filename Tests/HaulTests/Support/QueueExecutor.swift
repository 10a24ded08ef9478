import Dispatch

/// Runs a task's jobs (and those of the default actors it calls) on a serial dispatch queue of
/// its own, so that a test busy for a minute of CPU does not hold one of the few threads every
/// other test's tasks share (their timing-sensitive steps would wait behind it).
final class QueueExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(_ label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
