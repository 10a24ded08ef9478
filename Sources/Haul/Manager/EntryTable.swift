/// The manager's downloads by id: the entries packed in chunks of ``chunkSize``, and an id →
/// slot map.
///
/// A `[ID: Entry]` of 100,000 entries of ~340 bytes keeps 262,144 buckets (its load factor
/// stays under 3/4), 90 MB, and while it grows holds the old buckets too: 135 MB at the peak.
/// Here the entries take what they fill plus at most one chunk, grow a chunk at a time, and only
/// the small map of slots doubles.
struct EntryTable: Sequence {
    typealias Entry = DownloadManager.Entry

    static let chunkSize = 1024

    private var chunks: [ContiguousArray<Entry>] = []
    private var slots: [DownloadID: Int32] = [:]

    var count: Int { slots.count }
    var isEmpty: Bool { slots.isEmpty }
    var keys: Dictionary<DownloadID, Int32>.Keys { slots.keys }

    subscript(id: DownloadID) -> Entry? {
        get {
            guard let slot = slots[id] else { return nil }
            return chunks[Int(slot) / Self.chunkSize][Int(slot) % Self.chunkSize]
        }
        set {
            if let newValue {
                if let slot = slots[id] {
                    chunks[Int(slot) / Self.chunkSize][Int(slot) % Self.chunkSize] = newValue
                } else {
                    append(newValue, for: id)
                }
            } else {
                _ = removeValue(forKey: id)
            }
        }
    }

    private mutating func append(_ entry: Entry, for id: DownloadID) {
        if chunks.last.map({ $0.count == Self.chunkSize }) ?? true {
            var chunk = ContiguousArray<Entry>()
            chunk.reserveCapacity(Self.chunkSize)
            chunks.append(chunk)
        }
        slots[id] = Int32((chunks.count - 1) * Self.chunkSize + chunks[chunks.count - 1].count)
        chunks[chunks.count - 1].append(entry)
    }

    /// Removes the entry for `id` (the last entry moves into its slot) and returns it.
    @discardableResult
    mutating func removeValue(forKey id: DownloadID) -> Entry? {
        guard let slot = slots.removeValue(forKey: id).map(Int.init) else { return nil }
        let last = chunks.count - 1
        guard var lastEntry = chunks[last].popLast() else { return nil }
        if chunks[last].isEmpty { chunks.removeLast() }
        let lastSlot = last * Self.chunkSize + (chunks.count > last ? chunks[last].count : 0)
        if slot == lastSlot { return lastEntry }
        swap(&lastEntry, &chunks[slot / Self.chunkSize][slot % Self.chunkSize])
        slots[chunks[slot / Self.chunkSize][slot % Self.chunkSize].id] = Int32(slot)
        return lastEntry
    }

    func makeIterator() -> AnyIterator<(key: DownloadID, value: Entry)> {
        var chunkIndex = 0
        var index = 0
        return AnyIterator {
            while chunkIndex < chunks.count {
                if index < chunks[chunkIndex].count {
                    let entry = chunks[chunkIndex][index]
                    index += 1
                    return (entry.id, entry)
                }
                chunkIndex += 1
                index = 0
            }
            return nil
        }
    }
}
