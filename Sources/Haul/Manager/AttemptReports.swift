import Synchronization

/// What the attempts' tasks tell their manager, kept until it takes them in: a task reports
/// and goes on (or ends) without waiting for the manager, and the manager takes in every
/// report that came meanwhile at once.
final class AttemptReports: Sendable {
    enum Report: Sendable {
        /// Every byte of the attempt is in; only putting the file in place is left.
        case transferred(DownloadID, attempt: Int)
        /// The attempt's task ended; its handle is finished once the end is taken in.
        case ended(DownloadID, attempt: Int, Result<DownloadResult, DownloadError>, AttemptHandle)
    }

    private struct State {
        var reports: [Report] = []
        /// A take is due: the reports are not taken in yet.
        var due = false
        /// Takes that found reports (for tests: fewer than the reports when they come together).
        var takes = 0
    }

    private let state = Mutex(State())

    /// Keeps `report`; true when no take is due yet, and the caller must see to one.
    func post(_ report: Report) -> Bool {
        state.withLock { state in
            state.reports.append(report)
            defer { state.due = true }
            return !state.due
        }
    }

    /// Takes that found reports so far.
    var takes: Int { state.withLock { $0.takes } }

    /// Every report kept, in the order they came; none once all are taken, and then the next
    /// report asks for a take again.
    func take() -> [Report] {
        state.withLock { state in
            if state.reports.isEmpty { state.due = false } else { state.takes += 1 }
            defer { state.reports = [] }
            return state.reports
        }
    }
}
