import Foundation

/// Why a download failed (or stopped), as one line a person can act on.
///
/// A struct with a private code, so adding a kind or a reason never breaks a caller. Compare
/// with the static members (`error.kind == .http`, `error.reason == .diskFull`), or `switch` on
/// them with a `default:` case:
///
/// ```swift
/// do {
///     _ = try await task.result()
/// } catch {
///     switch error.kind {
///     case .paused: saveForLater(error.resumeToken)
///     case .io where error.reason == .diskFull: print("free some space:", error.path ?? "")
///     case .http: print("the server said", error.status ?? 0)
///     default: print(error)  // one line: what failed, on which URL or path, and why
///     }
/// }
/// ```
public struct DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The broad class of a failure; the CLI maps it to an exit code.
    ///
    /// An extensible struct, not an enum: a later version may add kinds, so a `switch` over
    /// ``DownloadError/kind`` needs a `default:` case. The kinds are ``http``, ``network``,
    /// ``protocolViolation``, ``checksum``, ``io``, ``invalidRequest``, ``cancelled``,
    /// ``dependency`` and ``paused``.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        fileprivate let name: String
        /// The server answered with an HTTP error status (``DownloadError/status``).
        public static let http = Kind(name: "http")
        /// The network failed (connection refused, reset, stalled, timed out) and retries ran out.
        public static let network = Kind(name: "network")
        /// The server's answers contradict each other (ranges, lengths, redirects).
        public static let protocolViolation = Kind(name: "protocol")
        /// The bytes did not match the checksum that was asked for.
        public static let checksum = Kind(name: "checksum")
        /// A local file could not be read, written, locked or renamed (``DownloadError/path``,
        /// ``DownloadError/errorNumber`` and ``DownloadError/reason`` say which and why).
        public static let io = Kind(name: "io")
        /// The request itself is unusable (a malformed URL, a bad option).
        public static let invalidRequest = Kind(name: "invalid-request")
        /// The download was cancelled (its partial deleted), or the task awaiting
        /// ``DownloadTask/result()`` was cancelled (the download itself goes on).
        public static let cancelled = Kind(name: "cancelled")
        /// A download this one depends on failed or was removed, so it never started.
        public static let dependency = Kind(name: "dependency")
        /// The download was paused, or its ``Downloader`` shut down, before it finished: its
        /// partial and record are kept, and ``DownloadError/resumeToken`` continues it.
        public static let paused = Kind(name: "paused")
        /// The kind's short name: `http`, `network`, `protocol`, `checksum`, `io`,
        /// `invalid-request`, `cancelled`, `dependency` or `paused`.
        public var description: String { name }

        // New kinds go at the end: the store keeps a kind as its place in this list.
        static let all: [Kind] = [.http, .network, .protocolViolation, .checksum, .io, .invalidRequest, .cancelled, .dependency, .paused]

        /// The number the store keeps.
        var storedValue: Int { (Self.all.firstIndex(of: self) ?? Self.all.firstIndex(of: .io)!) + 1 }
    }

    /// What exactly went wrong, for the failures a caller may act on differently from the rest
    /// of their kind; nil for the others.
    ///
    /// Like ``Kind``, an extensible struct: compare with `==`, or `switch` with a `default:`.
    public struct Reason: Hashable, Sendable, CustomStringConvertible {
        fileprivate let name: String
        /// No byte arrived for the stall timeout (``Kind/network``).
        public static let stalled = Reason(name: "stalled")
        /// The server (or its proxy) did not accept the connection in time (``Kind/network``).
        public static let connectTimeout = Reason(name: "connect-timeout")
        /// The host name does not resolve (``Kind/network``).
        public static let nameNotResolved = Reason(name: "name-not-resolved")
        /// The disk has no room for the file (``Kind/io``).
        public static let diskFull = Reason(name: "disk-full")
        /// The folder or its filesystem is read-only (``Kind/io``).
        public static let readOnly = Reason(name: "read-only")
        /// The folder leads outside the one the download must stay in (``Kind/io``).
        public static let outsideFolder = Reason(name: "outside-folder")
        /// The process may not read or write the path (`EACCES`, `EPERM`; ``Kind/io``).
        public static let permissionDenied = Reason(name: "permission-denied")
        /// A part of the path that should be a folder is a file (`ENOTDIR`; ``Kind/io``).
        public static let notADirectory = Reason(name: "not-a-directory")
        /// The reason's short name, as the store and the daemon's `errorMessage` keep it:
        /// `stalled`, `connect-timeout`, `name-not-resolved`, `disk-full`, `read-only`,
        /// `outside-folder`, `permission-denied` or `not-a-directory`.
        public var description: String { name }

        /// A reason that fails every file of a folder alike (the disk is full, the folder is
        /// read-only or not the process's to write): a list says it for a few files and counts
        /// the rest (``advice``), rather than a line per file.
        public var failsEveryFileAlike: Bool { advice != nil }

        /// How many files a list's run tells one by one for a reason that
        /// ``failsEveryFileAlike``, before it counts the rest.
        public static let filesToldAlike = 3

        /// For a reason that ``failsEveryFileAlike``, what it means in words and what to do.
        public var advice: String? {
            switch self {
            case .diskFull: "the disk is full; free some space, then run again"
            case .readOnly: "the folder is read-only"
            case .permissionDenied: "permission denied"
            default: nil
            }
        }

        /// The line that counts the files failed for this reason beyond those told one by one:
        /// "497 more files failed the same way: the disk is full; free some space, then run again".
        public func moreFilesFailed(_ count: Int) -> String {
            "\(count) more file\(count == 1 ? "" : "s") failed the same way: \(advice ?? description)"
        }

        /// The failures of a list's run, sorted into those to tell and those to count: of each
        /// reason that ``failsEveryFileAlike``, the first ``filesToldAlike`` are told; every
        /// other failure is told.
        public struct Tally: Sendable {
            private var told: [Reason: Int] = [:]
            private var untold: [Reason: Int] = [:]

            public init() {}

            /// Whether `error` is to be told one by one; false when it is counted instead.
            public mutating func tells(_ error: DownloadError) -> Bool {
                guard let reason = error.reason, reason.failsEveryFileAlike else { return true }
                guard told[reason, default: 0] < filesToldAlike else {
                    untold[reason, default: 0] += 1
                    return false
                }
                told[reason, default: 0] += 1
                return true
            }

            /// A line for each reason with failures counted (``moreFilesFailed(_:)``).
            public var countedLines: [String] {
                untold.sorted { $0.key.description < $1.key.description }.map { $0.key.moreFilesFailed($0.value) }
            }
        }

        static let all: [Reason] = [
            .stalled, .connectTimeout, .nameNotResolved, .diskFull, .readOnly, .outsideFolder, .permissionDenied, .notADirectory,
        ]

        /// The reason the store kept under `name`, if this version knows it.
        init?(storedName name: String) {
            guard let known = Self.all.first(where: { $0.name == name }) else { return nil }
            self = known
        }

        private init(name: String) { self.name = name }
    }

    /// The broad class of this failure.
    public let kind: Kind
    /// What exactly went wrong, where it is one of the ``Reason``s.
    public let reason: Reason?
    /// The human message, without the URL.
    public let message: String
    /// The URL being downloaded, when known.
    public var url: String?
    /// The HTTP status, for ``Kind/http``.
    public let status: Int?
    /// Whether trying again may help (connection errors, timeouts, 408, 429, 5xx).
    public let isRetryable: Bool
    /// The server's Retry-After, when it sent one.
    public let retryAfter: Duration?
    /// The local file or folder a ``Kind/io`` error is about, when it is about one.
    public let path: String?
    /// The system's error number (`errno`: `ENOSPC`, `EROFS`, `ENOTDIR`, …) of a failed file
    /// operation, for ``Kind/io``; compare with Glibc's constants.
    public let errorNumber: Int32?
    /// For ``Kind/paused``: the token that continues the download, in this process or another
    /// (nil when it stopped before its file was named, with nothing on disk).
    public var resumeToken: ResumeToken? { pausedAt?.token }
    /// The token, kept apart: it is a few hundred bytes, and an error is carried in the frame
    /// of every call that can throw one (a download's task allocated some 50 KB of frames).
    private let pausedAt: TokenBox?

    private final class TokenBox: Sendable, Equatable {
        let token: ResumeToken
        init(_ token: ResumeToken) { self.token = token }
        static func == (a: TokenBox, b: TokenBox) -> Bool { a.token == b.token }
    }

    init(
        kind: Kind, message: String, url: String? = nil, status: Int? = nil,
        isRetryable: Bool = false, retryAfter: Duration? = nil, reason: Reason? = nil,
        path: String? = nil, errorNumber: Int32? = nil, resumeToken: ResumeToken? = nil
    ) {
        self.kind = kind
        self.reason = reason
        self.message = message
        self.url = url
        self.status = status
        self.isRetryable = isRetryable
        self.retryAfter = retryAfter
        self.path = path
        self.errorNumber = errorNumber
        pausedAt = resumeToken.map(TokenBox.init)
    }

    /// `URL: message`, or just the message when no URL is attached.
    public var description: String {
        if let url { return "\(url): \(message)" }
        return message
    }

    func with(url: String) -> DownloadError {
        var copy = self
        if copy.url == nil { copy.url = URLRedaction.redact(url) }
        return copy
    }
}

extension DownloadError.Reason {
    /// The reason a system error number gives, for the numbers a caller acts on.
    init?(errno code: Int32) {
        switch code {
        case ENOSPC, EDQUOT: self = .diskFull
        case EROFS: self = .readOnly
        case EACCES, EPERM: self = .permissionDenied
        case ENOTDIR: self = .notADirectory
        default: return nil
        }
    }
}

extension DownloadError.Kind {
    init(storedValue: Int) {
        self = Self.all.indices.contains(storedValue - 1) ? Self.all[storedValue - 1] : .io
    }
}

extension DownloadError {
    /// The server answered `status`; 408, 429 and 5xx are worth retrying (RFC 9110 §15).
    static func httpStatus(_ status: Int, reason: String, retryAfter: Duration? = nil) -> DownloadError {
        let retryable = status == 408 || status == 429 || (500...599).contains(status)
        let text = reason.isEmpty ? "HTTP \(status)" : "\(status) \(reason)"
        return DownloadError(kind: .http, message: text, status: status, isRetryable: retryable, retryAfter: retryAfter)
    }

    static func network(_ message: String) -> DownloadError {
        DownloadError(kind: .network, message: message, isRetryable: true)
    }

    static func stalled(after timeout: Duration) -> DownloadError {
        DownloadError(kind: .network, message: "stalled: no data for \(timeout.formattedSeconds)", isRetryable: true, reason: .stalled)
    }

    /// A server answer that cannot be used as is; retrying may get a sane one.
    static func badResponse(_ message: String) -> DownloadError {
        DownloadError(kind: .protocolViolation, message: message, isRetryable: true)
    }

    static func redirect(_ message: String) -> DownloadError {
        DownloadError(kind: .protocolViolation, message: message)
    }

    static func checksumMismatch(algorithm: String, expected: String, actual: String) -> DownloadError {
        DownloadError(kind: .checksum, message: "checksum mismatch: expected \(algorithm)=\(expected) got \(actual)")
    }

    static func sizeMismatch(expected: Int64, actual: Int64) -> DownloadError {
        DownloadError(kind: .protocolViolation, message: "size mismatch: expected \(expected) bytes, got \(actual)", isRetryable: true)
    }

    /// A local file operation failed; `errno` explains why.
    static func io(_ action: String, path: String, errno code: Int32) -> DownloadError {
        DownloadError(
            kind: .io, message: "cannot \(action) \(path): \(String(cString: strerror(code)))", reason: Reason(errno: code), path: path,
            errorNumber: code)
    }

    /// A local file operation failed for `reason`, as `message` says.
    static func io(_ message: String, path: String? = nil, reason: Reason, errorNumber: Int32? = nil) -> DownloadError {
        DownloadError(kind: .io, message: message, reason: reason, path: path, errorNumber: errorNumber)
    }

    /// A local file failed, as `message` says, for no reason an `errno` names.
    static func io(_ message: String, path: String) -> DownloadError {
        DownloadError(kind: .io, message: message, path: path)
    }

    /// A local file or the store failed, as `message` says.
    public static func io(_ message: String) -> DownloadError {
        DownloadError(kind: .io, message: message)
    }

    /// The request itself is unusable, as `message` says.
    public static func invalidRequest(_ message: String) -> DownloadError {
        DownloadError(kind: .invalidRequest, message: message)
    }

    static let cancelled = DownloadError(kind: .cancelled, message: "cancelled")

    /// The task awaiting a result was cancelled; the download itself was not.
    static let waitCancelled = DownloadError(
        kind: .cancelled, message: "stopped waiting: the awaiting task was cancelled (the download goes on; cancel() stops it)")

    /// The download stopped, its partial and record kept, and `token` continues it.
    static func paused(_ token: ResumeToken?, becauseClosed closed: Bool = false) -> DownloadError {
        let message = closed ? "paused: its downloader was shut down" : "paused"
        return DownloadError(kind: .paused, message: message, url: token.map { URLRedaction.redact($0.url) }, resumeToken: token)
    }

    /// A download `dependency` this one needed failed or went away.
    static func dependencyFailed(_ dependency: DownloadID, reason: String) -> DownloadError {
        DownloadError(kind: .dependency, message: "needed download \(dependency) failed: \(reason)")
    }

    /// An error as the store kept it (its kind's name and message).
    static func stored(kind: String, message: String) -> DownloadError {
        DownloadError(kind: Kind(name: kind), message: message)
    }

    /// An error as the store keeps it (its kind's number, its reason's name and its message).
    static func stored(kind: Kind, message: String, reason: Reason? = nil) -> DownloadError {
        DownloadError(kind: kind, message: message, reason: reason)
    }

    /// The network failed for `reason`, as `message` says; worth another try.
    static func network(_ message: String, reason: Reason) -> DownloadError {
        DownloadError(kind: .network, message: message, isRetryable: true, reason: reason)
    }
}

extension Duration {
    /// `"30 s"`, `"0.25 s"`: for messages.
    var formattedSeconds: String {
        let seconds = Double(components.seconds) + Double(components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : String(format: "%.2g s", seconds)
    }
}
