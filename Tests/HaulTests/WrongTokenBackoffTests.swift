import Testing
@testable import HaulDaemon

/// When wrong tokens are answered, as plain values (no clock, no sockets).
@Suite struct WrongTokenBackoffTests {
    let start = ContinuousClock.now

    @Test func guessesFromOneAddressWaitTheirTurn() {
        var backoff = WrongTokenBackoff()
        let answers = (0..<5).map { _ in backoff.answerTime(for: "127.0.0.1", at: start) - start }
        #expect(answers == [.seconds(1), .seconds(2), .seconds(3), .seconds(4), .seconds(5)])
        // Another address is not behind them; one that waited long enough starts afresh.
        #expect(backoff.answerTime(for: "127.0.0.2", at: start) - start == .seconds(1))
        #expect(backoff.answerTime(for: "127.0.0.1", at: start + .seconds(10)) - start == .seconds(11))
    }

    @Test func theWaitIsCapped() {
        var backoff = WrongTokenBackoff()
        var last = Duration.zero
        for _ in 0..<100 { last = backoff.answerTime(for: "10.0.0.1", at: start) - start }
        #expect(last == backoff.cap)
    }

    @Test func answeredAddressesAreSweptOut() {
        var backoff = WrongTokenBackoff()
        for n in 0..<1023 { _ = backoff.answerTime(for: "10.0.\(n / 256).\(n % 256)", at: start) }
        #expect(backoff.count == 1023)
        _ = backoff.answerTime(for: "10.9.9.9", at: start + .seconds(5))
        #expect(backoff.count == 1)
    }

    @Test(arguments: [
        ("127.0.0.1", "127.0.0.1"), ("::ffff:192.0.2.7", "192.0.2.7"), ("::1", "0:0:0:0::/64"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"), ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
    ])
    func addressesAreCountedByMachine(address: String, bucket: String) {
        #expect(WrongTokenBackoff.bucket(address) == bucket)
    }
}
