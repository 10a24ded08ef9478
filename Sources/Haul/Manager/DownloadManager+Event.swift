import Foundation

extension DownloadManager {
    /// Something that happened to a managed download, delivered by ``DownloadManager/events()``.
    ///
    /// Each attempt (from ``started(_:)``) ends with exactly one of ``paused(_:)``,
    /// ``completed(_:_:)``, ``failed(_:_:)`` or ``removed(_:)``. A download that never started
    /// can also be paused, failed (its dependency failed) or removed.
    public enum Event: Sendable {
        /// The download joined the queue (``DownloadManager/add(_:priority:after:replacing:paused:)``).
        case added(ID)
        /// An attempt began transferring.
        case started(ID)
        /// A snapshot of a running download, at most every 100 ms while bytes flow.
        case progress(ID, DownloadProgress)
        /// It stopped with its partial and record kept (a pause, a change, a shutdown), or was
        /// held before it started.
        case paused(ID)
        /// The file is complete, verified and at its final path.
        case completed(ID, DownloadResult)
        /// It failed, was cancelled (kind ``DownloadError/Kind/cancelled``), or a dependency failed.
        case failed(ID, DownloadError)
        /// It was removed and forgotten.
        case removed(ID)
        /// Something happened to one of the manager's uploads
        /// (``DownloadManager/addUpload(_:priority:paused:)``); the other cases are of downloads only.
        case upload(ID, UploadEvent)

        /// The download (or upload) the event is about.
        public var id: ID {
            switch self {
            case .added(let id), .started(let id), .progress(let id, _), .paused(let id),
                .completed(let id, _), .failed(let id, _), .removed(let id), .upload(let id, _):
                id
            }
        }

        /// Whether the event ends an attempt (or a download that never started).
        public var isTerminal: Bool {
            switch self {
            case .paused, .completed, .failed, .removed: true
            case .added, .started, .progress: false
            case .upload(_, let event): event.isTerminal
            }
        }
    }

    /// Something that happened to a managed upload, in ``Event/upload(_:_:)``. Each attempt
    /// (from ``started``) ends with exactly one of ``paused``, ``completed(_:)``,
    /// ``failed(_:)`` or ``removed``. Its progress is read with ``DownloadManager/upload(_:)``.
    public enum UploadEvent: Sendable {
        /// It joined the queue.
        case added
        /// An attempt began.
        case started
        /// It stopped (a pause, a shutdown) or was held before it started; a resumable upload
        /// continues from the server's offset when resumed.
        case paused
        /// The server confirmed every byte.
        case completed(UploadResult)
        /// It failed, or was cancelled (kind ``DownloadError/Kind/cancelled``).
        case failed(DownloadError)
        /// It was removed and forgotten.
        case removed

        /// Whether the event ends an attempt (or an upload that never started).
        public var isTerminal: Bool {
            switch self {
            case .paused, .completed, .failed, .removed: true
            case .added, .started: false
            }
        }
    }

    /// A managed download as it stands.
    public struct Download: Sendable {
        /// Its id in the store.
        public var id: ID
        /// The URL without any credentials it carries (``DownloadRequest/displayURL``); the
        /// request has it whole.
        public var url: String
        /// The final path once known, else the path or folder asked for.
        public var destination: String
        /// False while ``destination`` is the folder asked for and the server has not named the file yet.
        public var destinationIsFile: Bool
        /// Where it stands: queued, running, paused, completed or failed.
        public var status: DownloadStatus
        /// Higher starts first among the queued (default 0).
        public var priority: Int
        /// Downloads that must complete before this one starts.
        public var dependencies: [ID]
        /// The latest snapshot of the current or last attempt.
        public var progress: DownloadProgress?
        /// Set when ``status`` is ``DownloadStatus/completed``. A download completed by an
        /// earlier process reports `bytesFetched == 0` and `wasAlreadyComplete`.
        public var result: DownloadResult?
        /// Set when ``status`` is ``DownloadStatus/failed``.
        public var error: DownloadError?
        /// The request it runs with: its URL, the destination asked for, and its options.
        public var request: DownloadRequest
        /// When the current or last attempt started, in this process.
        public var startedAt: ContinuousClock.Instant?
        /// When the last attempt ended, in this process.
        public var endedAt: ContinuousClock.Instant?
        /// In a fleet, the member that holds it (`HOST/PID`, ``FleetPeer/name``); nil outside
        /// one, and while it waits in the pool or its member is gone.
        public var daemon: String?
    }

    /// Every download added up.
    public struct Totals: Sendable, Hashable {
        /// Bytes on disk across all downloads this manager knows.
        public var bytesDone: Int64 = 0
        /// The sum of the known lengths; downloads of unknown length add nothing.
        public var totalBytes: Int64 = 0
        /// The summed rate of the running downloads.
        public var bytesPerSecond: Double = 0
        /// Downloads waiting for their turn.
        public var queued = 0
        /// Downloads transferring (or putting their file in place).
        public var running = 0
        /// Downloads held until resumed.
        public var paused = 0
        /// Downloads whose file is complete and in place.
        public var completed = 0
        /// Downloads that failed or were cancelled.
        public var failed = 0
        /// Uploads sending (they count against the same `-j` as downloads).
        public var uploading = 0
        /// Uploads waiting, queued or paused.
        public var uploadsWaiting = 0
        /// The summed rate of the running uploads.
        public var uploadBytesPerSecond: Double = 0

        /// Time left at the current rate, when bytes are flowing.
        public var eta: Duration? {
            guard bytesPerSecond > 1 else { return nil }
            return .milliseconds(Int64(Double(max(0, totalBytes - bytesDone)) / bytesPerSecond * 1000))
        }
    }
}
