import Testing
@testable import Haul

/// The manager's table of downloads behaves as the dictionary it replaces, through every
/// order of adds, changes and removals (across chunk boundaries).
@Suite struct EntryTableTests {
    func entry(_ id: DownloadID, position: Int64) -> DownloadManager.Entry {
        DownloadManager.Entry(
            lifecycle: DownloadLifecycle.added(paused: false).0,
            request: DownloadRequest(url: "http://h/\(position)", directory: "/tmp"),
            priority: 0, position: position, host: "h", dependencies: [], id: id)
    }

    @Test func matchesADictionaryThroughRandomChanges() {
        var table = EntryTable()
        var reference: [DownloadID: Int64] = [:]
        var random = SystemRandomNumberGenerator()
        var ids: [DownloadID] = []
        for step in 0..<20_000 {
            let choice = random.next() % 10
            if choice < 6 || ids.isEmpty {
                let id = DownloadID(rawValue: random.next())
                table[id] = entry(id, position: Int64(step))
                reference[id] = Int64(step)
                ids.append(id)
            } else if choice < 8 {
                let id = ids[Int(random.next() % UInt64(ids.count))]
                table[id]?.position = -Int64(step)
                reference[id] = reference[id].map { _ in -Int64(step) }
            } else if choice < 9 {
                let index = Int(random.next() % UInt64(ids.count))
                let id = ids.remove(at: index)
                let removed = table.removeValue(forKey: id)
                #expect(removed?.id == reference.removeValue(forKey: id).map { _ in id })
            } else {
                // Removed through the subscript, in place.
                let id = ids.remove(at: Int(random.next() % UInt64(ids.count)))
                table[id] = nil
                reference[id] = nil
            }
        }
        #expect(table.count == reference.count)
        for (id, position) in reference { #expect(table[id]?.position == position && table[id]?.id == id) }
        var seen = 0
        for (id, entry) in table {
            #expect(reference[id] == entry.position)
            seen += 1
        }
        #expect(seen == reference.count)
        for id in ids { table[id] = nil }
        #expect(table.isEmpty && Array(table).isEmpty)
    }

    /// A change through the subscript of an id without an entry (optional chaining) leaves the
    /// table as it was, when the last chunk is full as when it is not.
    @Test func aChangeOfAnIdWithoutAnEntryChangesNothing() {
        var table = EntryTable()
        let ids = (1...UInt64(EntryTable.chunkSize + 1)).map(DownloadID.init(rawValue:))
        for (index, id) in ids.enumerated() {
            let missing = DownloadID(rawValue: 1 << 40 + UInt64(index))
            table[missing]?.position = 7
            #expect(table.count == index && !table.contains(missing) && table[missing] == nil)
            table[id] = entry(id, position: Int64(index))
        }
        #expect(table.count == ids.count)
        for (index, id) in ids.enumerated() { #expect(table[id]?.position == Int64(index)) }
        #expect(Array(table).count == ids.count)
    }
}
