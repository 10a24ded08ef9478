/// When to try again, and after how long: exponential backoff with jitter, the server's
/// Retry-After when it sent one, and a budget of consecutive failed tries.
///
/// A try that moved the download forward resets the budget, as wget does: on a line
/// that drops every minute a 4 GiB file still finishes.
struct RetryPolicy: Sendable {
    /// Tries in a row that may fail before giving up (the first try counts).
    var maxTries: Int
    /// The first backoff; each further failure doubles it, up to ``maxWait``.
    var baseWait: Duration
    var maxWait: Duration = .seconds(60)
    /// The longest Retry-After honoured; a server asking for hours is treated as down.
    var maxRetryAfter: Duration = .seconds(600)
    private(set) var failuresInARow = 0

    init(maxTries: Int, baseWait: Duration) {
        self.maxTries = max(1, maxTries)
        self.baseWait = baseWait
    }

    /// The wait before the next try, or nil when the error is final or tries ran out.
    ///
    /// - Parameter jitter: a random number in `0..<1` (injected for tests); the wait is
    ///   scaled into `[0.5, 1.0)` of the backoff so clients that failed together spread out.
    mutating func delay(after error: DownloadError, madeProgress: Bool, jitter: Double) -> Duration? {
        guard error.isRetryable else { return nil }
        failuresInARow = madeProgress ? 1 : failuresInARow + 1
        guard failuresInARow < maxTries else { return nil }
        if let retryAfter = error.retryAfter {
            return retryAfter <= maxRetryAfter ? retryAfter : nil
        }
        let exponent = min(failuresInARow - 1, 30)
        let backoff = min(baseWait * (1 << exponent), maxWait)
        return backoff * (0.5 + jitter / 2)
    }
}
