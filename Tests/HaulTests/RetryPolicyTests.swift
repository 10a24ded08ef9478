import Testing
@testable import Haul

@Suite struct RetryPolicyTests {
    static let transient = DownloadError.network("Connection refused")

    @Test func backoffDoublesWithJitterAndStopsAtMaxTries() {
        var policy = RetryPolicy(maxTries: 4, baseWait: .seconds(1))
        #expect(policy.delay(after: Self.transient, madeProgress: false, jitter: 0) == .milliseconds(500))
        #expect(policy.delay(after: Self.transient, madeProgress: false, jitter: 0.999_999)! > .milliseconds(1900))
        #expect(policy.delay(after: Self.transient, madeProgress: false, jitter: 0) == .seconds(2))
        #expect(policy.delay(after: Self.transient, madeProgress: false, jitter: 0) == nil)
    }

    @Test func progressResetsTheBudget() {
        var policy = RetryPolicy(maxTries: 2, baseWait: .seconds(1))
        for _ in 0..<10 {
            #expect(policy.delay(after: Self.transient, madeProgress: true, jitter: 0) != nil)
        }
        #expect(policy.delay(after: Self.transient, madeProgress: false, jitter: 0) == nil)
    }

    @Test func retryAfterWins() {
        var policy = RetryPolicy(maxTries: 5, baseWait: .seconds(1))
        let busy = DownloadError.httpStatus(503, reason: "Service Unavailable", retryAfter: .seconds(7))
        #expect(policy.delay(after: busy, madeProgress: false, jitter: 0.3) == .seconds(7))
    }

    @Test(arguments: [404, 403, 401, 410])
    func clientErrorsAreFinal(status: Int) {
        var policy = RetryPolicy(maxTries: 5, baseWait: .seconds(1))
        #expect(policy.delay(after: .httpStatus(status, reason: ""), madeProgress: false, jitter: 0) == nil)
    }
}
