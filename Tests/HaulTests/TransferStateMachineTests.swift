import NIOHTTP1
import Testing
@testable import Haul

/// The resume contract, answer by answer, without a socket.
@Suite struct TransferStateMachineTests {
    static let etag = "\"v1\""

    static func head(_ status: Int, _ headers: [(String, String)] = []) -> ResponseHead {
        ResponseHead(status: status, headers: HTTPHeaders(headers))
    }

    static func resuming(at offset: Int64, total: Int64? = 1000, etag: String? = etag) -> TransferStateMachine {
        TransferStateMachine(total: total, validators: Validators(etag: etag), acceptsRanges: true, offset: offset)
    }

    @Test func freshDownloadAsksForTheWholeFile() {
        var machine = TransferStateMachine(total: nil, validators: Validators(), acceptsRanges: false, offset: 0)
        #expect(machine.nextRequest() == .full)
        #expect(machine.received(Self.head(200, [("Content-Length", "1000")])) == .stream(at: 0, truncate: true))
        #expect(machine.total == 1000)
    }

    @Test func partialAsksForTheRestWithIfRange() {
        var machine = Self.resuming(at: 400)
        #expect(machine.nextRequest() == .from(400, ifRange: Self.etag))
    }

    @Test func weakETagIsNeverUsedInIfRange() {
        var machine = TransferStateMachine(
            total: 1000, validators: Validators(etag: "W/\"x\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT"),
            acceptsRanges: true, offset: 10)
        #expect(machine.nextRequest() == .from(10, ifRange: "Sun, 06 Nov 1994 08:49:37 GMT"))
    }

    @Test func matching206Continues() {
        var machine = Self.resuming(at: 400)
        _ = machine.nextRequest()
        let answer = Self.head(206, [("Content-Range", "bytes 400-999/1000"), ("ETag", Self.etag)])
        #expect(machine.received(answer) == .stream(at: 400, truncate: false))
        #expect(machine.fits(600))
        #expect(!machine.fits(601))
        machine.wrote(600)
        #expect(machine.bodyEnded() == .complete)
    }

    @Test func a200AfterARangeRequestStartsOverAndNeverAppends() {
        var machine = Self.resuming(at: 400)
        _ = machine.nextRequest()
        #expect(machine.received(Self.head(200, [("Content-Length", "1200")])) == .stream(at: 0, truncate: true))
        #expect(machine.offset == 0)
        #expect(machine.total == 1200)
    }

    @Test(arguments: ["bytes 401-999/1000", "bytes 0-999/1000", "garbage"])
    func mismatching206IsNeverWritten(contentRange: String) {
        var machine = Self.resuming(at: 400)
        _ = machine.nextRequest()
        guard case .fail(let error) = machine.received(Self.head(206, [("Content-Range", contentRange)])) else {
            Issue.record("a 206 for other bytes must not be streamed")
            return
        }
        #expect(error.isRetryable)
    }

    @Test func repeatedBadRangesFallBackToAFullDownload() {
        var machine = Self.resuming(at: 400)
        for _ in 0..<TransferStateMachine.badRangeAnswersBeforeFullDownload {
            #expect(machine.nextRequest() == .from(400, ifRange: Self.etag))
            _ = machine.received(Self.head(206, [("Content-Range", "bytes 0-999/1000")]))
        }
        #expect(machine.nextRequest() == .full)
        #expect(machine.offset == 0)
    }

    @Test func a206WithAnotherTotalMeansTheFileChanged() {
        var machine = Self.resuming(at: 400)
        _ = machine.nextRequest()
        let action = machine.received(Self.head(206, [("Content-Range", "bytes 400-1999/2000")]))
        guard case .restartFromZero = action else { Issue.record("expected a restart, got \(action)"); return }
        #expect(machine.nextRequest() == .full)
    }

    @Test func a206WithAnotherETagMeansTheFileChanged() {
        var machine = Self.resuming(at: 400)
        _ = machine.nextRequest()
        let action = machine.received(Self.head(206, [("Content-Range", "bytes 400-999/1000"), ("ETag", "\"v2\"")]))
        guard case .restartFromZero = action else { Issue.record("expected a restart, got \(action)"); return }
    }

    @Test func a416WhenEverythingIsHereIsConfirmed() {
        var machine = Self.resuming(at: 1000)
        #expect(machine.nextRequest() == .from(1000, ifRange: Self.etag))
        #expect(machine.received(Self.head(416, [("Content-Range", "bytes */1000")])) == .confirmComplete)
        #expect(machine.confirmed(Self.head(200, [("Content-Length", "1000"), ("ETag", Self.etag)])) == .confirmComplete)
    }

    @Test func a416ConfirmationWithAnotherLengthStartsOver() {
        var machine = Self.resuming(at: 1000)
        _ = machine.nextRequest()
        _ = machine.received(Self.head(416, [("Content-Range", "bytes */1000")]))
        guard case .restartFromZero = machine.confirmed(Self.head(200, [("Content-Length", "1500")])) else {
            Issue.record("expected a restart"); return
        }
    }

    @Test func a416ForMissingBytesStartsOver() {
        var machine = Self.resuming(at: 400)
        _ = machine.nextRequest()
        guard case .restartFromZero = machine.received(Self.head(416, [("Content-Range", "bytes */300")])) else {
            Issue.record("expected a restart"); return
        }
    }

    @Test func partialBiggerThanRemoteStartsOver() {
        var machine = TransferStateMachine(total: 100, validators: Validators(etag: Self.etag), acceptsRanges: true, offset: 400)
        #expect(machine.nextRequest() == .full)
    }

    @Test func unknownLengthWithoutValidatorsCannotResume() {
        var machine = TransferStateMachine(total: nil, validators: Validators(), acceptsRanges: true, offset: 400)
        #expect(machine.nextRequest() == .full)
    }

    @Test func unknownLengthWithAValidatorResumesAndLearnsTheLength() {
        var machine = TransferStateMachine(total: nil, validators: Validators(etag: Self.etag), acceptsRanges: true, offset: 400)
        #expect(machine.nextRequest() == .from(400, ifRange: Self.etag))
        #expect(machine.received(Self.head(206, [("Content-Range", "bytes 400-999/1000")])) == .stream(at: 400, truncate: false))
        #expect(machine.total == 1000)
    }

    @Test func shortBodyIsATruncationNotACompletion() {
        var machine = TransferStateMachine(total: nil, validators: Validators(), acceptsRanges: false, offset: 0)
        _ = machine.nextRequest()
        _ = machine.received(Self.head(200, [("Content-Length", "1000")]))
        machine.wrote(300)
        guard case .truncated(let error) = machine.bodyEnded() else { Issue.record("expected truncation"); return }
        #expect(error.isRetryable)
    }

    @Test func shorter206IsAPartialSuccess() {
        var machine = Self.resuming(at: 0, total: 1000)
        machine = Self.resuming(at: 100)
        _ = machine.nextRequest()
        #expect(machine.received(Self.head(206, [("Content-Range", "bytes 100-499/1000")])) == .stream(at: 100, truncate: false))
        machine.wrote(400)
        #expect(machine.bodyEnded() == .partial)
        #expect(machine.nextRequest() == .from(500, ifRange: Self.etag))
    }

    @Test func chunkedBodyEndIsTheEndOfTheFile() {
        var machine = TransferStateMachine(total: nil, validators: Validators(), acceptsRanges: false, offset: 0)
        _ = machine.nextRequest()
        _ = machine.received(Self.head(200, [("Transfer-Encoding", "chunked")]))
        machine.wrote(777)
        #expect(machine.bodyEnded() == .complete)
        #expect(machine.total == 777)
    }

    @Test(arguments: [(404, false), (403, false), (500, true), (503, true), (429, true), (408, true)])
    func errorStatusesFailAndSayWhetherToRetry(status: Int, retryable: Bool) {
        var machine = TransferStateMachine(total: nil, validators: Validators(), acceptsRanges: false, offset: 0)
        _ = machine.nextRequest()
        guard case .fail(let error) = machine.received(Self.head(status)) else { Issue.record("expected failure"); return }
        #expect(error.isRetryable == retryable)
        #expect(error.status == status)
    }
}
