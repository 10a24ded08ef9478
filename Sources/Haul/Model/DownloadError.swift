import Foundation

/// Why a download failed, as one line a person can act on.
///
/// A struct with a private code, so adding a reason never breaks a `switch` in a caller.
/// Compare with the static members' ``Kind`` (`error.kind == .http`).
public struct DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The broad class of a failure; the CLI maps it to an exit code.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        fileprivate let name: String
        /// The server answered with an HTTP error status.
        public static let http = Kind(name: "http")
        /// The network failed (connection refused, reset, stalled, timed out) and retries ran out.
        public static let network = Kind(name: "network")
        /// The server's answers contradict each other (ranges, lengths, redirects).
        public static let protocolViolation = Kind(name: "protocol")
        /// The bytes did not match the checksum that was asked for.
        public static let checksum = Kind(name: "checksum")
        /// A local file could not be read, written, locked or renamed.
        public static let io = Kind(name: "io")
        /// The request itself is unusable (a malformed URL, a bad option).
        public static let invalidRequest = Kind(name: "invalid-request")
        /// The download was cancelled or paused before it finished.
        public static let cancelled = Kind(name: "cancelled")
        /// A download this one depends on failed or was removed, so it never started.
        public static let dependency = Kind(name: "dependency")
        public var description: String { name }

        static let all: [Kind] = [.http, .network, .protocolViolation, .checksum, .io, .invalidRequest, .cancelled, .dependency]

        /// The number the store keeps.
        var storedValue: Int { (Self.all.firstIndex(of: self) ?? Self.all.firstIndex(of: .io)!) + 1 }
    }

    /// The broad class of this failure.
    public let kind: Kind
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

    init(kind: Kind, message: String, url: String? = nil, status: Int? = nil,
         isRetryable: Bool = false, retryAfter: Duration? = nil) {
        self.kind = kind
        self.message = message
        self.url = url
        self.status = status
        self.isRetryable = isRetryable
        self.retryAfter = retryAfter
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
        DownloadError(kind: .network, message: "stalled: no data for \(timeout.formattedSeconds)", isRetryable: true)
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
        DownloadError(kind: .io, message: "cannot \(action) \(path): \(String(cString: strerror(code)))")
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

    /// A download `dependency` this one needed failed or went away.
    static func dependencyFailed(_ dependency: DownloadID, reason: String) -> DownloadError {
        DownloadError(kind: .dependency, message: "needed download \(dependency) failed: \(reason)")
    }

    /// An error as the store kept it (its kind's name and message).
    static func stored(kind: String, message: String) -> DownloadError {
        DownloadError(kind: Kind(name: kind), message: message)
    }

    /// An error as the store keeps it (its kind's number and message).
    static func stored(kind: Kind, message: String) -> DownloadError {
        DownloadError(kind: kind, message: message)
    }
}

extension Duration {
    /// `"30 s"`, `"0.25 s"`: for messages.
    var formattedSeconds: String {
        let seconds = Double(components.seconds) + Double(components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : String(format: "%.2g s", seconds)
    }
}
