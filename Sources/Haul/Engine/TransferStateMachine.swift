/// The resume contract (the DocC article "Resume semantics", and docs/ARCHITECTURE.md) as a
/// pure value: it says what to ask the server for, and what to do with each answer. The caller
/// performs the I/O.
///
/// It knows what is trusted on disk (`offset`: bytes from 0 that were written and, on
/// a fresh start, recorded as durable) and what the server said before (length,
/// validators). It never lets a body be written at an offset it did not ask for.
struct TransferStateMachine: Sendable {
    /// What to request next.
    enum Request: Equatable, Sendable {
        /// A plain GET of the whole file.
        case full
        /// `Range: bytes=start-`, with `If-Range` when a validator is known.
        case from(Int64, ifRange: String?)
    }

    /// What to do with an answer's head.
    enum Action: Equatable, Sendable {
        /// Write the body at `offset`; `truncate` first when starting over from 0.
        case stream(at: Int64, truncate: Bool)
        /// Drop the body, forget the partial, start over with a full request.
        case restartFromZero(reason: String)
        /// Everything is already here: confirm the length with a HEAD, then finish.
        case confirmComplete
        /// Drop the body; this attempt failed (retryable or not, as the error says).
        case fail(DownloadError)
    }

    /// What the end of a body means.
    enum BodyEnd: Equatable, Sendable {
        case complete
        /// The answer ended where it said it would, before the end of the file: ask again.
        case partial
        /// The connection ended early.
        case truncated(DownloadError)
    }

    private(set) var total: Int64?
    private(set) var validators: Validators
    private(set) var acceptsRanges: Bool
    /// Bytes from 0 that are on disk.
    private(set) var offset: Int64
    /// Where the current answer's body ends (exclusive), if it said.
    private(set) var bodyEnd: Int64?
    private var asked: Request?
    private var badRangeAnswers = 0
    /// Set after a server keeps answering ranges it was not asked for.
    private(set) var rangesDisabled = false

    /// Two bad 206 answers in a row are a pattern, not a hiccup.
    static let badRangeAnswersBeforeFullDownload = 2

    init(total: Int64?, validators: Validators, acceptsRanges: Bool, offset: Int64) {
        self.total = total
        self.validators = validators
        self.acceptsRanges = acceptsRanges
        self.offset = max(0, offset)
        if let total, self.offset > total {
            // Resume rule 3: a partial bigger than the remote is not this file.
            self.offset = 0
        }
    }

    /// Whether the bytes on disk can be continued from, given what can be proven.
    /// Without a validator or a known length, a 206 could be of another file (rule 5).
    private var canResume: Bool {
        offset > 0 && !rangesDisabled && (validators.ifRange != nil || total != nil)
    }

    mutating func nextRequest() -> Request {
        let request: Request = canResume ? .from(offset, ifRange: validators.ifRange) : .full
        if request == .full { offset = 0 }
        asked = request
        bodyEnd = nil
        return request
    }

    mutating func received(_ head: ResponseHead) -> Action {
        switch head.status {
        case 206:
            return receivedPartial(head)
        case 200...299:
            // The server ignored the range or If-Range failed (the file changed):
            // never append a 200 body after partial bytes; start over from 0 (rule 2).
            offset = 0
            total = head.contentLength
            bodyEnd = head.contentLength
            validators = head.validators
            acceptsRanges = head.acceptsRanges
            return .stream(at: 0, truncate: true)
        case 416:
            if case .from(let start, _) = asked, let total, start == total,
                head.unsatisfiedLength == nil || head.unsatisfiedLength == total
            {
                return .confirmComplete
            }
            return restart("the server cannot serve the missing range (416)")
        default:
            return .fail(head.error)
        }
    }

    private mutating func receivedPartial(_ head: ResponseHead) -> Action {
        guard case .from(let start, _) = asked else {
            // A 206 to a plain GET is only usable if it is the whole file.
            if let range = head.contentRange, range.first == 0, let whole = range.total, range.last == whole - 1 {
                return acceptRange(range, validators: head.validators)
            }
            return rejectRange("answered a partial response to a full request")
        }
        guard let range = head.contentRange else {
            return rejectRange("answered 206 without a usable Content-Range")
        }
        if validators.contradicts(head.validators) {
            return restart("the file changed on the server (validators differ)")
        }
        if let total, let rangeTotal = range.total, rangeTotal != total {
            return restart("the file changed on the server (length \(total) → \(rangeTotal))")
        }
        guard range.first == start else {
            return rejectRange("sent bytes \(range.first)-\(range.last) when asked for \(start)-")
        }
        return acceptRange(range, validators: head.validators)
    }

    private mutating func acceptRange(_ range: ContentRange, validators new: Validators) -> Action {
        badRangeAnswers = 0
        if total == nil { total = range.total }
        if validators.isEmpty { validators = new }
        acceptsRanges = true
        bodyEnd = range.last + 1
        return .stream(at: range.first, truncate: false)
    }

    /// A 206 that does not fit is never written (the resume contract: "never write it; retry,
    /// and if the server keeps doing it, fall back to a plain full download").
    private mutating func rejectRange(_ what: String) -> Action {
        badRangeAnswers += 1
        if badRangeAnswers >= Self.badRangeAnswersBeforeFullDownload {
            rangesDisabled = true
        }
        return .fail(.badResponse("the server \(what)"))
    }

    private mutating func restart(_ reason: String) -> Action {
        offset = 0
        total = nil
        validators = Validators()
        return .restartFromZero(reason: reason)
    }

    /// Whether `count` more bytes fit in what the answer promised; bytes past it are never written.
    func fits(_ count: Int) -> Bool {
        guard let limit = bodyEnd ?? total else { return true }
        return offset + Int64(count) <= limit
    }

    /// Continues from `offset` bytes written outside this machine (by a segmented transfer).
    mutating func takeOver(from offset: Int64) {
        self.offset = max(0, offset)
        asked = nil
        bodyEnd = nil
    }

    /// Records `count` bytes written at the current offset.
    mutating func wrote(_ count: Int) {
        offset += Int64(count)
    }

    mutating func bodyEnded() -> BodyEnd {
        if let end = bodyEnd, offset < end {
            return .truncated(.network("connection closed after \(offset) of \(total.map(String.init) ?? "?") bytes"))
        }
        guard let total else {
            // Chunked or close-delimited: the clean end of the body is the end of the file.
            self.total = offset
            return .complete
        }
        return offset >= total ? .complete : .partial
    }

    /// The HEAD that confirms a 416 "you have it all": same length, same validators.
    mutating func confirmed(_ head: ResponseHead) -> Action {
        guard (200...299).contains(head.status) else { return .fail(head.error) }
        if head.contentLength == total, !validators.contradicts(head.validators) {
            return .confirmComplete
        }
        return restart("the file changed on the server")
    }
}
