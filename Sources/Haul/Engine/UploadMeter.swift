import Synchronization

/// An upload's progress as the engine sees it: the server's confirmed offset, the bytes sent
/// beyond it by the request on its way, and the rate; each change is handed to `report`.
final class UploadMeter: Sendable {
    private struct State {
        var snapshot: UploadProgress
        var speed = SpeedMeter()
    }

    private let state: Mutex<State>
    private let report: @Sendable (UploadProgress) -> Void

    init(total: Int64, report: @escaping @Sendable (UploadProgress) -> Void) {
        state = Mutex(State(snapshot: UploadProgress(bytesSent: 0, totalBytes: total)))
        self.report = report
    }

    /// The bytes sent (or confirmed) so far, from the file's start.
    func sent(_ bytes: Int64) {
        update { state in
            state.snapshot.bytesSent = bytes
            state.speed.sample(bytes: bytes, at: .now)
            state.snapshot.bytesPerSecond = state.speed.bytesPerSecond
            state.snapshot.note = nil
        }
    }

    /// The protocol chosen.
    func chose(_ kind: UploadProtocol) {
        update { $0.snapshot.protocol = kind }
    }

    /// A passing condition ("retrying in 2 s: …"), shown until bytes flow again.
    func note(_ text: String?) {
        update { $0.snapshot.note = text }
    }

    /// Why an earlier upload is not continued, said once in the snapshots that follow.
    func restarting(_ reason: String) {
        update { $0.snapshot.restartReason = reason }
    }

    var snapshot: UploadProgress { state.withLock { $0.snapshot } }

    private func update(_ change: (inout State) -> Void) {
        let snapshot = state.withLock { state in
            change(&state)
            return state.snapshot
        }
        report(snapshot)
    }
}
