import Testing

@testable import Haul

/// A fleet member's shares of the hosts' connections (`--max-connections-per-host` counted
/// across the fleet): what it asks the store for.
@Suite struct HostConnectionsTests {
    /// A member of a fleet with a share of `share` connections to the host "h".
    private func member(limit: Int = 16, share: Int) -> HostConnections {
        let hosts = HostConnections(limit: limit)
        hosts.startSharing()
        hosts.share(["h": share], asked: ["h": HostWant(want: share, open: 0)])
        return hosts
    }

    @Test func aTransferRefusedExtraConnectionsAsksForAllItLacks() {
        let hosts = member(share: 5)
        // Four connections of a big file and the first of another, which asked for four.
        #expect(hosts.acquire(upTo: 4, host: "h") == 4)
        #expect(hosts.acquire(upTo: 1, host: "h") == 1)
        #expect(!hosts.acquireSpare(host: "h", wanting: 3))
        #expect(hosts.wanted(blocked: [:], everyHost: false) == ["h": HostWant(want: 8, open: 5)])
        // Granted, the transfer takes them as its recruiter comes by.
        hosts.share(["h": 8], asked: ["h": HostWant(want: 8, open: 5)])
        #expect(hosts.acquireSpare(host: "h", wanting: 3))
        #expect(hosts.acquireSpare(host: "h", wanting: 2))
        #expect(hosts.acquireSpare(host: "h", wanting: 1))
        #expect(!hosts.acquireSpare(host: "h", wanting: 1))
    }

    @Test func twoTransfersRefusedAskForTheLargerLack() {
        let hosts = member(share: 2)
        #expect(hosts.acquire(upTo: 2, host: "h") == 2)
        #expect(!hosts.acquireSpare(host: "h", wanting: 3))
        #expect(!hosts.acquireSpare(host: "h", wanting: 1))
        // Asked again at each step: a lack is counted once, not once a step.
        #expect(!hosts.acquireSpare(host: "h", wanting: 3))
        #expect(hosts.wanted(blocked: [:], everyHost: false) == ["h": HostWant(want: 5, open: 2)])
    }

    @Test func aDownloadWaitingForTheHostGoesFirst() {
        let hosts = member(share: 2)
        #expect(hosts.acquire(upTo: 2, host: "h") == 2)
        #expect(hosts.acquire(upTo: 1, host: "h", settingAside: true) == 0)
        hosts.release(1, host: "h")
        #expect(!hosts.acquireSpare(host: "h", wanting: 3))
        // The download set aside counts; the transfer's lack does not, until it is taken.
        #expect(hosts.wanted(blocked: ["h": 1], everyHost: false) == ["h": HostWant(want: 3, open: 1)])
    }

    @Test func outsideAFleetARefusalAsksNobody() {
        let hosts = HostConnections(limit: 2)
        #expect(hosts.acquire(upTo: 2, host: "h") == 2)
        #expect(!hosts.acquireSpare(host: "h", wanting: 3))
        #expect(hosts.wanted(blocked: [:], everyHost: true).isEmpty)
    }
}
