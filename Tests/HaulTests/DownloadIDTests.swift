import Testing
@testable import Haul

struct DownloadIDTests {
    /// The ids of one process share a prefix and follow each other (their rows sit together in
    /// the store), never repeat and are never 0; they read back from their 16 hex digits.
    @Test func idsOfOneProcessFollowEachOther() throws {
        let ids = (0..<10_000).map { _ in DownloadID.next() }
        #expect(Set(ids).count == ids.count)
        #expect(!ids.contains(DownloadID(rawValue: 0)))
        #expect(Set(ids.map { $0.rawValue >> 32 }).count == 1)
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 })
        for id in ids.prefix(10) {
            #expect(id.description.count == 16)
            #expect(DownloadID(id.description) == id)
        }
    }
}
