import Testing
@testable import Haul

struct RequestIndexTests {
    private func key(_ url: String) -> RequestIndex.Key {
        RequestIndex.Key(DownloadRequest(url: url, directory: "/tmp"))
    }

    /// With every digest the same, each request still finds its own download, never another's.
    @Test func collidingDigestsAreToldApart() {
        var index = RequestIndex(digest: { _ in 7 })
        var owners: [DownloadID: RequestIndex.Key] = [:]
        let fetches = { (id: DownloadID, key: RequestIndex.Key) in owners[id] == key }
        let (a, b, c) = (DownloadID.next(), DownloadID.next(), DownloadID.next())
        for (id, url) in [(a, "http://h/a"), (b, "http://h/b"), (c, "http://h/c")] {
            owners[id] = key(url)
            index.insert(key(url), id, fetches: fetches)
        }
        #expect(index.overflowCount == 2)
        #expect(index.find(key("http://h/a"), fetches: fetches) == a)
        #expect(index.find(key("http://h/b"), fetches: fetches) == b)
        #expect(index.find(key("http://h/c"), fetches: fetches) == c)
        #expect(index.find(key("http://h/d"), fetches: fetches) == nil)

        // The one in the digest's slot goes: the others are still found.
        index.remove(key("http://h/a"), a)
        owners[a] = nil
        #expect(index.find(key("http://h/a"), fetches: fetches) == nil)
        #expect(index.find(key("http://h/b"), fetches: fetches) == b)
        index.remove(key("http://h/b"), b)
        owners[b] = nil
        #expect(index.find(key("http://h/c"), fetches: fetches) == c)

        // A later download of the same request replaces the earlier one.
        let c2 = DownloadID.next()
        owners[c2] = key("http://h/c")
        index.insert(key("http://h/c"), c2, fetches: fetches)
        #expect(index.find(key("http://h/c"), fetches: fetches) == c2)
    }

    /// Same URL into another folder is another download.
    @Test func theDestinationIsPartOfTheKey() {
        var index = RequestIndex()
        let here = RequestIndex.Key(DownloadRequest(url: "http://h/a", directory: "/tmp/x"))
        let there = RequestIndex.Key(DownloadRequest(url: "http://h/a", directory: "/tmp/y"))
        let id = DownloadID.next()
        index.insert(here, id) { $1 == here && $0 == id }
        #expect(index.find(here) { $1 == here && $0 == id } == id)
        #expect(index.find(there) { $1 == here && $0 == id } == nil)
    }
}
