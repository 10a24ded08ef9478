import Testing
@testable import Haul

/// The manager's bookkeeping as a plain value: adding, scheduling under the limits, finishing,
/// failing down a chain of dependants, forgetting. No sockets, no store, no tasks: the effects
/// it returns are what the manager would carry out.
@Suite struct DownloadBookTests {
    typealias Entry = DownloadManager.Entry

    static let result = DownloadResult(path: "/w/f", bytes: 10, bytesFetched: 10, wasAlreadyComplete: false)

    /// A queued download of `url` at queue position `position`, waiting for `dependencies`.
    func entry(
        _ number: UInt64, host: String = "a.example", position: Int64, dependencies: [DownloadID] = [],
        paused: Bool = false
    ) -> Entry {
        let request = DownloadRequest(url: "http://\(host)/f\(number)", file: "/w/f\(number)")
        return Entry(
            lifecycle: DownloadLifecycle.added(paused: paused).0, request: request, priority: 0, position: position,
            host: host, dependencies: dependencies, id: DownloadID(rawValue: number))
    }

    /// Adds `entry` as the manager does: in the maps, then its dependencies counted.
    func add(_ entry: Entry, to book: inout DownloadBook) {
        book.insert(entry)
        for dependency in entry.dependencies {
            book.index.addDependent(entry.id, on: dependency)
            if book.entries[dependency]?.lifecycle.status != .completed { book.entries[entry.id]?.unmet += 1 }
        }
        book.reindexReady(entry.id)
    }

    /// The ids the effects launch, in order.
    func launched(_ effects: [DownloadBook.Effect]) -> [UInt64] {
        effects.compactMap { if case .launch(let id, _) = $0 { id.rawValue } else { nil } }
    }

    func announced(_ effects: [DownloadBook.Effect]) -> [String] {
        effects.compactMap { effect -> String? in
            guard case .announce(let event) = effect else { return nil }
            return switch event {
            case .added(let id): "added \(id.rawValue)"
            case .started(let id): "started \(id.rawValue)"
            case .paused(let id): "paused \(id.rawValue)"
            case .completed(let id, _): "completed \(id.rawValue)"
            case .failed(let id, _): "failed \(id.rawValue)"
            case .removed(let id): "removed \(id.rawValue)"
            case .progress, .upload: nil
            }
        }
    }

    @Test func schedulingKeepsToTheConcurrencyAndHostLimitsInQueueOrder() {
        var book = DownloadBook()
        for number in UInt64(1)...4 { add(entry(number, position: Int64(number)), to: &book) }
        add(entry(5, host: "b.example", position: 5), to: &book)
        let hosts = HostConnections(limit: 2)
        // Three at once, two per host: 1 and 2 from a, then 3 waits for a's slot and 5 goes.
        let first = book.schedule(maxConcurrent: 3, hosts: hosts)
        #expect(launched(first) == [1, 2, 5])
        #expect(announced(first) == ["started 1", "started 2", "started 5"])
        #expect(book.transferring == 3 && book.index.active.count == 3)
        #expect(book.counts[.running] == 3 && book.counts[.queued] == 2)
        // 1 finishes: its slot comes back, and the next of a's downloads starts.
        let done = book.transition(DownloadID(rawValue: 1)) { $0.attemptEnded(1, .success(Self.result)) }
        #expect(done.contains { if case .releaseHostSlot(host: "a.example") = $0 { true } else { false } })
        #expect(announced(done) == ["completed 1"])
        hosts.release(1, host: "a.example")
        #expect(launched(book.schedule(maxConcurrent: 3, hosts: hosts)) == [3])
        #expect(book.completedBytes == 10 && book.counts[.completed] == 1)
        #expect(book.index.stopped.count == 1)
    }

    /// A download refused a slot of its host is set aside, and whoever gives one of the host's
    /// slots back is told so: a mirror's checks, which hold slots outside the book, wake the
    /// manager only then (not after each of thousands of checks).
    @Test func aSlotGivenBackSaysWhetherADownloadWaitsForItsHost() {
        var book = DownloadBook()
        for number in UInt64(1)...2 { add(entry(number, position: Int64(number)), to: &book) }
        let hosts = HostConnections(limit: 1)
        // A check holds the host's one slot: both downloads are set aside.
        #expect(hosts.acquire(upTo: 1, host: "a.example") == 1)
        #expect(launched(book.schedule(maxConcurrent: 4, hosts: hosts)).isEmpty)
        #expect(hosts.release(1, host: "a.example"))
        // Told, the manager starts the first; the second still waits.
        #expect(launched(book.schedule(maxConcurrent: 4, hosts: hosts)) == [1])
        #expect(hosts.release(0, host: "a.example"))
        // The first ends and gives its slot back: the second starts, and nothing waits now.
        _ = book.transition(DownloadID(rawValue: 1)) { $0.attemptEnded(1, .success(Self.result)) }
        hosts.release(1, host: "a.example")
        #expect(launched(book.schedule(maxConcurrent: 4, hosts: hosts)) == [2])
        #expect(!hosts.release(0, host: "a.example"))
        // A check refused a slot sets nothing aside.
        #expect(hosts.acquire(upTo: 1, host: "a.example") == 0)
        #expect(!hosts.release(0, host: "a.example"))
    }

    @Test func aFailureRunsDownItsDependantsAndACompletionFreesThem() {
        var book = DownloadBook()
        let (one, two, three) = (DownloadID(rawValue: 1), DownloadID(rawValue: 2), DownloadID(rawValue: 3))
        add(entry(1, position: 1), to: &book)
        add(entry(2, position: 2, dependencies: [one]), to: &book)
        add(entry(3, position: 3, dependencies: [two]), to: &book)
        let hosts = HostConnections(limit: 16)
        #expect(launched(book.schedule(maxConcurrent: 5, hosts: hosts)) == [1], "2 and 3 wait for what they need")
        let failed = book.transition(one) { $0.attemptEnded(1, .failure(.network("reset"))) }
        #expect(announced(failed) == ["failed 1", "failed 2", "failed 3"])
        #expect(book.entries[three]?.lifecycle.error?.message == "needed download \(two) failed: needed download \(one) failed: reset")
        #expect(book.index.ready.isEmpty && book.counts[.failed] == 3)

        var other = DownloadBook()
        add(entry(1, position: 1), to: &other)
        add(entry(2, position: 2, dependencies: [one]), to: &other)
        _ = other.schedule(maxConcurrent: 5, hosts: HostConnections(limit: 16))
        _ = other.transition(one) { $0.attemptEnded(1, .success(Self.result)) }
        #expect(other.entries[two]?.unmet == 0)
        #expect(launched(other.schedule(maxConcurrent: 5, hosts: HostConnections(limit: 16))) == [2])
    }

    @Test func forgettingADownloadDeletesItsRowAndFailsWhatWaitedForIt() {
        var book = DownloadBook()
        let (one, two) = (DownloadID(rawValue: 1), DownloadID(rawValue: 2))
        add(entry(1, position: 1, paused: true), to: &book)
        add(entry(2, position: 2, dependencies: [one]), to: &book)
        let effects = book.transition(one) { $0.remove() }
        #expect(book.entries[one] == nil && book.find(RequestIndex.Key(entry(1, position: 1).request)) == nil)
        #expect(book.byFile["/w/f1"] == nil)
        #expect(effects.contains { if case .deleteRow(one) = $0 { true } else { false } })
        #expect(effects.contains { if case .discardPartial(one, path: "/w/f1") = $0 { true } else { false } })
        // In the lifecycle's order: forgetting (which fails what waited) comes before the announcement.
        #expect(announced(effects) == ["failed 2", "removed 1"])
        #expect(book.entries[two]?.lifecycle.error?.message == "needed download \(one) failed: it was removed")
        #expect(book.counts[.paused] == 0 && book.counts[.failed] == 1)
    }

    @Test func aCompletedDownloadsStoredRequestDropsItsSecrets() throws {
        var book = DownloadBook()
        var secret = entry(1, position: 1)
        secret.request.network.user = "me"
        secret.request.network.password = "pw"
        add(secret, to: &book)
        _ = book.schedule(maxConcurrent: 1, hosts: HostConnections(limit: 1))
        let effects = book.transition(secret.id) { $0.attemptEnded(1, .success(Self.result)) }
        #expect(book.entries[secret.id]?.request.network.password == nil)
        #expect(book.entries[secret.id]?.request.network.user == "me")
        let stored = try effects.compactMap { effect in
            if case .storeRequest(_, let request) = effect { try DownloadRow.storedOptions(of: request) } else { nil }
        }
        #expect(stored.count == 1 && !"\(stored)".contains("pw"))
    }

    @Test func downloadsStillBeingWrittenBoundHowManyStart() {
        var book = DownloadBook()
        for number in UInt64(1)...4 { add(entry(number, position: Int64(number)), to: &book) }
        let hosts = HostConnections(limit: 16)
        #expect(launched(book.schedule(maxConcurrent: 1, hosts: hosts, maxCommitting: 2)) == [1])
        // 1's bytes are all in: its slot goes to 2 while its file is written.
        _ = book.transition(DownloadID(rawValue: 1)) { $0.transferred(1) }
        hosts.release(1, host: "a.example")
        #expect(book.committing == 1 && book.transferring == 0)
        #expect(launched(book.schedule(maxConcurrent: 1, hosts: hosts, maxCommitting: 2)) == [2])
        _ = book.transition(DownloadID(rawValue: 2)) { $0.transferred(1) }
        hosts.release(1, host: "a.example")
        // Two files wait to be written: a slot is free, but nothing starts until one is done.
        #expect(book.committing == 2 && book.transferring == 0)
        #expect(launched(book.schedule(maxConcurrent: 1, hosts: hosts, maxCommitting: 2)).isEmpty)
        _ = book.transition(DownloadID(rawValue: 1)) { $0.attemptEnded(1, .success(Self.result)) }
        #expect(book.committing == 1 && book.counts[.completed] == 1)
        #expect(launched(book.schedule(maxConcurrent: 1, hosts: hosts, maxCommitting: 2)) == [3])
        // A download that fails while being written counts no more either.
        _ = book.transition(DownloadID(rawValue: 2)) { $0.attemptEnded(1, .failure(.io("disk full"))) }
        #expect(book.committing == 0)
    }
}
