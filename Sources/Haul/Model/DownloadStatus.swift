/// Where a download stands.
public enum DownloadStatus: String, Sendable, Codable, Hashable, CaseIterable {
    /// Waiting for its turn.
    case queued
    /// Transferring, or putting its file in place.
    case running
    /// Held until resumed; its partial and record are kept.
    case paused
    /// Its file is complete, verified and at its final path.
    case completed
    /// It failed or was cancelled; the error says which.
    case failed

    /// The number the store keeps (a typed column, not a string).
    var storedValue: Int {
        switch self {
        case .queued: 0
        case .running: 1
        case .paused: 2
        case .completed: 3
        case .failed: 4
        }
    }

    init?(storedValue: Int) {
        guard let status = Self.allCases.first(where: { $0.storedValue == storedValue }) else { return nil }
        self = status
    }
}
