import Foundation

/// When to answer a call with a wrong token, per client address: a wrong guess is answered
/// ``delay`` after the previous wrong guess from the same address was, so guesses sent in
/// parallel wait their turn (N at once take N seconds) instead of all waiting the same second.
/// Another address, and a request whose tokens are right, wait for nothing.
///
/// The wait is at most ``cap``, so a client that got its token wrong many times is answered
/// within common clients' timeouts; past that, an address guesses at most as fast as it holds
/// connections open, `cap` each.
struct WrongTokenBackoff {
    typealias Instant = ContinuousClock.Instant

    var delay: Duration = .seconds(1)
    var cap: Duration = .seconds(30)
    /// When the last wrong guess of each address is answered; past entries are swept out.
    private var answered: [String: Instant] = [:]
    private var sweepAt = 1024

    /// When to answer a wrong guess that `client` (an address, ``bucket(_:)``) made at `now`.
    mutating func answerTime(for client: String, at now: Instant) -> Instant {
        let previous = answered[client].map { max($0, now) } ?? now
        let answer = min(previous + delay, now + cap)
        answered[client] = answer
        if answered.count >= sweepAt {
            // Amortised: a sweep only once the table has doubled since the last one.
            answered = answered.filter { $0.value > now }
            sweepAt = max(1024, answered.count * 2)
        }
        return answer
    }

    /// How many addresses are waiting or were answered recently.
    var count: Int { answered.count }

    /// The key guesses are counted under: an IPv4 address as it is (also when mapped into
    /// IPv6), an IPv6 address by its /64, which one machine usually holds whole.
    static func bucket(_ address: String) -> String {
        var v6 = in6_addr()
        guard address.contains(":"), inet_pton(AF_INET6, address, &v6) == 1 else { return address }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return bytes[12...].map { String($0) }.joined(separator: ".")
        }
        return stride(from: 0, to: 8, by: 2).map { String(Int(bytes[$0]) << 8 | Int(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":") + "::/64"
    }
}
